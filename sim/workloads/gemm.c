/* ACBLAS GEMMs of known sizes on a stream, each inside an HGTX range, checked
 * against a naive host multiply; one deliberately invalid call (lda < m) and
 * one unsupported GemmEx type. Exits non-zero if anything is wrong. Usage: gemm */
#include "acblas.h"
#include "hggc_runtime.h"
#include "hgtx.h"
#include "workload_common.h"
#include <math.h>

static int failures;

enum kind { SGEMM, DGEMM, GEMMEX_32F, GEMMEX_64F };

struct gemm_case {
    enum kind kind;
    acblasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc;
    double alpha, beta;
};

static const char *kind_name(enum kind k) {
    static const char *names[] = {"Sgemm", "Dgemm", "GemmEx-32F", "GemmEx-64F"};
    return names[k];
}

static double a_val(size_t i) { return (double)((int)((i * 7) % 13) - 6) * 0.25; }
static double b_val(size_t i) { return (double)((int)((i * 5) % 11) - 5) * 0.5; }
static double c_val(size_t i) { return (double)((int)(i % 9) - 4); }

static void run_case(acblasHandle_t h, hggcStream_t stream, const struct gemm_case *g) {
    int dbl = g->kind == DGEMM || g->kind == GEMMEX_64F;
    size_t es = dbl ? sizeof(double) : sizeof(float);
    size_t na = (size_t)g->lda * (g->ta == ACBLAS_OP_N ? g->k : g->m);
    size_t nb = (size_t)g->ldb * (g->tb == ACBLAS_OP_N ? g->n : g->k);
    size_t nc = (size_t)g->ldc * g->n;
    double *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C = malloc(nc * sizeof *C);
    void *hA = malloc(na * es), *hB = malloc(nb * es), *hC = malloc(nc * es);
    for (size_t i = 0; i < na; i++)
        A[i] = a_val(i);
    for (size_t i = 0; i < nb; i++)
        B[i] = b_val(i);
    for (size_t i = 0; i < nc; i++)
        C[i] = c_val(i);
#define TO_HOST(dst, src, n)                                  \
    for (size_t i = 0; i < (n); i++) {                        \
        if (dbl)                                              \
            ((double *)(dst))[i] = (src)[i];                  \
        else                                                  \
            ((float *)(dst))[i] = (float)(src)[i];            \
    }
    TO_HOST(hA, A, na);
    TO_HOST(hB, B, nb);
    TO_HOST(hC, C, nc);
    void *dA, *dB, *dC;
    CHECK(CALL(hggcMalloc, &dA, na * es));
    CHECK(CALL(hggcMalloc, &dB, nb * es));
    CHECK(CALL(hggcMalloc, &dC, nc * es));
    CHECK(CALL(hggcMemcpyAsync, dA, hA, na * es, hggcMemcpyHostToDevice, stream));
    CHECK(CALL(hggcMemcpyAsync, dB, hB, nb * es, hggcMemcpyHostToDevice, stream));
    CHECK(CALL(hggcMemcpyAsync, dC, hC, nc * es, hggcMemcpyHostToDevice, stream));

    char label[96];
    snprintf(label, sizeof label, "%s %c%c %dx%dx%d", kind_name(g->kind),
             "NTC"[g->ta], "NTC"[g->tb], g->m, g->n, g->k);
    CALL(hgtxRangePushA, label);
    float fa = (float)g->alpha, fb = (float)g->beta;
    acblasStatus_t st = ACBLAS_STATUS_INTERNAL_ERROR;
    switch (g->kind) {
    case SGEMM:
        st = CALL(acblasSgemm, h, g->ta, g->tb, g->m, g->n, g->k, &fa, dA, g->lda, dB, g->ldb,
                  &fb, dC, g->ldc);
        break;
    case DGEMM:
        st = CALL(acblasDgemm, h, g->ta, g->tb, g->m, g->n, g->k, &g->alpha, dA, g->lda, dB,
                  g->ldb, &g->beta, dC, g->ldc);
        break;
    case GEMMEX_32F:
        st = CALL(acblasGemmEx, h, g->ta, g->tb, g->m, g->n, g->k, &fa, dA, ACBLAS_R_32F, g->lda,
                  dB, ACBLAS_R_32F, g->ldb, &fb, dC, ACBLAS_R_32F, g->ldc, ACBLAS_COMPUTE_32F,
                  ACBLAS_GEMM_DEFAULT);
        break;
    case GEMMEX_64F:
        st = CALL(acblasGemmEx, h, g->ta, g->tb, g->m, g->n, g->k, &g->alpha, dA, ACBLAS_R_64F,
                  g->lda, dB, ACBLAS_R_64F, g->ldb, &g->beta, dC, ACBLAS_R_64F, g->ldc,
                  ACBLAS_COMPUTE_64F, ACBLAS_GEMM_DEFAULT);
        break;
    }
    CHECK(st);
    CHECK(CALL(hggcMemcpyAsync, hC, dC, nc * es, hggcMemcpyDeviceToHost, stream));
    CHECK(CALL(hggcStreamSynchronize, stream));
    CALL(hgtxRangePop);

    /* Naive host reference, in double; rows past m (the ldc padding) must keep
     * their values. */
    double worst = 0;
    for (int j = 0; j < g->n; j++)
        for (int i = 0; i < g->ldc; i++) {
            double want = C[i + (size_t)j * g->ldc];
            if (i < g->m) {
                double acc = 0;
                for (int p = 0; p < g->k; p++) {
                    double a = g->ta == ACBLAS_OP_N ? A[i + (size_t)p * g->lda]
                                                    : A[p + (size_t)i * g->lda];
                    double b = g->tb == ACBLAS_OP_N ? B[p + (size_t)j * g->ldb]
                                                    : B[j + (size_t)p * g->ldb];
                    acc += a * b;
                }
                want = g->alpha * acc + g->beta * want;
            }
            size_t at = i + (size_t)j * g->ldc;
            double got = dbl ? ((double *)hC)[at] : (double)((float *)hC)[at];
            double err = fabs(got - want) / (1.0 + fabs(want));
            if (err > worst)
                worst = err;
        }
    double tol = dbl ? 1e-12 : 1e-5;
    printf("gemm: %-28s max relative error %.3g%s\n", label, worst, worst > tol ? "  WRONG" : "");
    if (worst > tol)
        failures++;
    CHECK(CALL(hggcFree, dA));
    CHECK(CALL(hggcFree, dB));
    CHECK(CALL(hggcFree, dC));
    free(A), free(B), free(C), free(hA), free(hB), free(hC);
}

