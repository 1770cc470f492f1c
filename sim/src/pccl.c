/*
 * The simulated PCCL collective library (NCCL with the `pccl` prefix).
 *
 * Shared memory. The unique id carries a 48-bit communicator id and the name
 * of a POSIX shared-memory segment. The first rank in pcclCommInitRank creates
 * it (O_CREAT|O_EXCL), sizes it, fills the header and publishes `ready`; the
 * others open it, wait for `ready`, claim their rank, and the last one to join
 * unlinks the name (the mapping lives on until every rank unmaps it). Layout:
 *   header   ready/nranks/id, join state, the event counter, the failed flag,
 *            barrier state, per-rank op descriptions (to catch mismatches);
 *   slots    nranks x SLOT_BYTES: collectives stage their data here;
 *   channels nranks x nranks one-way mailboxes of P2P_CHUNK bytes for sends.
 *
 * Synchronization uses C11 atomics and futexes on the shared words, not
 * process-shared pthread mutexes/conditions: a rank that dies while holding or
 * waiting on one of those can leave it unusable (a glibc condition variable
 * can block its signalers), while a futex wait simply times out. All waiting
 * goes through one event counter (`evt`): whoever changes shared state bumps
 * it and wakes every waiter; a waiter re-checks its condition, then sleeps on
 * the counter in slices of at most WAIT_SLICE_MS.
 *
 * Collectives move data in rounds: each rank copies its part of the round
 * into its slot, all meet at a barrier, each computes its output from the
 * slots (reductions in rank order, so every rank gets bit-identical results),
 * and all meet again before the slots are reused. Sends and receives use the
 * mailboxes (full/empty handshake, chunk by chunk); a SendRecv kernel
 * progresses all its operations together.
 *
 * Timeouts. A wait that sees no progress for the communicator's timeout
 * (PCCL_TIMEOUT_MS, default 10000) stores pcclRemoteError in the shared
 * `failed` flag and wakes everyone: every rank's current and later operations
 * on that communicator then fail at once. A failed kernel records the error as
 * the communicator's asynchronous error (pcclCommGetAsyncError); later calls
 * on the communicator return it and launch nothing.
 *
 * Ground truth (HGGC_SIM_GROUND_TRUTH), besides api/pid/tid/ret/corr/start/end:
 *   "comm" (the communicator id: equal in all ranks; 0 for an invalid handle),
 *   "rank", "nranks" (-1/0 for an invalid handle) on every call that takes a
 *   communicator, and:
 *   pcclGetUniqueId: "comm"; pcclCommInitRank: "comm", "rank", "nranks"
 *     (as requested), "handle"; pcclCommDestroy/Abort: "handle";
 *   pcclCommCount: "count"; pcclCommUserRank: (rank as above);
 *   pcclCommGetAsyncError: "async_error";
 *   collectives and send/recv: "op" (AllReduce, AllGather, Broadcast,
 *     ReduceScatter, Send, Recv), "count", "bytes" (count * element size),
 *     "datatype" and "datatype_name", "redop" and "redop_name" (AllReduce,
 *     ReduceScatter), "root" (Broadcast), "peer" (Send, Recv), "sendbuf",
 *     "recvbuf", "stream", "in_group" (1 when deferred by a group), "kernel"
 *     (the kernel launched by this call, "" if none);
 *   pcclGroupStart/End: "depth" (after the call), and for End "ops" (calls
 *     flushed) and "kernels" (kernels launched);
 *   pcclGetErrorString: "error" (ret is 0).
 */
#define _GNU_SOURCE
#include "pccl.h"
#include "sim_truth.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define ID_MAGIC "PCCLID01"
#define SHM_READY 0x5043434cu
#define SLOT_BYTES (256u << 10)
#define P2P_CHUNK (64u << 10)
#define CHAN_HDR 64u
#define CHAN_STRIDE (CHAN_HDR + P2P_CHUNK)
#define WAIT_SLICE_MS 100

/* The unique id's bytes. */
struct id_layout {
    char magic[8];
    uint64_t comm_id;
    char name[64];
};
_Static_assert(sizeof(struct id_layout) <= PCCL_UNIQUE_ID_BYTES, "id fits");

enum op_kind { OP_ALLREDUCE = 1, OP_ALLGATHER, OP_BROADCAST, OP_REDUCESCATTER, OP_SENDRECV };

struct meta {
    uint32_t op, dtype, redop, pad;
    uint64_t count;
    int64_t root;
    uint64_t seq;
};

struct chan {
    _Atomic uint32_t full;
    uint32_t len;
};
_Static_assert(sizeof(struct chan) <= CHAN_HDR, "mailbox header fits");

struct shm {
    _Atomic uint32_t ready;
    uint32_t nranks;
    uint64_t comm_id;
    uint64_t size;
    _Atomic uint32_t joined;
    _Atomic uint32_t evt;
    _Atomic uint32_t failed; /* 0, or the pcclResult_t every rank now fails with */
    _Atomic uint32_t bar_count;
    _Atomic uint32_t bar_gen;
    _Atomic uint32_t claimed[PCCL_MAX_RANKS];
    _Atomic int32_t pid[PCCL_MAX_RANKS];
    struct meta meta[PCCL_MAX_RANKS];
};

