/* PCCL across real processes. The parent gets a unique id and forks NRANKS
 * children; each inits its communicator and, per iteration, runs AllReduce
 * (float32 sum, int32 max, float64 avg, float16 sum), AllGather, Broadcast,
 * ReduceScatter and a Send/Recv ring inside a group, on device buffers and a
 * stream of its own, and verifies every result. Each rank prints its own call
 * counts (section "pccl_ranks-rankR"), the parent its own ("pccl_ranks-parent").
 * The parent exits non-zero if any rank failed.
 *
 * Usage: pccl_ranks NRANKS [iters=2]
 *        pccl_ranks --rank R --nranks N --id FILE [iters=2]
 *
 * The second form runs one rank as an independent process, as a job launcher
 * (srun, mpirun) would start it, each perhaps under its own `asys profile`:
 * rank 0 gets the unique id and publishes it in FILE (written beside it and
 * renamed, so the others never read half of it); the others wait up to 30 s
 * for FILE and join the same communicator. Each prints its section
 * "pccl_ranks-rankR" as above and exits non-zero if a check failed.
 *
 * With PCCL_RANKS_DIE_RANK=r, after one good AllReduce every rank starts a
 * large AllReduce and rank r exits abruptly (_exit(42)) once the first round
 * of it has landed: the survivors must see the operation fail with
 * pcclRemoteError (pcclCommGetAsyncError after the stream synchronizes, and
 * from the next call) within PCCL_TIMEOUT_MS (default 10000) plus 3 s, then
 * abort their communicator and exit 0. The parent expects 42 from rank r.
 *
 * With PCCL_RANKS_COMPUTE=1, each rank also runs a compute kernel
 * (compute_kernel) on a second stream, launched as each collective's buffers
 * are uploaded, so that computation overlaps communication as in a training
 * step's backward pass. The overlap is made certain, not left to the
 * scheduler: the host goes on only once the kernel runs, and the kernel runs
 * (at least 2 ms) until the collective's results are back. */
#include "hggc_runtime.h"
#include "pccl.h"
#include "workload_common.h"
#include <limits.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DIE_EXIT 42

static int g_rank, g_n, g_failures;
/* The planted delay (PCCL_RANKS_LATE) and whether it precedes every
 * collective or only the first. */
static long g_late_ms;
/* Set when this rank is a process of its own (--rank): its calls before
 * rank_main (rank 0's pcclGetUniqueId) are its own too. */
static int g_own_process;
static int g_late_every;
static hggcStream_t g_stream;
/* PCCL_RANKS_COMPUTE: the second stream, for compute_kernel (else NULL). */
static hggcStream_t g_compute;
/* Compute kernels started, and collectives whose results came back (set to
 * LONG_MAX at the end, which lets every kernel still running finish). */
static long g_compute_started, g_downloaded;
static pcclComm_t g_comm;

#define VERIFY(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            if (g_failures++ < 10) {                                               \
                char msg_[256];                                                    \
                snprintf(msg_, sizeof msg_, __VA_ARGS__);                          \
                fprintf(stderr, "pccl_ranks rank %d: %s\n", g_rank, msg_);         \
            }                                                                      \
        }                                                                          \
    } while (0)

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps the planted delay, if any, and appends "late PID BEFORE AFTER"
 * (CLOCK_MONOTONIC ns around the sleep) to PCCL_RANKS_LATE_LOG: the
 * ground truth of the delay each late arrival carries. */
static void be_late(void) {
    if (g_late_ms <= 0)
        return;
    struct timespec t0, t1;
    struct timespec d = {g_late_ms / 1000, (g_late_ms % 1000) * 1000000L};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (nanosleep(&d, &d) != 0)
        ;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const char *path = getenv("PCCL_RANKS_LATE_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "late %d %lld %lld\n", (int)getpid(),
                t0.tv_sec * 1000000000LL + t0.tv_nsec, t1.tv_sec * 1000000000LL + t1.tv_nsec);
        fclose(f);
    }
}