int main(void) {
    hggcStream_t stream;
    CHECK(CALL(hggcSetDevice, 0));
    CHECK(CALL(hggcStreamCreate, &stream));
    acblasHandle_t h;
    CHECK(CALL(acblasCreate, &h));
    CHECK(CALL(acblasSetStream, h, stream));
    hggcStream_t got = NULL;
    CHECK(CALL(acblasGetStream, h, &got));
    if (got != stream) {
        fprintf(stderr, "gemm: acblasGetStream gave another stream\n");
        failures++;
    }

    static const struct gemm_case cases[] = {
        {SGEMM, ACBLAS_OP_N, ACBLAS_OP_N, 37, 29, 41, 40, 41, 38, 1.5, 0.5},
        {SGEMM, ACBLAS_OP_T, ACBLAS_OP_N, 16, 24, 8, 8, 8, 16, 1.0, 0.0},
        {DGEMM, ACBLAS_OP_T, ACBLAS_OP_T, 64, 48, 33, 33, 48, 64, -0.5, 2.0},
        {DGEMM, ACBLAS_OP_N, ACBLAS_OP_C, 10, 7, 5, 12, 9, 11, 2.0, 1.0},
        {GEMMEX_32F, ACBLAS_OP_N, ACBLAS_OP_T, 20, 30, 40, 20, 30, 20, 0.25, -1.0},
        {GEMMEX_64F, ACBLAS_OP_T, ACBLAS_OP_N, 12, 13, 14, 14, 14, 12, 3.0, 0.0},
    };
    CALL(hgtxRangePushA, "gemm-suite");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(h, stream, &cases[i]);
    CALL(hgtxRangePop);

    /* One deliberate mistake, rejected before anything is launched: lda < m. */
    float one = 1.0f, zero = 0.0f;
    float *dummy;
    CHECK(CALL(hggcMalloc, (void **)&dummy, 64 * sizeof(float)));
    acblasStatus_t st = CALL(acblasSgemm, h, ACBLAS_OP_N, ACBLAS_OP_N, 8, 2, 2, &one, dummy, 4,
                             dummy, 2, &zero, dummy, 8);
    if (st != ACBLAS_STATUS_INVALID_VALUE) {
        fprintf(stderr, "gemm: lda < m gave %d, expected ACBLAS_STATUS_INVALID_VALUE\n", st);
        failures++;
    }
    /* And a type this library does not do. */
    st = CALL(acblasGemmEx, h, ACBLAS_OP_N, ACBLAS_OP_N, 2, 2, 2, &one, dummy, ACBLAS_R_16F, 2,
              dummy, ACBLAS_R_16F, 2, &zero, dummy, ACBLAS_R_16F, 2, ACBLAS_COMPUTE_32F,
              ACBLAS_GEMM_DEFAULT);
    if (st != ACBLAS_STATUS_NOT_SUPPORTED) {
        fprintf(stderr, "gemm: 16F GemmEx gave %d, expected ACBLAS_STATUS_NOT_SUPPORTED\n", st);
        failures++;
    }
    CHECK(CALL(hggcFree, dummy));
    CHECK(CALL(acblasDestroy, h));
    CHECK(CALL(hggcStreamDestroy, stream));
    printf("gemm: %s\n", failures ? "FAILED" : "all products verified");
    wl_report("gemm");
    return failures ? 1 : 0;
}
