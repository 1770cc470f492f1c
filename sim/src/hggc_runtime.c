/*
 * The simulated HGGC runtime: a device made of worker threads.
 *
 * Each stream owns a worker thread that runs the stream's operations in order;
 * the caller returns as soon as an asynchronous operation is queued. Device
 * memory is host memory that the runtime tracks, so pointer checks are real and
 * kernels (host functions) can touch it. Exported functions never call each
 * other: an internal call would show up twice under a uprobe, which a real
 * vendor runtime does not do either.
 */
#define _GNU_SOURCE
#include "hggc_runtime.h"
#include "hgml.h"
#include "hgpti.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEVICES 8
#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u

/* ---------------------------------------------------------------- config */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_device_count = 1;
static double g_bytes_per_ns = 10.0; /* 10 GB/s */
static uint64_t g_clock_offset = 1000000000123ull;
static FILE *g_truth;
static pthread_mutex_t g_truth_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint g_correlation;
static __thread int t_device;
static __thread hggcError_t t_last_error;
static atomic_int g_profiler_active;

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t device_ns(void) { return mono_ns() + g_clock_offset; }

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

/* ----------------------------------------------------------------- hgpti */

static atomic_uint g_activity_mask;
static hgptiBufferRequestedFn g_buf_requested;
static hgptiBufferCompletedFn g_buf_completed;
static pthread_mutex_t g_act_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *g_act_buf;
static size_t g_act_size, g_act_used;
/* Read on every call, written by a subscriber that may come while the
 * process runs (a tool loaded into it): atomic. */
static _Atomic(hgptiApiCallbackFn) g_api_cb;
static void *_Atomic g_api_cb_data;

static void activity_flush_locked(void) {
    if (g_act_buf && g_buf_completed)
        g_buf_completed(g_act_buf, g_act_size, g_act_used);
    g_act_buf = NULL;
    g_act_size = g_act_used = 0;
}

/* `mask`: the kinds enabled when the work was launched. As with CUPTI,
 * activity enabled while the process runs records the work launched from
 * then on, not work queued before that runs afterwards. */
static void activity_emit(const hgptiActivity *rec, unsigned mask) {
    if (!(mask & atomic_load(&g_activity_mask) & (1u << rec->kind)) || !g_buf_requested)
        return;
    pthread_mutex_lock(&g_act_lock);
    if (g_act_buf && g_act_used + sizeof *rec > g_act_size)
        activity_flush_locked();
    if (!g_act_buf) {
        size_t max_records = 0;
        g_buf_requested(&g_act_buf, &g_act_size, &max_records);
        g_act_used = 0;
    }
    if (g_act_buf && g_act_used + sizeof *rec <= g_act_size) {
        memcpy(g_act_buf + g_act_used, rec, sizeof *rec);
        g_act_used += sizeof *rec;
    }
    pthread_mutex_unlock(&g_act_lock);
}

hgptiResult hgptiActivityEnable(hgptiActivityKind kind) {
    if (kind < HGPTI_ACTIVITY_KIND_KERNEL || kind > HGPTI_ACTIVITY_KIND_MEMSET)
        return HGPTI_ERROR_INVALID_PARAMETER;
    atomic_fetch_or(&g_activity_mask, 1u << kind);
    return HGPTI_SUCCESS;
}

hgptiResult hgptiActivityDisable(hgptiActivityKind kind) {
    if (kind < HGPTI_ACTIVITY_KIND_KERNEL || kind > HGPTI_ACTIVITY_KIND_MEMSET)
        return HGPTI_ERROR_INVALID_PARAMETER;
    atomic_fetch_and(&g_activity_mask, ~(1u << kind));
    return HGPTI_SUCCESS;
}

hgptiResult hgptiActivityRegisterCallbacks(hgptiBufferRequestedFn requested,
                                           hgptiBufferCompletedFn completed) {
    if (!requested || !completed)
        return HGPTI_ERROR_INVALID_PARAMETER;
    g_buf_requested = requested;
    g_buf_completed = completed;
    return HGPTI_SUCCESS;
}

hgptiResult hgptiActivityFlushAll(void) {
    pthread_mutex_lock(&g_act_lock);
    activity_flush_locked();
    pthread_mutex_unlock(&g_act_lock);
    return HGPTI_SUCCESS;
}

hgptiResult hgptiSubscribe(hgptiApiCallbackFn callback, void *userdata) {
    atomic_store(&g_api_cb_data, userdata);
    atomic_store(&g_api_cb, callback);
    return HGPTI_SUCCESS;
}

hgptiResult hgptiGetTimestamp(uint64_t *timestamp) {
    if (!timestamp)
        return HGPTI_ERROR_INVALID_PARAMETER;
    *timestamp = device_ns();
    return HGPTI_SUCCESS;
}