/* Before each collective after the first: the delay of ":all". */
static void late_again(void) {
    if (g_late_every)
        be_late();
}

/* Small positive integers as IEEE half floats (exact below 2048). */
static uint16_t half_of(int v) {
    int e = 0;
    while ((v >> (e + 1)) != 0)
        e++;
    return (uint16_t)(((e + 15) << 10) | ((v << (10 - e)) & 0x3ff));
}

struct bufs {
    void *hs, *hr, *ds, *dr;
    size_t sbytes, rbytes;
};

static struct bufs bufs_new(size_t sbytes, size_t rbytes) {
    struct bufs b = {malloc(sbytes), calloc(1, rbytes), NULL, NULL, sbytes, rbytes};
    CHECK(CALL(hggcMalloc, &b.ds, sbytes));
    CHECK(CALL(hggcMalloc, &b.dr, rbytes));
    return b;
}

/* Spins for at least 2 ms of the device's (a host thread's) time, and until
 * the collective launched beside it has come back to the host. */
void compute_kernel(void **args) {
    (void)args;
    long mine = __atomic_add_fetch(&g_compute_started, 1, __ATOMIC_SEQ_CST);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile double acc = 0;
    do {
        for (int i = 0; i < 1000; i++)
            acc += i * 0.5;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) < 2000000 ||
             __atomic_load_n(&g_downloaded, __ATOMIC_SEQ_CST) < mine);
}

