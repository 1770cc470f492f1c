/*
 * The simulated ACBLAS library (cuBLAS v2 with the `acblas` prefix).
 *
 * GEMMs are validated on the calling thread, then run by a kernel launched
 * with hggcLaunchKernel on the handle's stream. The kernel's arguments live in
 * a heap block the kernel frees (the runtime keeps the args pointer until the
 * kernel runs), and alpha/beta are copied at call time.
 *
 * Ground truth (HGGC_SIM_GROUND_TRUTH), besides api/pid/tid/ret/corr/start/end:
 *   acblasCreate: "handle" (0 on failure); acblasDestroy: "handle";
 *   acblasSetStream / acblasGetStream: "handle", "stream";
 *   acblasSgemm / acblasDgemm / acblasGemmEx: "handle", "transa", "transb",
 *     "m", "n", "k", "lda", "ldb", "ldc", "alpha", "beta" (numbers, null when
 *     the pointer is NULL or the value is not finite), "A", "B", "C"
 *     (addresses), "stream" (the handle's stream), "kernel" (the launched
 *     kernel's symbol, "" when nothing was launched); GemmEx adds "atype",
 *     "btype", "ctype", "compute", "algo".
 */
#define _GNU_SOURCE
#include "acblas.h"
#include "sim_truth.h"

struct acblasContext {
    hggcStream_t stream;
};

static sim_live g_handles = SIM_LIVE_INIT;

/* ----------------------------------------------------------------- kernels */

struct gemm_work {
    void *argv[1]; /* argv[0] points at this block: the kernel's args */
    int ta, tb, m, n, k, lda, ldb, ldc;
    double alpha, beta;
    const void *A, *B;
    void *C;
};

#define GEMM_BODY(T)                                                                   \
    do {                                                                               \
        const T *A = w->A, *B = w->B;                                                  \
        T *C = w->C, alpha = (T)w->alpha, beta = (T)w->beta;                           \
        for (long j = 0; j < w->n; j++)                                                \
            for (long i = 0; i < w->m; i++) {                                          \
                T acc = 0;                                                             \
                for (long p = 0; p < w->k; p++) {                                      \
                    T a = w->ta ? A[p + i * (long)w->lda] : A[i + p * (long)w->lda];   \
                    T b = w->tb ? B[j + p * (long)w->ldb] : B[p + j * (long)w->ldb];   \
                    acc += a * b;                                                      \
                }                                                                      \
                T *c = &C[i + j * (long)w->ldc];                                       \
                /* As BLAS does, C is not read when beta is zero. */                   \
                *c = beta == 0 ? alpha * acc : alpha * acc + beta * *c;                \
            }                                                                          \
    } while (0)

void acblas_sgemm_kernel(void **args) {
    struct gemm_work *w = args[0];
    GEMM_BODY(float);
    free(w);
}

void acblas_dgemm_kernel(void **args) {
    struct gemm_work *w = args[0];
    GEMM_BODY(double);
    free(w);
}

/* ------------------------------------------------------------------ GEMM */

struct gemm {
    acblasHandle_t handle;
    int ta, tb, m, n, k, lda, ldb, ldc;
    const void *alpha, *beta; /* float* or double* */
    int dbl;
    const void *A, *B;
    void *C;
    int opaque; /* alpha/beta of a type we do not read */
};

static int max1(int v) { return v > 1 ? v : 1; }

static acblasStatus_t gemm_check(const struct gemm *g) {
    if (!g->handle)
        return ACBLAS_STATUS_INVALID_VALUE;
    if (!sim_live_has(&g_handles, g->handle))
        return ACBLAS_STATUS_NOT_INITIALIZED;
    if (g->ta < ACBLAS_OP_N || g->ta > ACBLAS_OP_C || g->tb < ACBLAS_OP_N || g->tb > ACBLAS_OP_C)
        return ACBLAS_STATUS_INVALID_VALUE;
    if (g->m < 0 || g->n < 0 || g->k < 0)
        return ACBLAS_STATUS_INVALID_VALUE;
    if (g->lda < max1(g->ta == ACBLAS_OP_N ? g->m : g->k) ||
        g->ldb < max1(g->tb == ACBLAS_OP_N ? g->k : g->n) || g->ldc < max1(g->m))
        return ACBLAS_STATUS_INVALID_VALUE;
    if (!g->alpha || !g->beta)
        return ACBLAS_STATUS_INVALID_VALUE;
    if (g->m && g->n && (!g->C || (g->k && (!g->A || !g->B))))
        return ACBLAS_STATUS_INVALID_VALUE;
    return ACBLAS_STATUS_SUCCESS;
}

static double scalar(const void *p, int dbl) {
    if (!p)
        return NAN;
    return dbl ? *(const double *)p : (double)*(const float *)p;
}