/* ---------------------------------------------------------------- metrics */

/* Each device's hgml file (see hgml.h), mapped; NULL when it could not be
 * made (the runtime works without). */
static struct hgml_shared *g_metrics[MAX_DEVICES];
static pid_t g_metrics_pid;
static pthread_mutex_t g_metrics_lock = PTHREAD_MUTEX_INITIALIZER;
/* What the simulated device has: 16 GiB. */
#define HGML_MEMORY_TOTAL (16ull << 30)

static void metrics_open(int device) {
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/hgml-%d-%d", (int)getpid(), device);
    /* O_EXCL: never write through a file (or link) someone left there. */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    struct hgml_shared *m = MAP_FAILED;
    if (ftruncate(fd, sizeof *m) == 0)
        m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        unlink(path);
        return;
    }
    m->device = (uint32_t)device;
    m->pid = (uint32_t)getpid();
    m->sm_clock_mhz = 300;
    m->power_mw = 50000;
    m->memory_total = HGML_MEMORY_TOTAL;
    m->version = HGML_VERSION;
    atomic_thread_fence(memory_order_release);
    m->magic = HGML_MAGIC;
    g_metrics[device] = m;
}

static void metrics_close(void) {
    /* A forked child inherits the mappings, not the files: only the
     * process that made them removes them. */
    if (g_metrics_pid != getpid())
        return;
    for (int d = 0; d < MAX_DEVICES; d++)
        if (g_metrics[d]) {
            char path[64];
            snprintf(path, sizeof path, "/dev/shm/hgml-%d-%d", (int)g_metrics_pid, d);
            unlink(path);
        }
}

/* Changes device's metrics under the sequence lock (see hgml.h). */
#define METRICS_UPDATE(device, m, body)                                                            \
    do {                                                                                           \
        struct hgml_shared *m = (device) >= 0 && (device) < MAX_DEVICES ? g_metrics[(device)] : NULL; \
        if (!m || g_metrics_pid != getpid())                                                       \
            break;                                                                                 \
        pthread_mutex_lock(&g_metrics_lock);                                                       \
        __atomic_store_n(&m->seq_begin, m->seq_begin + 1, __ATOMIC_RELEASE);                       \
        body;                                                                                      \
        __atomic_store_n(&m->seq_begin, m->seq_begin + 1, __ATOMIC_RELEASE);                       \
        __atomic_store_n(&m->seq_end, m->seq_begin, __ATOMIC_RELEASE);                             \
        pthread_mutex_unlock(&g_metrics_lock);                                                     \
    } while (0)

/* An operation starts (+1) or ends (-1) on a stream of device. */
static void metrics_busy(int device, int delta) {
    METRICS_UPDATE(device, m, {
        uint64_t now = mono_ns();
        if (delta > 0 && m->busy++ == 0)
            m->busy_since = now;
        if (delta < 0 && m->busy > 0 && --m->busy == 0)
            m->busy_ns += now - m->busy_since;
        m->sm_clock_mhz = m->busy ? 1500 : 300;
        m->power_mw = m->busy ? 300000 : 50000;
    });
}

static void metrics_memory(int device, int64_t delta) {
    METRICS_UPDATE(device, m, { m->memory_used += (uint64_t)delta; });
}

/* ------------------------------------------------------------ allocations */

struct alloc {
    char *base;
    size_t size;
    int device; /* -1: pinned host memory */
    struct alloc *next;
};
static struct alloc *g_allocs;
static pthread_mutex_t g_alloc_lock = PTHREAD_MUTEX_INITIALIZER;

/* Returns the device of the allocation holding [p, p+n), -2 if none. */
static int alloc_lookup(const void *p, size_t n) {
    int dev = -2;
    pthread_mutex_lock(&g_alloc_lock);
    for (struct alloc *a = g_allocs; a; a = a->next) {
        const char *c = p;
        if (c >= a->base && c + n <= a->base + a->size && (n > 0 || c < a->base + a->size)) {
            dev = a->device;
            break;
        }
    }
    pthread_mutex_unlock(&g_alloc_lock);
    return dev;
}

static void alloc_add(void *p, size_t size, int device) {
    struct alloc *a = malloc(sizeof *a);
    a->base = p;
    a->size = size;
    a->device = device;
    pthread_mutex_lock(&g_alloc_lock);
    a->next = g_allocs;
    g_allocs = a;
    pthread_mutex_unlock(&g_alloc_lock);
    if (device >= 0)
        metrics_memory(device, (int64_t)size);
}