static void upload(struct bufs *b) {
    if (g_compute) {
        dim3 grid = {1, 1, 1}, block = {64, 1, 1};
        long before = __atomic_load_n(&g_compute_started, __ATOMIC_SEQ_CST);
        CHECK(CALL(hggcLaunchKernel, (const void *)compute_kernel, grid, block, NULL, 0, g_compute));
        /* The collective's kernel is launched only once this one runs. */
        while (__atomic_load_n(&g_compute_started, __ATOMIC_SEQ_CST) == before) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    CHECK(CALL(hggcMemcpyAsync, b->ds, b->hs, b->sbytes, hggcMemcpyHostToDevice, g_stream));
    CHECK(CALL(hggcMemsetAsync, b->dr, 0, b->rbytes, g_stream));
}

static void download(struct bufs *b) {
    CHECK(CALL(hggcMemcpyAsync, b->hr, b->dr, b->rbytes, hggcMemcpyDeviceToHost, g_stream));
    CHECK(CALL(hggcStreamSynchronize, g_stream));
    __atomic_add_fetch(&g_downloaded, 1, __ATOMIC_SEQ_CST);
    pcclResult_t async = pcclSuccess;
    CHECK(CALL(pcclCommGetAsyncError, g_comm, &async));
    VERIFY(async == pcclSuccess, "asynchronous error %d", async);
}

static void bufs_free(struct bufs *b) {
    CHECK(CALL(hggcFree, b->ds));
    CHECK(CALL(hggcFree, b->dr));
    free(b->hs);
    free(b->hr);
}

/* Logs a collective that launched its kernel: "workload-collective RANK OP
 * DTYPE IN_BYTES OUT_BYTES", its buffers' sizes as this program allocated
 * them, the ground truth of the message sizes a trace export writes on the
 * communication kernel (tests/kineto.rs). */
static void log_collective(const char *op, const char *dtype, const struct bufs *b) {
    printf("workload-collective %d %s %s %zu %zu\n", g_rank, op, dtype, b->sbytes, b->rbytes);
}

static void allreduce_f32_sum(size_t count) {
    struct bufs b = bufs_new(count * 4, count * 4);
    float *s = b.hs, *r = b.hr;
    for (size_t i = 0; i < count; i++)
        s[i] = (float)((g_rank + 1) * (int)(i % 7 + 1));
    upload(&b);
    late_again();
    CHECK(CALL(pcclAllReduce, b.ds, b.dr, count, pcclFloat32, pcclSum, g_comm, g_stream));
    log_collective("AllReduce", "float32", &b);
    download(&b);
    for (size_t i = 0; i < count; i++)
        if (r[i] != (float)((int)(i % 7 + 1) * g_n * (g_n + 1) / 2)) {
            VERIFY(0, "AllReduce f32 sum: [%zu] = %g", i, (double)r[i]);
            break;
        }
    bufs_free(&b);
}

static void allreduce_i32_max(size_t count) {
    struct bufs b = bufs_new(count * 4, count * 4);
    int32_t *s = b.hs, *r = b.hr;
    for (size_t i = 0; i < count; i++)
        s[i] = (int32_t)((i * 31 + (size_t)g_rank * 17) % 1000) - 500;
    upload(&b);
    late_again();
    CHECK(CALL(pcclAllReduce, b.ds, b.dr, count, pcclInt32, pcclMax, g_comm, g_stream));
    log_collective("AllReduce", "int32", &b);
    download(&b);
    for (size_t i = 0; i < count; i++) {
        int32_t want = INT32_MIN;
        for (int k = 0; k < g_n; k++) {
            int32_t v = (int32_t)((i * 31 + (size_t)k * 17) % 1000) - 500;
            want = v > want ? v : want;
        }
        if (r[i] != want) {
            VERIFY(0, "AllReduce i32 max: [%zu] = %d, want %d", i, r[i], want);
            break;
        }
    }
    bufs_free(&b);
}

static void allreduce_f64_avg(size_t count) {
    struct bufs b = bufs_new(count * 8, count * 8);
    double *s = b.hs, *r = b.hr;
    for (size_t i = 0; i < count; i++)
        s[i] = 2.0 * g_rank + (double)(i % 5);
    upload(&b);
    late_again();
    CHECK(CALL(pcclAllReduce, b.ds, b.dr, count, pcclFloat64, pcclAvg, g_comm, g_stream));
    log_collective("AllReduce", "float64", &b);
    download(&b);
    for (size_t i = 0; i < count; i++)
        if (r[i] != (double)(g_n - 1) + (double)(i % 5)) {
            VERIFY(0, "AllReduce f64 avg: [%zu] = %g", i, r[i]);
            break;
        }
    bufs_free(&b);
}

static void allreduce_f16_sum(size_t count) {
    struct bufs b = bufs_new(count * 2, count * 2);
    uint16_t *s = b.hs, *r = b.hr;
    for (size_t i = 0; i < count; i++)
        s[i] = half_of(g_rank + 1 + (int)(i % 3));
    upload(&b);
    late_again();
    CHECK(CALL(pcclAllReduce, b.ds, b.dr, count, pcclFloat16, pcclSum, g_comm, g_stream));
    log_collective("AllReduce", "float16", &b);
    download(&b);
    for (size_t i = 0; i < count; i++) {
        int want = g_n * (g_n + 1) / 2 + g_n * (int)(i % 3);
        if (r[i] != half_of(want)) {
            VERIFY(0, "AllReduce f16 sum: [%zu] = 0x%04x, want 0x%04x", i, r[i], half_of(want));
            break;
        }
    }
    bufs_free(&b);
}

static void allgather_i32(size_t count) {
    struct bufs b = bufs_new(count * 4, count * 4 * (size_t)g_n);
    int32_t *s = b.hs, *r = b.hr;
    for (size_t i = 0; i < count; i++)
        s[i] = g_rank * 1000000 + (int32_t)i;
    upload(&b);
    late_again();
    CHECK(CALL(pcclAllGather, b.ds, b.dr, count, pcclInt32, g_comm, g_stream));
    log_collective("AllGather", "int32", &b);
    download(&b);
    for (size_t i = 0; i < count * (size_t)g_n; i++)
        if (r[i] != (int32_t)(i / count) * 1000000 + (int32_t)(i % count)) {
            VERIFY(0, "AllGather: [%zu] = %d", i, r[i]);
            break;
        }
    bufs_free(&b);
}

static void broadcast_f64(size_t count, int root) {
    struct bufs b = bufs_new(count * 8, count * 8);
    double *s = b.hs, *r = b.hr;
    for (size_t i = 0; i < count; i++)
        s[i] = g_rank == root ? root * 0.5 + (double)i : -1.0;
    upload(&b);
    late_again();
    CHECK(CALL(pcclBroadcast, b.ds, b.dr, count, pcclFloat64, root, g_comm, g_stream));
    log_collective("Broadcast", "float64", &b);
    download(&b);
    for (size_t i = 0; i < count; i++)
        if (r[i] != root * 0.5 + (double)i) {
            VERIFY(0, "Broadcast from %d: [%zu] = %g", root, i, r[i]);
            break;
        }
    bufs_free(&b);
}

static void reducescatter_f32(size_t count) {
    struct bufs b = bufs_new(count * 4 * (size_t)g_n, count * 4);
    float *s = b.hs, *r = b.hr;
    for (int d = 0; d < g_n; d++)
        for (size_t i = 0; i < count; i++)
            s[(size_t)d * count + i] = (float)(g_rank + d + (int)(i % 11));
    upload(&b);
    late_again();
    CHECK(CALL(pcclReduceScatter, b.ds, b.dr, count, pcclFloat32, pcclSum, g_comm, g_stream));
    log_collective("ReduceScatter", "float32", &b);
    download(&b);
    for (size_t i = 0; i < count; i++) {
        float want = (float)(g_n * (g_n - 1) / 2 + g_n * (g_rank + (int)(i % 11)));
        if (r[i] != want) {
            VERIFY(0, "ReduceScatter: [%zu] = %g, want %g", i, (double)r[i], (double)want);
            break;
        }
    }
    bufs_free(&b);
}

/* Everyone sends to the next rank and receives from the previous one. */
static void sendrecv_ring_i64(size_t count) {
    struct bufs b = bufs_new(count * 8, count * 8);
    int64_t *s = b.hs, *r = b.hr;
    int next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
    for (size_t i = 0; i < count; i++)
        s[i] = (int64_t)g_rank * 10000000000LL + (int64_t)i;
    upload(&b);
    CHECK(CALL(pcclGroupStart));
    CHECK(CALL(pcclSend, b.ds, count, pcclInt64, next, g_comm, g_stream));
    CHECK(CALL(pcclRecv, b.dr, count, pcclInt64, prev, g_comm, g_stream));
    CHECK(CALL(pcclGroupEnd));
    log_collective("SendRecv", "int64", &b);
    download(&b);
    for (size_t i = 0; i < count; i++)
        if (r[i] != (int64_t)prev * 10000000000LL + (int64_t)i) {
            VERIFY(0, "Recv from %d: [%zu] = %lld", prev, i, (long long)r[i]);
            break;
        }
    bufs_free(&b);
}

static int timeout_ms(void) {
    const char *v = getenv("PCCL_TIMEOUT_MS");
    int ms = v ? atoi(v) : 0;
    return ms > 0 ? ms : PCCL_DEFAULT_TIMEOUT_MS;
}

/* The dying-rank scenario (see the top). Returns the exit code. */
static int die_scenario(int die_rank) {
    allreduce_f32_sum(1000);
    size_t count = (size_t)16 * 65536; /* 16 rounds of the library's slots */
    struct bufs b = bufs_new(count * 4, count * 4);
    float *s = b.hs;
    for (size_t i = 0; i < count; i++)
        s[i] = (float)(g_rank + 1);
    upload(&b);
    CHECK(CALL(hggcStreamSynchronize, g_stream));
    float want = (float)(g_n * (g_n + 1) / 2);
    long long t0 = now_ms();
    late_again();
    CHECK(CALL(pcclAllReduce, b.ds, b.dr, count, pcclFloat32, pcclSum, g_comm, g_stream));
    if (g_rank == die_rank) {
        /* Device memory is host memory in the simulation: watch the first
         * round land, then vanish in the middle of the operation. */
        volatile float *r = b.dr;
        while (r[0] != want && now_ms() - t0 < 5000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        int done = r[count - 1] == want;
        fprintf(stderr, "pccl_ranks rank %d: exiting abruptly %s the AllReduce\n", g_rank,
                done ? "after (it finished too fast)" : "in the middle of");
        char who[64];
        snprintf(who, sizeof who, "pccl_ranks-rank%d", g_rank);
        wl_report(who);
        _exit(DIE_EXIT);
    }
    CHECK(CALL(hggcStreamSynchronize, g_stream));
    long long elapsed = now_ms() - t0;
    pcclResult_t async = pcclSuccess;
    CHECK(CALL(pcclCommGetAsyncError, g_comm, &async));
    VERIFY(async == pcclRemoteError, "async error %d, expected pcclRemoteError", async);
    VERIFY(elapsed <= timeout_ms() + 3000, "the failure took %lld ms (timeout %d ms)", elapsed,
           timeout_ms());
    /* Later calls on the communicator report the error without launching. */
    pcclResult_t r = CALL(pcclAllReduce, b.ds, b.dr, 16, pcclFloat32, pcclSum, g_comm, g_stream);
    VERIFY(r == pcclRemoteError, "the next AllReduce gave %d, expected pcclRemoteError", r);
    fprintf(stderr, "pccl_ranks rank %d: AllReduce failed after %lld ms: %s\n", g_rank, elapsed,
            CALL(pcclGetErrorString, async));
    bufs_free(&b);
    CHECK(CALL(pcclCommAbort, g_comm));
    return 0;
}

static int rank_main(pcclUniqueId id, int rank, int nranks, int iters, int die_rank) {
    /* One write per report, so the ranks' sections do not interleave. */
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    if (!g_own_process)
        memset(wl_counts, 0, sizeof wl_counts); /* the parent's calls are its own */
    g_rank = rank;
    g_n = nranks;
    /* The runtime is set up (its first call initialises it, which under a
     * profiler takes a while) before the communicator's barrier, as real
     * jobs create their streams first: the ranks leave the barrier ready. */
    CHECK(CALL(hggcStreamCreate, &g_stream));
    const char *compute = getenv("PCCL_RANKS_COMPUTE");
    if (compute && atoi(compute) == 1)
        CHECK(CALL(hggcStreamCreate, &g_compute));
    CHECK(CALL(pcclCommInitRank, &g_comm, nranks, id, rank));
    int count = 0, me = -1;
    CHECK(CALL(pcclCommCount, g_comm, &count));
    CHECK(CALL(pcclCommUserRank, g_comm, &me));
    VERIFY(count == nranks && me == rank, "count %d rank %d", count, me);
    /* PCCL_RANKS_LATE=r:ms: rank r arrives ms late at the first collective;
     * PCCL_RANKS_LATE=r:ms:all: at every collective (see be_late). */
    const char *late = getenv("PCCL_RANKS_LATE");
    if (late && atoi(late) == rank && strchr(late, ':')) {
        g_late_ms = atol(strchr(late, ':') + 1);
        g_late_every = strstr(late, ":all") != NULL;
        if (!g_late_every) {
            be_late();
            g_late_ms = 0;
        }
    }
    int rc;
    if (die_rank >= 0) {
        rc = die_scenario(die_rank);
    } else {
        for (int it = 0; it < iters; it++) {
            allreduce_f32_sum(300000 + (size_t)it);
            allreduce_i32_max(1000);
            allreduce_f64_avg(777);
            allreduce_f16_sum(5000);
            allgather_i32(20000);
            broadcast_f64(70000, it % nranks);
            reducescatter_f32(30000);
            sendrecv_ring_i64(50000);
        }
        /* One deliberate mistake: an unknown data type. */
        late_again();
        pcclResult_t r = CALL(pcclAllReduce, NULL, NULL, 1, (pcclDataType_t)99, pcclSum, g_comm,
                              g_stream);
        VERIFY(r == pcclInvalidArgument, "bad datatype gave %d", r);
        CHECK(CALL(pcclCommDestroy, g_comm));
        rc = 0;
    }
    if (g_compute) {
        __atomic_store_n(&g_downloaded, LONG_MAX, __ATOMIC_SEQ_CST);
        CHECK(CALL(hggcStreamSynchronize, g_compute));
        CHECK(CALL(hggcStreamDestroy, g_compute));
    }
    CHECK(CALL(hggcStreamDestroy, g_stream));
    if (g_failures)
        fprintf(stderr, "pccl_ranks rank %d: %d check(s) failed\n", rank, g_failures);
    char who[64];
    snprintf(who, sizeof who, "pccl_ranks-rank%d", rank);
    wl_report(who);
    return g_failures ? 1 : rc;
}

/* Rank 0 publishes the id in `path`; the others wait for it. */
static int share_id(const char *path, int rank, pcclUniqueId *id) {
    if (rank == 0) {
        CHECK(CALL(pcclGetUniqueId, id));
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid());
        FILE *f = fopen(tmp, "wx");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
            perror(path);
            return -1;
        }
        return 0;
    }
    long long deadline = now_ms() + 30000;
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (got == 1)
                return 0;
        }
        if (now_ms() > deadline) {
            fprintf(stderr, "pccl_ranks rank %d: no id in %s after 30 s\n", rank, path);
            return -1;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

/* pccl_ranks --rank R --nranks N --id FILE [iters]: one rank on its own. */
static int one_rank_main(int argc, char **argv) {
    int rank = -1, nranks = 0, iters = 2;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rank") && i + 1 < argc)
            rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--nranks") && i + 1 < argc)
            nranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--id") && i + 1 < argc)
            path = argv[++i];
        else
            iters = atoi(argv[i]);
    }
    if (!path || nranks < 1 || nranks > PCCL_MAX_RANKS || rank < 0 || rank >= nranks ||
        iters < 0) {
        fprintf(stderr, "usage: pccl_ranks --rank R --nranks N --id FILE [iters]\n");
        return 2;
    }
    g_own_process = 1;
    pcclUniqueId id;
    if (share_id(path, rank, &id) != 0)
        return 1;
    int rc = rank_main(id, rank, nranks, iters, -1);
    printf("pccl_ranks: rank %d of %d, %s\n", rank, nranks,
           rc ? "FAILED" : "all results verified");
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strncmp(argv[1], "--", 2))
        return one_rank_main(argc, argv);
    int nranks = argc > 1 ? atoi(argv[1]) : 0;
    int iters = argc > 2 ? atoi(argv[2]) : 2;
    if (nranks < 1 || nranks > PCCL_MAX_RANKS || iters < 0) {
        fprintf(stderr, "usage: pccl_ranks NRANKS [iters]   (env PCCL_RANKS_DIE_RANK=r)\n");
        return 2;
    }
    const char *d = getenv("PCCL_RANKS_DIE_RANK");
    int die_rank = d && *d ? atoi(d) : -1;
    if (die_rank >= nranks || (die_rank >= 0 && nranks < 2)) {
        fprintf(stderr, "pccl_ranks: PCCL_RANKS_DIE_RANK must name one of 2+ ranks\n");
        return 2;
    }
    pcclUniqueId id;
    CHECK(CALL(pcclGetUniqueId, &id));
    fflush(stdout);
    fflush(stderr);
    pid_t pids[PCCL_MAX_RANKS];
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            exit(rank_main(id, r, nranks, iters, die_rank));
        if (pids[r] < 0) {
            perror("fork");
            return 1;
        }
    }
    int failed = 0;
    for (int left = nranks; left > 0; left--) {
        int status = 0;
        pid_t p = wait(&status);
        int r = 0;
        while (r < nranks && pids[r] != p)
            r++;
        int want = r == die_rank ? DIE_EXIT : 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != want) {
            fprintf(stderr, "pccl_ranks: rank %d ended with status 0x%x, expected exit %d\n", r,
                    status, want);
            failed++;
        }
    }
    printf("pccl_ranks: %d ranks, %s\n", nranks,
           failed ? "FAILED" : die_rank >= 0 ? "survivors saw the dead rank's error" : "all results verified");
    wl_report("pccl_ranks-parent");
    return failed ? 1 : 0;
}