/* Launches the kernel; *kernel names it when it was launched. */
static acblasStatus_t gemm_launch(const struct gemm *g, const char **kernel) {
    if (g->m == 0 || g->n == 0)
        return ACBLAS_STATUS_SUCCESS; /* nothing to compute */
    struct gemm_work *w = calloc(1, sizeof *w);
    if (!w)
        return ACBLAS_STATUS_ALLOC_FAILED;
    w->argv[0] = w;
    w->ta = g->ta != ACBLAS_OP_N;
    w->tb = g->tb != ACBLAS_OP_N;
    w->m = g->m, w->n = g->n, w->k = g->k;
    w->lda = g->lda, w->ldb = g->ldb, w->ldc = g->ldc;
    w->alpha = scalar(g->alpha, g->dbl);
    w->beta = scalar(g->beta, g->dbl);
    w->A = g->A, w->B = g->B, w->C = g->C;
    hggcKernel_t fn = g->dbl ? acblas_dgemm_kernel : acblas_sgemm_kernel;
    dim3 grid = {(unsigned)((g->m + 15) / 16), (unsigned)((g->n + 15) / 16), 1};
    dim3 block = {16, 16, 1};
    if (hggcLaunchKernel((const void *)fn, grid, block, w->argv, 0, g->handle->stream) !=
        hggcSuccess) {
        free(w);
        return ACBLAS_STATUS_EXECUTION_FAILED;
    }
    *kernel = g->dbl ? "acblas_dgemm_kernel" : "acblas_sgemm_kernel";
    return ACBLAS_STATUS_SUCCESS;
}

static void gemm_json(sim_json *j, const struct gemm *g, const char *kernel) {
    sim_json_ptr(j, "handle", g->handle);
    sim_json_int(j, "transa", g->ta);
    sim_json_int(j, "transb", g->tb);
    sim_json_int(j, "m", g->m);
    sim_json_int(j, "n", g->n);
    sim_json_int(j, "k", g->k);
    sim_json_int(j, "lda", g->lda);
    sim_json_int(j, "ldb", g->ldb);
    sim_json_int(j, "ldc", g->ldc);
    sim_json_double(j, "alpha", g->opaque ? NAN : scalar(g->alpha, g->dbl));
    sim_json_double(j, "beta", g->opaque ? NAN : scalar(g->beta, g->dbl));
    sim_json_ptr(j, "A", g->A);
    sim_json_ptr(j, "B", g->B);
    sim_json_ptr(j, "C", g->C);
    int live = g->handle && sim_live_has(&g_handles, g->handle);
    sim_json_ptr(j, "stream", live ? g->handle->stream : NULL);
    sim_json_str(j, "kernel", kernel);
}

static acblasStatus_t gemm_run(sim_call c, const struct gemm *g, acblasStatus_t pre,
                               sim_json *extra) {
    const char *kernel = "";
    acblasStatus_t r = gemm_check(g);
    if (r == ACBLAS_STATUS_SUCCESS)
        r = pre;
    if (r == ACBLAS_STATUS_SUCCESS)
        r = gemm_launch(g, &kernel);
    sim_json j = {0};
    gemm_json(&j, g, kernel);
    if (extra && extra->p) {
        sim_json_raw(&j, "%s", extra->p);
        free(extra->p);
    }
    sim_exit(c, r, &j);
    return r;
}

/* -------------------------------------------------------------------- API */

acblasStatus_t acblasCreate(acblasHandle_t *handle) {
    sim_call c = sim_enter(__func__);
    acblasStatus_t r = ACBLAS_STATUS_SUCCESS;
    struct acblasContext *h = NULL;
    if (!handle)
        r = ACBLAS_STATUS_INVALID_VALUE;
    else if (!(h = calloc(1, sizeof *h)) || !sim_live_add(&g_handles, h)) {
        free(h);
        h = NULL;
        r = ACBLAS_STATUS_ALLOC_FAILED;
    } else {
        *handle = h;
    }
    sim_json j = {0};
    sim_json_ptr(&j, "handle", h);
    sim_exit(c, r, &j);
    return r;
}

acblasStatus_t acblasDestroy(acblasHandle_t handle) {
    sim_call c = sim_enter(__func__);
    acblasStatus_t r = ACBLAS_STATUS_SUCCESS;
    /* Queued kernels hold copies of what they need, so no wait is needed. */
    if (!sim_live_remove(&g_handles, handle))
        r = ACBLAS_STATUS_NOT_INITIALIZED;
    else
        free(handle);
    sim_json j = {0};
    sim_json_ptr(&j, "handle", handle);
    sim_exit(c, r, &j);
    return r;
}