/* Removes the allocation starting exactly at p if it is of the wanted class. */
static int alloc_remove(void *p, int pinned) {
    int found = 0;
    pthread_mutex_lock(&g_alloc_lock);
    for (struct alloc **pp = &g_allocs; *pp; pp = &(*pp)->next) {
        struct alloc *a = *pp;
        if (a->base == p && ((a->device == -1) == pinned)) {
            *pp = a->next;
            if (a->device >= 0)
                metrics_memory(a->device, -(int64_t)a->size);
            free(a);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&g_alloc_lock);
    return found;
}

/* What memory [p, p+n) is, for the activity record. */
static uint32_t memory_kind(const void *p, size_t n) {
    int dev = alloc_lookup(p, n);
    return dev >= 0 ? HGPTI_MEMORY_KIND_DEVICE
                    : dev == -1 ? HGPTI_MEMORY_KIND_PINNED : HGPTI_MEMORY_KIND_PAGEABLE;
}

/* ---------------------------------------------------------------- streams */

enum op_type { OP_KERNEL, OP_MEMCPY, OP_MEMSET, OP_EVENT };

struct hggcEvent_st {
    uint32_t magic;
    atomic_int state; /* 0 new, 1 recorded (pending), 2 complete */
    uint64_t time_ns;
};

struct op {
    enum op_type type;
    uint32_t corr;
    hggcKernel_t func;
    void **args;
    dim3 grid, block;
    size_t shared;
    void *dst;
    const void *src;
    size_t bytes;
    int kind;
    int value;
    struct hggcEvent_st *event;
    unsigned activity_mask; /* the kinds enabled at launch */
    struct op *next;
};

struct hggcStream_st {
    uint32_t magic;
    uint32_t id;
    int device;
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_cond_t idle;
    struct op *head, *tail;
    int busy;
    int stopping;
};

static pthread_mutex_t g_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hggcStream_st *g_streams[1024];
static struct hggcStream_st *g_default_streams[MAX_DEVICES];
static uint32_t g_next_stream_id = 16;

static void pace_copy(size_t bytes) {
    uint64_t ns = (uint64_t)((double)bytes / g_bytes_per_ns);
    if (ns == 0)
        return;
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static void run_op(struct hggcStream_st *s, struct op *o) {
    hgptiActivity rec = {0};
    rec.correlationId = o->corr;
    rec.deviceId = (uint32_t)s->device;
    rec.streamId = s->id;
    rec.start = device_ns();
    switch (o->type) {
    case OP_KERNEL:
        o->func(o->args);
        rec.kind = HGPTI_ACTIVITY_KIND_KERNEL;
        rec.grid[0] = o->grid.x, rec.grid[1] = o->grid.y, rec.grid[2] = o->grid.z;
        rec.block[0] = o->block.x, rec.block[1] = o->block.y, rec.block[2] = o->block.z;
        rec.sharedMem = (uint32_t)o->shared;
        rec.func = (const void *)o->func;
        break;
    case OP_MEMCPY:
        memmove(o->dst, o->src, o->bytes);
        pace_copy(o->bytes);
        rec.kind = HGPTI_ACTIVITY_KIND_MEMCPY;
        rec.bytes = o->bytes;
        rec.copyKind = (uint32_t)o->kind;
        rec.srcKind = memory_kind(o->src, o->bytes);
        rec.dstKind = memory_kind(o->dst, o->bytes);
        break;
    case OP_MEMSET:
        memset(o->dst, o->value, o->bytes);
        pace_copy(o->bytes);
        rec.kind = HGPTI_ACTIVITY_KIND_MEMSET;
        rec.bytes = o->bytes;
        rec.dstKind = memory_kind(o->dst, o->bytes);
        break;
    case OP_EVENT:
        o->event->time_ns = mono_ns();
        atomic_store(&o->event->state, 2);
        return;
    }
    rec.end = device_ns();
    activity_emit(&rec, o->activity_mask);
}

static void *stream_worker(void *arg) {
    struct hggcStream_st *s = arg;
    /* Whether this stream counts the device busy (metrics_busy). Work
     * queued behind an operation keeps it so, as a GPU's queue does: the
     * device goes idle only when the stream has nothing left to run, not
     * for the instant between two back-to-back kernels (where a metrics
     * sample would read the idle clock in the middle of a busy period). */
    int holding = 0;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->cond, &s->lock);
        if (!s->head && s->stopping)
            break;
        struct op *o = s->head;
        s->head = o->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = 1;
        pthread_mutex_unlock(&s->lock);
        if (o->type != OP_EVENT && !holding) {
            metrics_busy(s->device, 1);
            holding = 1;
        }
        run_op(s, o);
        free(o);
        pthread_mutex_lock(&s->lock);
        if (holding && !(s->head && s->head->type != OP_EVENT)) {
            pthread_mutex_unlock(&s->lock);
            metrics_busy(s->device, -1);
            holding = 0;
            pthread_mutex_lock(&s->lock);
        }
        s->busy = 0;
        if (!s->head)
            pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static struct hggcStream_st *stream_new(int device, uint32_t id) {
    struct hggcStream_st *s = calloc(1, sizeof *s);
    s->magic = STREAM_MAGIC;
    s->id = id;
    s->device = device;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_cond_init(&s->idle, NULL);
    pthread_create(&s->worker, NULL, stream_worker, s);
    return s;
}

static void stream_sync(struct hggcStream_st *s) {
    pthread_mutex_lock(&s->lock);
    while (s->head || s->busy)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void stream_push(struct hggcStream_st *s, struct op *o) {
    o->next = NULL;
    o->activity_mask = atomic_load(&g_activity_mask);
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static struct hggcStream_st *default_stream(int device) {
    pthread_mutex_lock(&g_streams_lock);
    if (!g_default_streams[device])
        g_default_streams[device] = stream_new(device, 1 + (uint32_t)device);
    struct hggcStream_st *s = g_default_streams[device];
    pthread_mutex_unlock(&g_streams_lock);
    return s;
}

/* Maps a user's handle to a live stream without dereferencing a bad pointer. */
static struct hggcStream_st *stream_resolve(hggcStream_t handle) {
    if (!handle)
        return default_stream(t_device);
    struct hggcStream_st *found = NULL;
    pthread_mutex_lock(&g_streams_lock);
    for (size_t i = 0; i < sizeof g_streams / sizeof g_streams[0]; i++)
        if (g_streams[i] == handle) {
            found = g_streams[i];
            break;
        }
    pthread_mutex_unlock(&g_streams_lock);
    return found;
}

static void sync_all_streams(void) {
    struct hggcStream_st *all[1024 + MAX_DEVICES];
    size_t n = 0;
    pthread_mutex_lock(&g_streams_lock);
    for (size_t i = 0; i < sizeof g_streams / sizeof g_streams[0]; i++)
        if (g_streams[i])
            all[n++] = g_streams[i];
    for (int d = 0; d < MAX_DEVICES; d++)
        if (g_default_streams[d])
            all[n++] = g_default_streams[d];
    pthread_mutex_unlock(&g_streams_lock);
    for (size_t i = 0; i < n; i++)
        stream_sync(all[i]);
}

/* ------------------------------------------------------------ init & truth */

static void sim_init(void) {
    const char *v;
    if ((v = getenv("HGGC_SIM_DEVICE_COUNT")))
        g_device_count = atoi(v);
    if (g_device_count < 0)
        g_device_count = 0;
    if (g_device_count > MAX_DEVICES)
        g_device_count = MAX_DEVICES;
    if ((v = getenv("HGGC_SIM_BANDWIDTH_GBPS")) && atof(v) > 0)
        g_bytes_per_ns = atof(v);
    if ((v = getenv("HGGC_SIM_CLOCK_OFFSET_NS")))
        g_clock_offset = strtoull(v, NULL, 10);
    g_metrics_pid = getpid();
    for (int d = 0; d < g_device_count; d++)
        metrics_open(d);
    if ((v = getenv("HGGC_SIM_GROUND_TRUTH")) && *v)
        g_truth = fopen(v, "a");
    if ((v = getenv("HGGC_INJECTION64_PATH")) && *v) {
        void *h = dlopen(v, RTLD_NOW | RTLD_LOCAL);
        int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
        if (!init)
            fprintf(stderr, "hggc: cannot load injection library %s: %s\n", v, dlerror());
        else
            init();
    }
}

static void ensure_init(void) { pthread_once(&g_once, sim_init); }

__attribute__((destructor)) static void sim_fini(void) {
    hgptiActivityFlushAll();
    metrics_close();
    if (g_truth) {
        pthread_mutex_lock(&g_truth_lock);
        fflush(g_truth);
        pthread_mutex_unlock(&g_truth_lock);
    }
}

struct call {
    const char *api;
    uint32_t corr;
    uint64_t start;
    /* The arguments, laid out as the x86-64 SysV registers carry them (a dim3
     * takes two slots: {x,y} then {z}), for the API callback (HGPTI_MAX_ARGS). */
    uint64_t args[HGPTI_MAX_ARGS];
};

#define ARG(x) ((uint64_t)(uintptr_t)(x))
#define ARGS(...) ((const uint64_t[HGPTI_MAX_ARGS]){__VA_ARGS__})

static struct call api_enter(const char *api, const uint64_t *args) {
    ensure_init();
    struct call c = {api, atomic_fetch_add(&g_correlation, 1) + 1, mono_ns(), {0}};
    memcpy(c.args, args, sizeof c.args);
    hgptiApiCallbackFn cb = atomic_load(&g_api_cb);
    if (cb)
        cb(atomic_load(&g_api_cb_data), 0, api, c.corr, c.args, 0);
    return c;
}

/*
 * Ends an API call: records the error for hggcGetLastError, tells the
 * subscriber, and appends one JSON line of ground truth (extra is a list of
 * already formatted JSON members, or "").
 */
static hggcError_t api_exit(struct call c, hggcError_t ret, const char *fmt, ...) {
    uint64_t end = mono_ns();
    if (ret != hggcSuccess)
        t_last_error = ret;
    hgptiApiCallbackFn cb = atomic_load(&g_api_cb);
    if (cb)
        cb(atomic_load(&g_api_cb_data), 1, c.api, c.corr, c.args, (uint64_t)(int64_t)ret);
    if (g_truth) {
        char extra[512] = "";
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(extra, sizeof extra, fmt, ap);
        va_end(ap);
        pthread_mutex_lock(&g_truth_lock);
        fprintf(g_truth,
                "{\"api\":\"%s\",\"pid\":%d,\"tid\":%d,\"ret\":%d,\"corr\":%u,\"start\":%" PRIu64
                ",\"end\":%" PRIu64 "%s%s}\n",
                c.api, getpid(), gettid_(), (int)ret, c.corr, c.start, end, *extra ? "," : "",
                extra);
        fflush(g_truth);
        pthread_mutex_unlock(&g_truth_lock);
    }
    return ret;
}

/* ------------------------------------------------------------------- API */

hggcError_t hggcGetDeviceCount(int *count) {
    struct call c = api_enter(__func__, ARGS(ARG(count)));
    if (!count)
        return api_exit(c, hggcErrorInvalidValue, "");
    *count = g_device_count;
    return api_exit(c, g_device_count ? hggcSuccess : hggcErrorNoDevice, "\"count\":%d",
                    g_device_count);
}

hggcError_t hggcSetDevice(int device) {
    struct call c = api_enter(__func__, ARGS(ARG(device)));
    if (device < 0 || device >= g_device_count)
        return api_exit(c, hggcErrorInvalidDevice, "\"device\":%d", device);
    t_device = device;
    return api_exit(c, hggcSuccess, "\"device\":%d", device);
}

hggcError_t hggcGetDevice(int *device) {
    struct call c = api_enter(__func__, ARGS(ARG(device)));
    if (!device)
        return api_exit(c, hggcErrorInvalidValue, "");
    *device = t_device;
    return api_exit(c, hggcSuccess, "\"device\":%d", t_device);
}

hggcError_t hggcMalloc(void **devPtr, size_t size) {
    struct call c = api_enter(__func__, ARGS(ARG(devPtr), ARG(size)));
    if (!devPtr)
        return api_exit(c, hggcErrorInvalidValue, "\"bytes\":%zu", size);
    if (g_device_count == 0)
        return api_exit(c, hggcErrorNoDevice, "\"bytes\":%zu", size);
    void *p = size ? malloc(size) : NULL;
    if (size && !p)
        return api_exit(c, hggcErrorMemoryAllocation, "\"bytes\":%zu", size);
    if (p)
        alloc_add(p, size, t_device);
    *devPtr = p;
    return api_exit(c, hggcSuccess, "\"bytes\":%zu,\"ptr\":%" PRIuPTR, size, (uintptr_t)p);
}

hggcError_t hggcFree(void *devPtr) {
    struct call c = api_enter(__func__, ARGS(ARG(devPtr)));
    if (!devPtr)
        return api_exit(c, hggcSuccess, "\"ptr\":0");
    if (!alloc_remove(devPtr, 0))
        return api_exit(c, hggcErrorInvalidDevicePointer, "\"ptr\":%" PRIuPTR,
                        (uintptr_t)devPtr);
    uintptr_t addr = (uintptr_t)devPtr;
    free(devPtr);
    return api_exit(c, hggcSuccess, "\"ptr\":%" PRIuPTR, addr);
}

hggcError_t hggcMallocHost(void **ptr, size_t size) {
    struct call c = api_enter(__func__, ARGS(ARG(ptr), ARG(size)));
    if (!ptr)
        return api_exit(c, hggcErrorInvalidValue, "\"bytes\":%zu", size);
    void *p = size ? malloc(size) : NULL;
    if (size && !p)
        return api_exit(c, hggcErrorMemoryAllocation, "\"bytes\":%zu", size);
    if (p)
        alloc_add(p, size, -1);
    *ptr = p;
    return api_exit(c, hggcSuccess, "\"bytes\":%zu,\"ptr\":%" PRIuPTR, size, (uintptr_t)p);
}

hggcError_t hggcFreeHost(void *ptr) {
    struct call c = api_enter(__func__, ARGS(ARG(ptr)));
    if (!ptr)
        return api_exit(c, hggcSuccess, "\"ptr\":0");
    if (!alloc_remove(ptr, 1))
        return api_exit(c, hggcErrorInvalidValue, "\"ptr\":%" PRIuPTR, (uintptr_t)ptr);
    uintptr_t addr = (uintptr_t)ptr;
    free(ptr);
    return api_exit(c, hggcSuccess, "\"ptr\":%" PRIuPTR, addr);
}

/* Checks a copy's pointers against its kind; device pointers must be ours. */
static hggcError_t check_copy(void *dst, const void *src, size_t n, int kind) {
    if (kind < hggcMemcpyHostToHost || kind > hggcMemcpyDeviceToDevice)
        return hggcErrorInvalidMemcpyDirection;
    if (!dst || !src)
        return hggcErrorInvalidValue;
    int dst_dev = alloc_lookup(dst, n) >= 0, src_dev = alloc_lookup(src, n) >= 0;
    int want_dst = kind == hggcMemcpyHostToDevice || kind == hggcMemcpyDeviceToDevice;
    int want_src = kind == hggcMemcpyDeviceToHost || kind == hggcMemcpyDeviceToDevice;
    if ((want_dst && !dst_dev) || (want_src && !src_dev))
        return hggcErrorInvalidValue;
    return hggcSuccess;
}

static hggcError_t enqueue_copy(struct call c, void *dst, const void *src, size_t n, int kind,
                                struct hggcStream_st *s) {
    struct op *o = calloc(1, sizeof *o);
    o->type = OP_MEMCPY;
    o->corr = c.corr;
    o->dst = dst;
    o->src = src;
    o->bytes = n;
    o->kind = kind;
    stream_push(s, o);
    return hggcSuccess;
}

hggcError_t hggcMemcpy(void *dst, const void *src, size_t count, hggcMemcpyKind kind) {
    struct call c = api_enter(__func__, ARGS(ARG(dst), ARG(src), ARG(count), ARG(kind)));
    hggcError_t r = check_copy(dst, src, count, (int)kind);
    if (r == hggcSuccess) {
        /* A synchronous copy goes through the default stream and waits for it. */
        struct hggcStream_st *s = default_stream(t_device);
        enqueue_copy(c, dst, src, count, (int)kind, s);
        stream_sync(s);
    }
    return api_exit(c, r, "\"bytes\":%zu,\"kind\":%d,\"stream\":0", count, (int)kind);
}

hggcError_t hggcMemcpyAsync(void *dst, const void *src, size_t count, hggcMemcpyKind kind,
                            hggcStream_t stream) {
    struct call c = api_enter(__func__, ARGS(ARG(dst), ARG(src), ARG(count), ARG(kind), ARG(stream)));
    struct hggcStream_st *s = stream_resolve(stream);
    hggcError_t r = s ? check_copy(dst, src, count, (int)kind) : hggcErrorInvalidResourceHandle;
    if (r == hggcSuccess)
        enqueue_copy(c, dst, src, count, (int)kind, s);
    return api_exit(c, r, "\"bytes\":%zu,\"kind\":%d,\"stream\":%" PRIuPTR, count, (int)kind,
                    (uintptr_t)stream);
}

static hggcError_t do_memset(struct call c, void *p, int value, size_t n,
                             struct hggcStream_st *s) {
    if (!s)
        return hggcErrorInvalidResourceHandle;
    if (!p || alloc_lookup(p, n) < 0)
        return hggcErrorInvalidValue;
    struct op *o = calloc(1, sizeof *o);
    o->type = OP_MEMSET;
    o->corr = c.corr;
    o->dst = p;
    o->value = value;
    o->bytes = n;
    stream_push(s, o);
    return hggcSuccess;
}

hggcError_t hggcMemset(void *devPtr, int value, size_t count) {
    struct call c = api_enter(__func__, ARGS(ARG(devPtr), ARG(value), ARG(count)));
    struct hggcStream_st *s = default_stream(t_device);
    hggcError_t r = do_memset(c, devPtr, value, count, s);
    if (r == hggcSuccess)
        stream_sync(s);
    return api_exit(c, r, "\"bytes\":%zu,\"stream\":0", count);
}

hggcError_t hggcMemsetAsync(void *devPtr, int value, size_t count, hggcStream_t stream) {
    struct call c = api_enter(__func__, ARGS(ARG(devPtr), ARG(value), ARG(count), ARG(stream)));
    hggcError_t r = do_memset(c, devPtr, value, count, stream_resolve(stream));
    return api_exit(c, r, "\"bytes\":%zu,\"stream\":%" PRIuPTR, count, (uintptr_t)stream);
}

hggcError_t hggcStreamCreate(hggcStream_t *stream) {
    struct call c = api_enter(__func__, ARGS(ARG(stream)));
    if (!stream)
        return api_exit(c, hggcErrorInvalidValue, "");
    /* Find the slot and publish the stream under one lock: two threads
     * creating streams at once must not share a slot. */
    struct hggcStream_st *s = NULL;
    pthread_mutex_lock(&g_streams_lock);
    for (size_t i = 0; i < sizeof g_streams / sizeof g_streams[0]; i++)
        if (!g_streams[i]) {
            s = stream_new(t_device, g_next_stream_id++);
            g_streams[i] = s;
            break;
        }
    pthread_mutex_unlock(&g_streams_lock);
    if (!s)
        return api_exit(c, hggcErrorMemoryAllocation, "");
    *stream = s;
    return api_exit(c, hggcSuccess, "\"stream\":%" PRIuPTR ",\"stream_id\":%u", (uintptr_t)s,
                    s->id);
}

hggcError_t hggcStreamSynchronize(hggcStream_t stream) {
    struct call c = api_enter(__func__, ARGS(ARG(stream)));
    struct hggcStream_st *s = stream_resolve(stream);
    if (!s)
        return api_exit(c, hggcErrorInvalidResourceHandle, "\"stream\":%" PRIuPTR,
                        (uintptr_t)stream);
    stream_sync(s);
    return api_exit(c, hggcSuccess, "\"stream\":%" PRIuPTR, (uintptr_t)stream);
}

hggcError_t hggcStreamDestroy(hggcStream_t stream) {
    struct call c = api_enter(__func__, ARGS(ARG(stream)));
    struct hggcStream_st *s = NULL;
    pthread_mutex_lock(&g_streams_lock);
    for (size_t i = 0; stream && i < sizeof g_streams / sizeof g_streams[0]; i++)
        if (g_streams[i] == stream) {
            s = g_streams[i];
            g_streams[i] = NULL;
            break;
        }
    pthread_mutex_unlock(&g_streams_lock);
    if (!s)
        return api_exit(c, hggcErrorInvalidResourceHandle, "\"stream\":%" PRIuPTR,
                        (uintptr_t)stream);
    /* Like the real thing, pending work completes before the stream goes. */
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL);
    uintptr_t handle = (uintptr_t)stream;
    s->magic = 0;
    free(s);
    return api_exit(c, hggcSuccess, "\"stream\":%" PRIuPTR, handle);
}

hggcError_t hggcDeviceSynchronize(void) {
    struct call c = api_enter(__func__, ARGS(0));
    sync_all_streams();
    return api_exit(c, hggcSuccess, "");
}

hggcError_t hggcEventCreate(hggcEvent_t *event) {
    struct call c = api_enter(__func__, ARGS(ARG(event)));
    if (!event)
        return api_exit(c, hggcErrorInvalidValue, "");
    struct hggcEvent_st *e = calloc(1, sizeof *e);
    e->magic = EVENT_MAGIC;
    *event = e;
    return api_exit(c, hggcSuccess, "\"event\":%" PRIuPTR, (uintptr_t)e);
}

static int event_ok(hggcEvent_t e) { return e && e->magic == EVENT_MAGIC; }

hggcError_t hggcEventRecord(hggcEvent_t event, hggcStream_t stream) {
    struct call c = api_enter(__func__, ARGS(ARG(event), ARG(stream)));
    struct hggcStream_st *s = stream_resolve(stream);
    if (!event_ok(event) || !s)
        return api_exit(c, hggcErrorInvalidResourceHandle, "\"stream\":%" PRIuPTR,
                        (uintptr_t)stream);
    atomic_store(&event->state, 1);
    struct op *o = calloc(1, sizeof *o);
    o->type = OP_EVENT;
    o->corr = c.corr;
    o->event = event;
    stream_push(s, o);
    return api_exit(c, hggcSuccess, "\"stream\":%" PRIuPTR, (uintptr_t)stream);
}

hggcError_t hggcEventSynchronize(hggcEvent_t event) {
    struct call c = api_enter(__func__, ARGS(ARG(event)));
    if (!event_ok(event))
        return api_exit(c, hggcErrorInvalidResourceHandle, "");
    while (atomic_load(&event->state) == 1) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return api_exit(c, hggcSuccess, "");
}

hggcError_t hggcEventElapsedTime(float *ms, hggcEvent_t start, hggcEvent_t end) {
    struct call c = api_enter(__func__, ARGS(ARG(ms), ARG(start), ARG(end)));
    if (!ms || !event_ok(start) || !event_ok(end))
        return api_exit(c, hggcErrorInvalidResourceHandle, "");
    if (atomic_load(&start->state) != 2 || atomic_load(&end->state) != 2)
        return api_exit(c, hggcErrorNotReady, "");
    *ms = (float)((double)((int64_t)(end->time_ns - start->time_ns)) / 1e6);
    return api_exit(c, hggcSuccess, "");
}

hggcError_t hggcEventDestroy(hggcEvent_t event) {
    struct call c = api_enter(__func__, ARGS(ARG(event)));
    if (!event_ok(event))
        return api_exit(c, hggcErrorInvalidResourceHandle, "");
    event->magic = 0;
    free(event);
    return api_exit(c, hggcSuccess, "");
}

hggcError_t hggcProfilerStart(void) {
    struct call c = api_enter(__func__, ARGS(0));
    atomic_store(&g_profiler_active, 1);
    return api_exit(c, hggcSuccess, "");
}

hggcError_t hggcProfilerStop(void) {
    struct call c = api_enter(__func__, ARGS(0));
    atomic_store(&g_profiler_active, 0);
    return api_exit(c, hggcSuccess, "");
}

hggcError_t hggcGetLastError(void) {
    struct call c = api_enter(__func__, ARGS(0));
    hggcError_t last = t_last_error;
    api_exit(c, last, "");
    /* api_exit recorded `last` as the thread's error again; reading it clears it. */
    t_last_error = hggcSuccess;
    return last;
}

hggcError_t hggcRunHostCallback(hggcHostCallback_t fn, void *user) {
    struct call c = api_enter(__func__, ARGS(ARG(fn), ARG(user)));
    if (!fn)
        return api_exit(c, hggcErrorInvalidValue, "");
    return api_exit(c, fn(user), "");
}

hggcError_t hggcQueryDeviceInternally(int n) {
    struct call c = api_enter(__func__, ARGS(ARG(n)));
    /* Through the exported symbol (the PLT, as a call between two of a
     * vendor's libraries would go), so a probe on it fires. */
    hggcError_t (*volatile get_device)(int *) = hggcGetDevice;
    hggcError_t ret = hggcSuccess;
    for (int i = 0; i < n && ret == hggcSuccess; i++) {
        int device;
        ret = get_device(&device);
    }
    return api_exit(c, ret, "\"internal_calls\":%d", n);
}

hggcError_t hggcLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                             size_t sharedMem, hggcStream_t stream) {
    struct call c = api_enter(__func__, ARGS(ARG(func), ARG(gridDim.x) | ARG(gridDim.y) << 32, ARG(gridDim.z), ARG(blockDim.x) | ARG(blockDim.y) << 32, ARG(blockDim.z), ARG(args), ARG(sharedMem), ARG(stream)));
    struct hggcStream_st *s = stream_resolve(stream);
    Dl_info info;
    const char *name = func && dladdr(func, &info) && info.dli_sname ? info.dli_sname : "?";
    hggcError_t r = hggcSuccess;
    if (!s)
        r = hggcErrorInvalidResourceHandle;
    else if (!func)
        r = hggcErrorInvalidDeviceFunction;
    else if (!gridDim.x || !gridDim.y || !gridDim.z || !blockDim.x || !blockDim.y ||
             !blockDim.z || blockDim.x * blockDim.y * blockDim.z > 1024)
        r = hggcErrorInvalidValue;
    if (r == hggcSuccess) {
        struct op *o = calloc(1, sizeof *o);
        o->type = OP_KERNEL;
        o->corr = c.corr;
        o->func = (hggcKernel_t)func;
        o->args = args;
        o->grid = gridDim;
        o->block = blockDim;
        o->shared = sharedMem;
        stream_push(s, o);
    }
    return api_exit(c, r,
                    "\"kernel\":\"%s\",\"func\":%" PRIuPTR ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,"
                    "%u],\"shared\":%zu,\"stream\":%" PRIuPTR,
                    name, (uintptr_t)func, gridDim.x, gridDim.y, gridDim.z, blockDim.x,
                    blockDim.y, blockDim.z, sharedMem, (uintptr_t)stream);
}

static const char *error_string(hggcError_t error) {
    switch (error) {
    case hggcSuccess: return "no error";
    case hggcErrorInvalidValue: return "invalid argument";
    case hggcErrorMemoryAllocation: return "out of memory";
    case hggcErrorInitializationError: return "initialization error";
    case hggcErrorProfilerDisabled: return "profiler disabled";
    case hggcErrorInvalidDevicePointer: return "invalid device pointer";
    case hggcErrorInvalidMemcpyDirection: return "invalid copy direction";
    case hggcErrorInvalidDeviceFunction: return "invalid device function";
    case hggcErrorNoDevice: return "no device";
    case hggcErrorInvalidDevice: return "invalid device ordinal";
    case hggcErrorInvalidResourceHandle: return "invalid resource handle";
    case hggcErrorNotReady: return "device not ready";
    }
    return "unknown error";
}

const char *hggcGetErrorString(hggcError_t error) {
    struct call c = api_enter(__func__, ARGS(ARG(error)));
    api_exit(c, hggcSuccess, "\"error\":%d", (int)error);
    return error_string(error);
}