#define SLOTS_OFF (((sizeof(struct shm)) + 4095) & ~(size_t)4095)

static size_t shm_size(int nranks) {
    return SLOTS_OFF + (size_t)nranks * SLOT_BYTES + (size_t)nranks * nranks * CHAN_STRIDE;
}

struct pcclComm {
    int rank, nranks;
    uint64_t id;
    struct shm *shm;
    size_t size;
    int timeout_ms;
    uint64_t seq; /* collectives run so far (kernels of one comm run one at a time) */
    atomic_int async_error;
    int pending; /* kernels launched and not finished; under lock */
    pthread_mutex_t lock;
    pthread_cond_t idle;
};

static sim_live g_comms = SIM_LIVE_INIT;

static char *slot(struct pcclComm *c, int r) {
    return (char *)c->shm + SLOTS_OFF + (size_t)r * SLOT_BYTES;
}

static struct chan *chan(struct pcclComm *c, int from, int to) {
    return (struct chan *)((char *)c->shm + SLOTS_OFF + (size_t)c->nranks * SLOT_BYTES +
                           ((size_t)from * c->nranks + to) * CHAN_STRIDE);
}

static char *chan_data(struct chan *ch) { return (char *)ch + CHAN_HDR; }

/* ------------------------------------------------------------ data types */

static size_t elem_size(int dtype) {
    switch (dtype) {
    case pcclInt8: case pcclUint8: return 1;
    case pcclFloat16: case pcclBfloat16: return 2;
    case pcclInt32: case pcclUint32: case pcclFloat32: return 4;
    case pcclInt64: case pcclUint64: case pcclFloat64: return 8;
    }
    return 0;
}

static const char *dtype_name(int dtype) {
    static const char *names[] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                  "uint64",  "float16", "float32", "float64", "bfloat16"};
    return dtype >= 0 && dtype < pcclNumTypes ? names[dtype] : "invalid";
}

static const char *redop_name(int op) {
    static const char *names[] = {"sum", "prod", "max", "min", "avg"};
    return op >= 0 && op < pcclNumOps ? names[op] : "invalid";
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, f;
    if (exp == 0 && man == 0) {
        f = sign;
    } else if (exp == 0) { /* subnormal: normalize */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400));
        f = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
    } else if (exp == 31) {
        f = sign | 0x7f800000u | (man << 13);
    } else {
        f = sign | ((exp + 112) << 23) | (man << 13);
    }
    float out;
    memcpy(&out, &f, sizeof out);
    return out;
}

static uint16_t float_to_half(float x) {
    uint32_t f;
    memcpy(&f, &x, sizeof f);
    uint32_t sign = (f >> 16) & 0x8000, man = f & 0x7fffff;
    int fexp = (int)((f >> 23) & 0xff), exp = fexp - 127 + 15;
    if (fexp == 0xff)
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        unsigned shift = (unsigned)(14 - exp);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* a carry into the exponent is still right (up to infinity) */
    return (uint16_t)h;
}

static float bf16_to_float(uint16_t h) {
    uint32_t f = (uint32_t)h << 16;
    float out;
    memcpy(&out, &f, sizeof out);
    return out;
}