acblasStatus_t acblasSetStream(acblasHandle_t handle, hggcStream_t streamId) {
    sim_call c = sim_enter(__func__);
    acblasStatus_t r = ACBLAS_STATUS_SUCCESS;
    if (!sim_live_has(&g_handles, handle))
        r = ACBLAS_STATUS_NOT_INITIALIZED;
    else
        handle->stream = streamId;
    sim_json j = {0};
    sim_json_ptr(&j, "handle", handle);
    sim_json_ptr(&j, "stream", streamId);
    sim_exit(c, r, &j);
    return r;
}

acblasStatus_t acblasGetStream(acblasHandle_t handle, hggcStream_t *streamId) {
    sim_call c = sim_enter(__func__);
    acblasStatus_t r = ACBLAS_STATUS_SUCCESS;
    hggcStream_t s = NULL;
    if (!sim_live_has(&g_handles, handle))
        r = ACBLAS_STATUS_NOT_INITIALIZED;
    else if (!streamId)
        r = ACBLAS_STATUS_INVALID_VALUE;
    else
        *streamId = s = handle->stream;
    sim_json j = {0};
    sim_json_ptr(&j, "handle", handle);
    sim_json_ptr(&j, "stream", s);
    sim_exit(c, r, &j);
    return r;
}

acblasStatus_t acblasSgemm(acblasHandle_t handle, acblasOperation_t transa,
                           acblasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    sim_call c = sim_enter(__func__);
    struct gemm g = {handle, (int)transa, (int)transb, m, n, k, lda, ldb, ldc,
                     alpha,  beta,        0,           A, B, C, 0};
    return gemm_run(c, &g, ACBLAS_STATUS_SUCCESS, NULL);
}

acblasStatus_t acblasDgemm(acblasHandle_t handle, acblasOperation_t transa,
                           acblasOperation_t transb, int m, int n, int k, const double *alpha,
                           const double *A, int lda, const double *B, int ldb, const double *beta,
                           double *C, int ldc) {
    sim_call c = sim_enter(__func__);
    struct gemm g = {handle, (int)transa, (int)transb, m, n, k, lda, ldb, ldc,
                     alpha,  beta,        1,           A, B, C, 0};
    return gemm_run(c, &g, ACBLAS_STATUS_SUCCESS, NULL);
}

static int data_type_known(int t) {
    switch (t) {
    case ACBLAS_R_32F: case ACBLAS_R_64F: case ACBLAS_R_16F: case ACBLAS_R_8I:
    case ACBLAS_C_32F: case ACBLAS_C_64F: case ACBLAS_R_32I: case ACBLAS_R_16BF:
        return 1;
    }
    return 0;
}

static int compute_type_known(int t) {
    switch (t) {
    case ACBLAS_COMPUTE_16F: case ACBLAS_COMPUTE_32F: case ACBLAS_COMPUTE_64F:
    case ACBLAS_COMPUTE_32I: case ACBLAS_COMPUTE_32F_FAST_TF32:
        return 1;
    }
    return 0;
}

acblasStatus_t acblasGemmEx(acblasHandle_t handle, acblasOperation_t transa,
                            acblasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, acblasDataType_t Atype, int lda, const void *B,
                            acblasDataType_t Btype, int ldb, const void *beta, void *C,
                            acblasDataType_t Ctype, int ldc, acblasComputeType_t computeType,
                            acblasGemmAlgo_t algo) {
    sim_call c = sim_enter(__func__);
    int at = (int)Atype, bt = (int)Btype, ct = (int)Ctype, comp = (int)computeType, al = (int)algo;
    int all32 = at == ACBLAS_R_32F && bt == at && ct == at &&
                (comp == ACBLAS_COMPUTE_32F || comp == ACBLAS_COMPUTE_32F_FAST_TF32);
    int all64 = at == ACBLAS_R_64F && bt == at && ct == at && comp == ACBLAS_COMPUTE_64F;
    acblasStatus_t pre = ACBLAS_STATUS_SUCCESS;
    if (!data_type_known(at) || !data_type_known(bt) || !data_type_known(ct) ||
        !compute_type_known(comp) || !((al >= -1 && al <= 23) || (al >= 99 && al <= 115)))
        pre = ACBLAS_STATUS_INVALID_VALUE;
    else if (!all32 && !all64)
        pre = ACBLAS_STATUS_NOT_SUPPORTED;
    struct gemm g = {handle, (int)transa, (int)transb, m, n, k, lda, ldb, ldc,
                     alpha,  beta,        all64,       A, B, C, !all32 && !all64};
    sim_json extra = {0};
    sim_json_int(&extra, "atype", at);
    sim_json_int(&extra, "btype", bt);
    sim_json_int(&extra, "ctype", ct);
    sim_json_int(&extra, "compute", comp);
    sim_json_int(&extra, "algo", al);
    return gemm_run(c, &g, pre, &extra);
}