static uint16_t float_to_bf16(float x) {
    uint32_t f;
    memcpy(&f, &x, sizeof f);
    if ((f & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((f >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((f + 0x7fff + ((f >> 16) & 1)) >> 16);
}

#define ID(x) (x)
#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define SADD(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define SMUL(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))
#define REDUCE(T, A, LOAD, STORE, ADDF, MULF)                                          \
    for (size_t i = 0; i < len; i++) {                                               \
        A acc = LOAD(((const T *)src[0])[i]);                                        \
        for (int r = 1; r < n; r++) {                                                \
            A v = LOAD(((const T *)src[r])[i]);                                      \
            switch (op) {                                                            \
            case pcclProd: acc = MULF(acc, v); break;                                \
            case pcclMax: acc = v > acc ? v : acc; break;                            \
            case pcclMin: acc = v < acc ? v : acc; break;                            \
            default: acc = ADDF(acc, v); break;                                      \
            }                                                                        \
        }                                                                            \
        if (op == pcclAvg)                                                           \
            acc = (A)(acc / (A)n);                                                   \
        ((T *)dst)[i] = (T)STORE(acc);                                               \
    }

/* dst[i] = op over r of src[r][i], in rank order. */
static void reduce(void *dst, char *const *src, int n, size_t len, int dtype, int op) {
    switch (dtype) {
    case pcclInt8: REDUCE(int8_t, int64_t, ID, ID, SADD, SMUL); break;
    case pcclUint8: REDUCE(uint8_t, uint64_t, ID, ID, ADD, MUL); break;
    case pcclInt32: REDUCE(int32_t, int64_t, ID, ID, SADD, SMUL); break;
    case pcclUint32: REDUCE(uint32_t, uint64_t, ID, ID, ADD, MUL); break;
    case pcclInt64: REDUCE(int64_t, int64_t, ID, ID, SADD, SMUL); break;
    case pcclUint64: REDUCE(uint64_t, uint64_t, ID, ID, ADD, MUL); break;
    case pcclFloat16: REDUCE(uint16_t, float, half_to_float, float_to_half, ADD, MUL); break;
    case pcclFloat32: REDUCE(float, float, ID, ID, ADD, MUL); break;
    case pcclFloat64: REDUCE(double, double, ID, ID, ADD, MUL); break;
    case pcclBfloat16: REDUCE(uint16_t, float, bf16_to_float, float_to_bf16, ADD, MUL); break;
    }
}

/* ---------------------------------------------------------------- waiting */

static void futex_wait_ms(_Atomic uint32_t *addr, uint32_t val, uint64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void notify(struct shm *s) {
    atomic_fetch_add(&s->evt, 1);
    syscall(SYS_futex, (uint32_t *)&s->evt, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Marks the communicator failed for every rank (the first reason wins). */
static void fail_shared(struct pcclComm *c, pcclResult_t r) {
    uint32_t zero = 0;
    atomic_compare_exchange_strong(&c->shm->failed, &zero, (uint32_t)r);
    notify(c->shm);
}

static uint64_t deadline_after(int ms) { return sim_mono_ns() + (uint64_t)ms * 1000000ull; }

/* Sleeps until the event counter moves from e, the deadline or a slice. */
static void wait_event(struct pcclComm *c, uint32_t e, uint64_t deadline) {
    uint64_t now = sim_mono_ns();
    uint64_t ms = deadline > now ? (deadline - now + 999999) / 1000000 : 1;
    futex_wait_ms(&c->shm->evt, e, ms < WAIT_SLICE_MS ? ms : WAIT_SLICE_MS);
}

/* Waits until pred holds; fails on a failed communicator or after the timeout. */
static pcclResult_t wait_for(struct pcclComm *c, int (*pred)(struct pcclComm *, const void *),
                             const void *arg) {
    uint64_t deadline = deadline_after(c->timeout_ms);
    for (;;) {
        uint32_t e = atomic_load(&c->shm->evt);
        if (pred(c, arg))
            return pcclSuccess;
        uint32_t f = atomic_load(&c->shm->failed);
        if (f)
            return (pcclResult_t)f;
        if (sim_mono_ns() >= deadline) {
            fail_shared(c, pcclRemoteError);
            return pcclRemoteError;
        }
        wait_event(c, e, deadline);
    }
}

static int gen_moved(struct pcclComm *c, const void *arg) {
    return atomic_load(&c->shm->bar_gen) != *(const uint32_t *)arg;
}

static int all_joined(struct pcclComm *c, const void *arg) {
    (void)arg;
    return atomic_load(&c->shm->joined) >= (uint32_t)c->nranks;
}

static pcclResult_t barrier(struct pcclComm *c) {
    struct shm *s = c->shm;
    uint32_t gen = atomic_load(&s->bar_gen);
    if (atomic_fetch_add(&s->bar_count, 1) + 1 == (uint32_t)c->nranks) {
        atomic_store(&s->bar_count, 0);
        atomic_fetch_add(&s->bar_gen, 1);
        notify(s);
        return pcclSuccess;
    }
    return wait_for(c, gen_moved, &gen);
}

/* ---------------------------------------------------------------- kernels */

struct p2p {
    int send, peer;
    char *buf;
    size_t bytes, done;
};

struct work {
    void *argv[1]; /* argv[0] points at this block: the kernel's args */
    int op;
    struct pcclComm *comm;
    const void *send;
    void *recv;
    size_t count;
    int dtype, redop, root;
    int nops;
    struct p2p *ops;
    hggcStream_t stream;
};

static pcclResult_t run_collective(struct work *w) {
    struct pcclComm *c = w->comm;
    struct shm *s = c->shm;
    int n = c->nranks, me = c->rank;
    size_t es = elem_size(w->dtype);
    struct meta m = {(uint32_t)w->op, (uint32_t)w->dtype, (uint32_t)w->redop, 0, w->count,
                     w->root, ++c->seq};
    s->meta[me] = m;
    size_t per = w->op == OP_REDUCESCATTER ? SLOT_BYTES / ((size_t)n * es) : SLOT_BYTES / es;
    const char *send = w->send;
    char *recv = w->recv, *mine = slot(c, me);
    char *srcs[PCCL_MAX_RANKS];
    for (size_t off = 0; off < w->count; off += per) {
        size_t len = w->count - off < per ? w->count - off : per, bytes = len * es;
        switch (w->op) {
        case OP_ALLREDUCE:
        case OP_ALLGATHER: memcpy(mine, send + off * es, bytes); break;
        case OP_BROADCAST:
            if (me == w->root)
                memcpy(mine, send + off * es, bytes);
            break;
        case OP_REDUCESCATTER:
            for (int d = 0; d < n; d++)
                memcpy(mine + (size_t)d * bytes, send + ((size_t)d * w->count + off) * es, bytes);
            break;
        }
        pcclResult_t r = barrier(c);
        if (r != pcclSuccess)
            return r;
        if (off == 0)
            for (int i = 0; i < n; i++)
                if (memcmp(&s->meta[i], &m, sizeof m) != 0) {
                    fail_shared(c, pcclInvalidUsage);
                    return pcclInvalidUsage;
                }
        switch (w->op) {
        case OP_ALLREDUCE:
            for (int i = 0; i < n; i++)
                srcs[i] = slot(c, i);
            reduce(recv + off * es, srcs, n, len, w->dtype, w->redop);
            break;
        case OP_ALLGATHER:
            for (int i = 0; i < n; i++)
                memcpy(recv + ((size_t)i * w->count + off) * es, slot(c, i), bytes);
            break;
        case OP_BROADCAST: memcpy(recv + off * es, slot(c, w->root), bytes); break;
        case OP_REDUCESCATTER:
            for (int i = 0; i < n; i++)
                srcs[i] = slot(c, i) + (size_t)me * bytes;
            reduce(recv + off * es, srcs, n, len, w->dtype, w->redop);
            break;
        }
        if ((r = barrier(c)) != pcclSuccess)
            return r;
    }
    return pcclSuccess;
}

static pcclResult_t run_p2p(struct work *w) {
    struct pcclComm *c = w->comm;
    struct shm *s = c->shm;
    uint64_t deadline = deadline_after(c->timeout_ms);
    for (;;) {
        uint32_t e = atomic_load(&s->evt);
        int progress = 0, left = 0;
        for (int i = 0; i < w->nops; i++) {
            struct p2p *o = &w->ops[i];
            if (o->done >= o->bytes)
                continue;
            left++;
            /* Per direction and peer, operations go in call order. */
            int blocked = 0;
            for (int k = 0; k < i && !blocked; k++)
                blocked = w->ops[k].send == o->send && w->ops[k].peer == o->peer &&
                          w->ops[k].done < w->ops[k].bytes;
            if (blocked)
                continue;
            struct chan *ch = o->send ? chan(c, c->rank, o->peer) : chan(c, o->peer, c->rank);
            if (o->send && atomic_load(&ch->full) == 0) {
                size_t len = o->bytes - o->done < P2P_CHUNK ? o->bytes - o->done : P2P_CHUNK;
                memcpy(chan_data(ch), o->buf + o->done, len);
                ch->len = (uint32_t)len;
                atomic_store(&ch->full, 1);
                o->done += len;
                progress = 1;
            } else if (!o->send && atomic_load(&ch->full) == 1) {
                size_t len = ch->len;
                if (len > o->bytes - o->done) {
                    fail_shared(c, pcclInvalidUsage); /* the peer sent more */
                    return pcclInvalidUsage;
                }
                memcpy(o->buf + o->done, chan_data(ch), len);
                atomic_store(&ch->full, 0);
                o->done += len;
                progress = 1;
            }
            if (o->done >= o->bytes)
                left--;
        }
        if (progress) {
            notify(s);
            deadline = deadline_after(c->timeout_ms);
        }
        if (!left)
            return pcclSuccess;
        if (progress)
            continue;
        uint32_t f = atomic_load(&s->failed);
        if (f)
            return (pcclResult_t)f;
        if (sim_mono_ns() >= deadline) {
            fail_shared(c, pcclRemoteError);
            return pcclRemoteError;
        }
        wait_event(c, e, deadline);
    }
}

static void work_free(struct work *w) {
    free(w->ops);
    free(w);
}

static void kernel_body(void **args) {
    struct work *w = args[0];
    struct pcclComm *c = w->comm;
    pcclResult_t r = (pcclResult_t)atomic_load(&c->async_error);
    if (r == pcclSuccess)
        r = (pcclResult_t)atomic_load(&c->shm->failed);
    if (r == pcclSuccess)
        r = w->op == OP_SENDRECV ? run_p2p(w) : run_collective(w);
    if (r != pcclSuccess) {
        int zero = 0;
        atomic_compare_exchange_strong(&c->async_error, &zero, (int)r);
    }
    work_free(w);
    pthread_mutex_lock(&c->lock);
    if (--c->pending == 0)
        pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->lock);
}

void pcclKernel_AllReduce(void **args) { kernel_body(args); }
void pcclKernel_AllGather(void **args) { kernel_body(args); }
void pcclKernel_Broadcast(void **args) { kernel_body(args); }
void pcclKernel_ReduceScatter(void **args) { kernel_body(args); }
void pcclKernel_SendRecv(void **args) { kernel_body(args); }

static hggcKernel_t kernel_of(int op) {
    switch (op) {
    case OP_ALLREDUCE: return pcclKernel_AllReduce;
    case OP_ALLGATHER: return pcclKernel_AllGather;
    case OP_BROADCAST: return pcclKernel_Broadcast;
    case OP_REDUCESCATTER: return pcclKernel_ReduceScatter;
    default: return pcclKernel_SendRecv;
    }
}

static const char *kernel_name(int op) {
    switch (op) {
    case OP_ALLREDUCE: return "pcclKernel_AllReduce";
    case OP_ALLGATHER: return "pcclKernel_AllGather";
    case OP_BROADCAST: return "pcclKernel_Broadcast";
    case OP_REDUCESCATTER: return "pcclKernel_ReduceScatter";
    default: return "pcclKernel_SendRecv";
    }
}

/* Launches w on its stream (w is consumed either way). */
static pcclResult_t launch(struct work *w) {
    struct pcclComm *c = w->comm;
    w->argv[0] = w;
    pthread_mutex_lock(&c->lock);
    c->pending++;
    pthread_mutex_unlock(&c->lock);
    dim3 grid = {1, 1, 1}, block = {256, 1, 1};
    if (hggcLaunchKernel((const void *)kernel_of(w->op), grid, block, w->argv, 0, w->stream) ==
        hggcSuccess)
        return pcclSuccess;
    work_free(w);
    pthread_mutex_lock(&c->lock);
    if (--c->pending == 0)
        pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->lock);
    return pcclUnhandledCudaError;
}

/* ------------------------------------------------------------------ groups */

static __thread int t_group_depth;
static __thread struct work **t_group;
static __thread int t_ngroup, t_capgroup;

static int group_add(struct work *w) {
    if (t_ngroup == t_capgroup) {
        int cap = t_capgroup ? t_capgroup * 2 : 16;
        struct work **g = realloc(t_group, (size_t)cap * sizeof *g);
        if (!g)
            return 0;
        t_group = g;
        t_capgroup = cap;
    }
    t_group[t_ngroup++] = w;
    return 1;
}

static int group_uses(const struct pcclComm *c) {
    for (int i = 0; i < t_ngroup; i++)
        if (t_group[i]->comm == c)
            return 1;
    return 0;
}

/* Launches the recorded calls: collectives in order, then one SendRecv
 * kernel per (communicator, stream). Returns the first error. */
static pcclResult_t group_flush(int *kernels) {
    pcclResult_t first = pcclSuccess;
    for (int i = 0; i < t_ngroup; i++) {
        struct work *w = t_group[i];
        if (!w || w->op == OP_SENDRECV)
            continue;
        t_group[i] = NULL;
        pcclResult_t r = launch(w);
        *kernels += r == pcclSuccess;
        if (first == pcclSuccess)
            first = r;
    }
    for (int i = 0; i < t_ngroup; i++) {
        struct work *w = t_group[i];
        if (!w)
            continue;
        t_group[i] = NULL;
        for (int k = i + 1; k < t_ngroup; k++) {
            struct work *o = t_group[k];
            if (!o || o->comm != w->comm || o->stream != w->stream)
                continue;
            struct p2p *ops = realloc(w->ops, (size_t)(w->nops + o->nops) * sizeof *ops);
            if (!ops) {
                if (first == pcclSuccess)
                    first = pcclSystemError;
                continue;
            }
            memcpy(ops + w->nops, o->ops, (size_t)o->nops * sizeof *ops);
            w->ops = ops;
            w->nops += o->nops;
            work_free(o);
            t_group[k] = NULL;
        }
        pcclResult_t r = launch(w);
        *kernels += r == pcclSuccess;
        if (first == pcclSuccess)
            first = r;
    }
    t_ngroup = 0;
    return first;
}

/* -------------------------------------------------------------- API helpers */

static int comm_live(const struct pcclComm *c) { return c && sim_live_has(&g_comms, c); }

static void json_comm(sim_json *j, const struct pcclComm *c, int live) {
    sim_json_uint(j, "comm", live ? c->id : 0);
    sim_json_int(j, "rank", live ? c->rank : -1);
    sim_json_int(j, "nranks", live ? c->nranks : 0);
}

static const char *op_name(int op, int send) {
    switch (op) {
    case OP_ALLREDUCE: return "AllReduce";
    case OP_ALLGATHER: return "AllGather";
    case OP_BROADCAST: return "Broadcast";
    case OP_REDUCESCATTER: return "ReduceScatter";
    default: return send ? "Send" : "Recv";
    }
}

/* Validates, then launches or records one operation, and writes its truth. */
static pcclResult_t submit(sim_call call, struct work *proto, int send_side) {
    struct pcclComm *c = proto->comm;
    int live = comm_live(c), op = proto->op, dt = proto->dtype;
    int has_redop = op == OP_ALLREDUCE || op == OP_REDUCESCATTER;
    int has_root = op == OP_BROADCAST, is_p2p = op == OP_SENDRECV;
    size_t es = elem_size(dt);
    const char *kernel = "";
    int deferred = 0;
    pcclResult_t r = pcclSuccess;
    if (!live || es == 0 || dt < 0 || dt >= pcclNumTypes)
        r = pcclInvalidArgument;
    else if (has_redop && (proto->redop < 0 || proto->redop >= pcclNumOps))
        r = pcclInvalidArgument;
    else if ((has_root || is_p2p) && (proto->root < 0 || proto->root >= c->nranks))
        r = pcclInvalidArgument;
    else if (proto->count && (!proto->recv && !(is_p2p && send_side)))
        r = pcclInvalidArgument;
    else if (proto->count && !proto->send && (!is_p2p || send_side) &&
             !(has_root && c->rank != proto->root))
        r = pcclInvalidArgument;
    else
        r = (pcclResult_t)atomic_load(&c->async_error);
    if (r == pcclSuccess && proto->count) {
        struct work *w = calloc(1, sizeof *w);
        struct p2p *o = is_p2p ? calloc(1, sizeof *o) : NULL;
        if (!w || (is_p2p && !o)) {
            free(w);
            free(o);
            r = pcclSystemError;
        } else {
            *w = *proto;
            if (is_p2p) {
                o->send = send_side;
                o->peer = proto->root;
                o->buf = send_side ? (char *)proto->send : proto->recv;
                o->bytes = proto->count * es;
                w->ops = o;
                w->nops = 1;
            }
            if (t_group_depth > 0) {
                deferred = 1;
                if (!group_add(w)) {
                    work_free(w);
                    r = pcclSystemError;
                }
            } else if ((r = launch(w)) == pcclSuccess) {
                kernel = kernel_name(op);
            }
        }
    }
    sim_json j = {0};
    json_comm(&j, c, live);
    sim_json_str(&j, "op", op_name(op, send_side));
    sim_json_uint(&j, "count", proto->count);
    sim_json_uint(&j, "bytes", proto->count * es);
    sim_json_int(&j, "datatype", dt);
    sim_json_str(&j, "datatype_name", dtype_name(dt));
    if (has_redop) {
        sim_json_int(&j, "redop", proto->redop);
        sim_json_str(&j, "redop_name", redop_name(proto->redop));
    }
    if (has_root)
        sim_json_int(&j, "root", proto->root);
    if (is_p2p)
        sim_json_int(&j, "peer", proto->root);
    sim_json_ptr(&j, "sendbuf", proto->send);
    sim_json_ptr(&j, "recvbuf", proto->recv);
    sim_json_ptr(&j, "stream", proto->stream);
    sim_json_int(&j, "in_group", deferred);
    sim_json_str(&j, "kernel", kernel);
    sim_exit(call, r, &j);
    return r;
}

static int timeout_ms(void) {
    const char *v = getenv("PCCL_TIMEOUT_MS");
    long ms = v ? strtol(v, NULL, 10) : 0;
    return ms > 0 && ms < INT_MAX ? (int)ms : PCCL_DEFAULT_TIMEOUT_MS;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Opens (or creates) and maps the segment; 0 or an error. */
static pcclResult_t shm_attach(struct pcclComm *c, const struct id_layout *id) {
    size_t size = shm_size(c->nranks);
    uint64_t deadline = deadline_after(c->timeout_ms);
    int fd, creator = 0;
    for (;;) {
        fd = shm_open(id->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            creator = 1;
            break;
        }
        if (errno != EEXIST)
            return pcclSystemError;
        fd = shm_open(id->name, O_RDWR, 0600);
        if (fd >= 0)
            break;
        if (errno != ENOENT)
            return pcclSystemError;
        if (sim_mono_ns() >= deadline)
            return pcclRemoteError;
        sleep_ms(1);
    }
    if (creator && ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        shm_unlink(id->name);
        return pcclSystemError;
    }
    /* Wait for the creator to size it. */
    struct stat st = {0};
    while (!creator) {
        if (fstat(fd, &st) != 0) {
            close(fd);
            return pcclSystemError;
        }
        if (st.st_size != 0)
            break;
        if (sim_mono_ns() >= deadline) {
            close(fd);
            return pcclRemoteError;
        }
        sleep_ms(1);
    }
    if (!creator && (size_t)st.st_size != size) {
        close(fd);
        return pcclInvalidArgument; /* nranks differs from the creator's */
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        if (creator)
            shm_unlink(id->name);
        return pcclSystemError;
    }
    c->shm = p;
    c->size = size;
    struct shm *s = p;
    if (creator) {
        s->nranks = (uint32_t)c->nranks;
        s->comm_id = id->comm_id;
        s->size = size;
        atomic_store(&s->ready, SHM_READY);
        return pcclSuccess;
    }
    while (atomic_load(&s->ready) != SHM_READY && sim_mono_ns() < deadline)
        sleep_ms(1);
    if (atomic_load(&s->ready) != SHM_READY)
        return pcclRemoteError;
    if (s->nranks != (uint32_t)c->nranks || s->comm_id != id->comm_id)
        return pcclInvalidArgument;
    return pcclSuccess;
}

static void comm_free(struct pcclComm *c) {
    if (c->shm)
        munmap(c->shm, c->size);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->idle);
    free(c);
}

static void comm_wait_idle(struct pcclComm *c) {
    pthread_mutex_lock(&c->lock);
    while (c->pending > 0)
        pthread_cond_wait(&c->idle, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

/* -------------------------------------------------------------------- API */

pcclResult_t pcclGetUniqueId(pcclUniqueId *uniqueId) {
    sim_call call = sim_enter(__func__);
    pcclResult_t r = pcclSuccess;
    uint64_t id = 0;
    if (!uniqueId) {
        r = pcclInvalidArgument;
    } else {
        /* The system call, not glibc's getrandom (2.25): the release's
         * copy of this library needs glibc 2.17 only. */
        if (syscall(SYS_getrandom, &id, sizeof id, 0) != (long)sizeof id)
            id = sim_mono_ns() ^ ((uint64_t)getpid() << 32);
        id &= 0xffffffffffffull; /* 48 bits: exact in any JSON reader */
        if (!id)
            id = 1;
        struct id_layout l;
        memset(&l, 0, sizeof l);
        memcpy(l.magic, ID_MAGIC, sizeof l.magic);
        l.comm_id = id;
        snprintf(l.name, sizeof l.name, "/pccl-%d-%012" PRIx64, (int)getpid(), id);
        memset(uniqueId, 0, sizeof *uniqueId);
        memcpy(uniqueId->internal, &l, sizeof l);
    }
    sim_json j = {0};
    sim_json_uint(&j, "comm", id);
    sim_exit(call, r, &j);
    return r;
}

pcclResult_t pcclCommInitRank(pcclComm_t *comm, int nranks, pcclUniqueId commId, int rank) {
    sim_call call = sim_enter(__func__);
    struct id_layout id;
    memcpy(&id, commId.internal, sizeof id);
    id.name[sizeof id.name - 1] = 0;
    struct pcclComm *c = NULL;
    pcclResult_t r = pcclSuccess;
    if (!comm || nranks < 1 || nranks > PCCL_MAX_RANKS || rank < 0 || rank >= nranks ||
        memcmp(id.magic, ID_MAGIC, sizeof id.magic) != 0 || id.name[0] != '/')
        r = pcclInvalidArgument;
    else if (!(c = calloc(1, sizeof *c)))
        r = pcclSystemError;
    if (r == pcclSuccess) {
        c->rank = rank;
        c->nranks = nranks;
        c->id = id.comm_id;
        c->timeout_ms = timeout_ms();
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->idle, NULL);
        r = shm_attach(c, &id);
    }
    if (r == pcclSuccess) {
        struct shm *s = c->shm;
        uint32_t zero = 0;
        if (!atomic_compare_exchange_strong(&s->claimed[rank], &zero, 1)) {
            r = pcclInvalidUsage; /* two processes claimed this rank */
        } else {
            atomic_store(&s->pid[rank], (int32_t)getpid());
            if (atomic_fetch_add(&s->joined, 1) + 1 == (uint32_t)nranks)
                shm_unlink(id.name); /* everyone has it mapped */
            notify(s);
            r = wait_for(c, all_joined, NULL);
            if (r != pcclSuccess)
                shm_unlink(id.name); /* give up: leave nothing behind */
        }
    }
    if (r == pcclSuccess && !sim_live_add(&g_comms, c))
        r = pcclSystemError;
    if (r == pcclSuccess) {
        *comm = c;
    } else if (c) {
        comm_free(c);
        c = NULL;
    }
    sim_json j = {0};
    sim_json_uint(&j, "comm", id.comm_id & 0xffffffffffffull);
    sim_json_int(&j, "rank", rank);
    sim_json_int(&j, "nranks", nranks);
    sim_json_ptr(&j, "handle", c);
    sim_exit(call, r, &j);
    return r;
}

static pcclResult_t comm_close(sim_call call, pcclComm_t comm, int abort) {
    pcclResult_t r = pcclSuccess;
    int live = comm_live(comm);
    sim_json j = {0};
    json_comm(&j, comm, live);
    sim_json_ptr(&j, "handle", comm);
    if (!live)
        r = pcclInvalidArgument;
    else if (group_uses(comm))
        r = pcclInvalidUsage; /* recorded in an open group */
    else {
        sim_live_remove(&g_comms, comm);
        if (abort)
            fail_shared(comm, pcclRemoteError);
        comm_wait_idle(comm);
        comm_free(comm);
    }
    sim_exit(call, r, &j);
    return r;
}

pcclResult_t pcclCommDestroy(pcclComm_t comm) {
    sim_call call = sim_enter(__func__);
    return comm_close(call, comm, 0);
}

pcclResult_t pcclCommAbort(pcclComm_t comm) {
    sim_call call = sim_enter(__func__);
    return comm_close(call, comm, 1);
}

pcclResult_t pcclCommCount(const pcclComm_t comm, int *count) {
    sim_call call = sim_enter(__func__);
    int live = comm_live(comm);
    pcclResult_t r = live && count ? pcclSuccess : pcclInvalidArgument;
    if (r == pcclSuccess)
        *count = comm->nranks;
    sim_json j = {0};
    json_comm(&j, comm, live);
    sim_json_int(&j, "count", live ? comm->nranks : 0);
    sim_exit(call, r, &j);
    return r;
}

pcclResult_t pcclCommUserRank(const pcclComm_t comm, int *rank) {
    sim_call call = sim_enter(__func__);
    int live = comm_live(comm);
    pcclResult_t r = live && rank ? pcclSuccess : pcclInvalidArgument;
    if (r == pcclSuccess)
        *rank = comm->rank;
    sim_json j = {0};
    json_comm(&j, comm, live);
    sim_exit(call, r, &j);
    return r;
}

pcclResult_t pcclCommGetAsyncError(pcclComm_t comm, pcclResult_t *asyncError) {
    sim_call call = sim_enter(__func__);
    int live = comm_live(comm);
    pcclResult_t r = live && asyncError ? pcclSuccess : pcclInvalidArgument;
    int e = live ? atomic_load(&comm->async_error) : 0;
    if (r == pcclSuccess)
        *asyncError = (pcclResult_t)e;
    sim_json j = {0};
    json_comm(&j, comm, live);
    sim_json_int(&j, "async_error", e);
    sim_exit(call, r, &j);
    return r;
}

pcclResult_t pcclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           pcclDataType_t datatype, pcclRedOp_t op, pcclComm_t comm,
                           hggcStream_t stream) {
    sim_call call = sim_enter(__func__);
    struct work w = {.op = OP_ALLREDUCE, .comm = comm, .send = sendbuff, .recv = recvbuff,
                     .count = count, .dtype = (int)datatype, .redop = (int)op, .stream = stream};
    return submit(call, &w, 0);
}

pcclResult_t pcclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           pcclDataType_t datatype, pcclComm_t comm, hggcStream_t stream) {
    sim_call call = sim_enter(__func__);
    struct work w = {.op = OP_ALLGATHER, .comm = comm, .send = sendbuff, .recv = recvbuff,
                     .count = sendcount, .dtype = (int)datatype, .stream = stream};
    return submit(call, &w, 0);
}

pcclResult_t pcclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           pcclDataType_t datatype, int root, pcclComm_t comm,
                           hggcStream_t stream) {
    sim_call call = sim_enter(__func__);
    struct work w = {.op = OP_BROADCAST, .comm = comm, .send = sendbuff, .recv = recvbuff,
                     .count = count, .dtype = (int)datatype, .root = root, .stream = stream};
    return submit(call, &w, 0);
}

pcclResult_t pcclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               pcclDataType_t datatype, pcclRedOp_t op, pcclComm_t comm,
                               hggcStream_t stream) {
    sim_call call = sim_enter(__func__);
    struct work w = {.op = OP_REDUCESCATTER, .comm = comm, .send = sendbuff, .recv = recvbuff,
                     .count = recvcount, .dtype = (int)datatype, .redop = (int)op,
                     .stream = stream};
    return submit(call, &w, 0);
}

pcclResult_t pcclSend(const void *sendbuff, size_t count, pcclDataType_t datatype, int peer,
                      pcclComm_t comm, hggcStream_t stream) {
    sim_call call = sim_enter(__func__);
    struct work w = {.op = OP_SENDRECV, .comm = comm, .send = sendbuff, .count = count,
                     .dtype = (int)datatype, .root = peer, .stream = stream};
    return submit(call, &w, 1);
}

pcclResult_t pcclRecv(void *recvbuff, size_t count, pcclDataType_t datatype, int peer,
                      pcclComm_t comm, hggcStream_t stream) {
    sim_call call = sim_enter(__func__);
    struct work w = {.op = OP_SENDRECV, .comm = comm, .recv = recvbuff, .count = count,
                     .dtype = (int)datatype, .root = peer, .stream = stream};
    return submit(call, &w, 0);
}

pcclResult_t pcclGroupStart(void) {
    sim_call call = sim_enter(__func__);
    t_group_depth++;
    sim_json j = {0};
    sim_json_int(&j, "depth", t_group_depth);
    sim_exit(call, pcclSuccess, &j);
    return pcclSuccess;
}

pcclResult_t pcclGroupEnd(void) {
    sim_call call = sim_enter(__func__);
    pcclResult_t r = pcclSuccess;
    int ops = 0, kernels = 0;
    if (t_group_depth == 0) {
        r = pcclInvalidUsage;
    } else if (--t_group_depth == 0) {
        ops = t_ngroup;
        r = group_flush(&kernels);
    }
    sim_json j = {0};
    sim_json_int(&j, "depth", t_group_depth);
    sim_json_int(&j, "ops", ops);
    sim_json_int(&j, "kernels", kernels);
    sim_exit(call, r, &j);
    return r;
}

static const char *error_string(pcclResult_t r) {
    switch (r) {
    case pcclSuccess: return "no error";
    case pcclUnhandledCudaError: return "unhandled runtime error (launch failed)";
    case pcclSystemError: return "unhandled system error";
    case pcclInternalError: return "internal error";
    case pcclInvalidArgument: return "invalid argument";
    case pcclInvalidUsage: return "invalid usage";
    case pcclRemoteError: return "remote process exited or there was a network error";
    case pcclInProgress: return "operation in progress";
    case pcclNumResults: break;
    }
    return "unknown result code";
}

const char *pcclGetErrorString(pcclResult_t result) {
    sim_call call = sim_enter(__func__);
    sim_json j = {0};
    sim_json_int(&j, "error", (int)result);
    sim_exit(call, 0, &j);
    return error_string(result);
}
