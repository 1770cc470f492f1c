/*
 * acblas.h - the simulated ACBLAS library (libacblas.so), mirroring cuBLAS v2
 * with the `acblas` prefix.
 *
 * Matrices are column-major, alpha and beta are host pointers read at call time
 * (cuBLAS's host pointer mode). The multiplication really happens, in a kernel
 * launched with hggcLaunchKernel on the handle's stream (acblas_sgemm_kernel for
 * float, acblas_dgemm_kernel for double; GemmEx uses the same kernels), so it is
 * asynchronous and visible as device work of the HGGC runtime. Calls with bad
 * arguments return ACBLAS_STATUS_INVALID_VALUE without launching anything; a
 * handle that is not (or no longer) live gives ACBLAS_STATUS_NOT_INITIALIZED; a
 * failed launch gives ACBLAS_STATUS_EXECUTION_FAILED.
 */
#ifndef ACBLAS_H
#define ACBLAS_H

#include "hggc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum acblasStatus_t {
    ACBLAS_STATUS_SUCCESS = 0,
    ACBLAS_STATUS_NOT_INITIALIZED = 1,
    ACBLAS_STATUS_ALLOC_FAILED = 3,
    ACBLAS_STATUS_INVALID_VALUE = 7,
    ACBLAS_STATUS_ARCH_MISMATCH = 8,
    ACBLAS_STATUS_MAPPING_ERROR = 11,
    ACBLAS_STATUS_EXECUTION_FAILED = 13,
    ACBLAS_STATUS_INTERNAL_ERROR = 14,
    ACBLAS_STATUS_NOT_SUPPORTED = 15,
    ACBLAS_STATUS_LICENSE_ERROR = 16,
} acblasStatus_t;

typedef struct acblasContext *acblasHandle_t;

typedef enum acblasOperation_t {
    ACBLAS_OP_N = 0,
    ACBLAS_OP_T = 1,
    ACBLAS_OP_C = 2, /* same as T for real types */
} acblasOperation_t;

/* Element types, with cudaDataType_t's values. */
typedef enum acblasDataType_t {
    ACBLAS_R_32F = 0,
    ACBLAS_R_64F = 1,
    ACBLAS_R_16F = 2,
    ACBLAS_R_8I = 3,
    ACBLAS_C_32F = 4,
    ACBLAS_C_64F = 5,
    ACBLAS_R_32I = 10,
    ACBLAS_R_16BF = 14,
} acblasDataType_t;

/* Compute types, with cublasComputeType_t's values. */
typedef enum acblasComputeType_t {
    ACBLAS_COMPUTE_16F = 64,
    ACBLAS_COMPUTE_32F = 68,
    ACBLAS_COMPUTE_64F = 70,
    ACBLAS_COMPUTE_32I = 72,
    ACBLAS_COMPUTE_32F_FAST_TF32 = 77,
} acblasComputeType_t;

typedef enum acblasGemmAlgo_t {
    ACBLAS_GEMM_DEFAULT = -1,
    ACBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
} acblasGemmAlgo_t;

acblasStatus_t acblasCreate(acblasHandle_t *handle);
acblasStatus_t acblasDestroy(acblasHandle_t handle);
acblasStatus_t acblasSetStream(acblasHandle_t handle, hggcStream_t streamId);
acblasStatus_t acblasGetStream(acblasHandle_t handle, hggcStream_t *streamId);

/* C = alpha * op(A) * op(B) + beta * C; op(A) is m x k, op(B) k x n, C m x n. */
acblasStatus_t acblasSgemm(acblasHandle_t handle, acblasOperation_t transa,
                           acblasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);
acblasStatus_t acblasDgemm(acblasHandle_t handle, acblasOperation_t transa,
                           acblasOperation_t transb, int m, int n, int k, const double *alpha,
                           const double *A, int lda, const double *B, int ldb, const double *beta,
                           double *C, int ldc);
/* Supported: A, B, C all ACBLAS_R_32F with ACBLAS_COMPUTE_32F (or _FAST_TF32;
 * alpha/beta float), or all ACBLAS_R_64F with ACBLAS_COMPUTE_64F (alpha/beta
 * double). Other valid combinations give ACBLAS_STATUS_NOT_SUPPORTED. */
acblasStatus_t acblasGemmEx(acblasHandle_t handle, acblasOperation_t transa,
                            acblasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, acblasDataType_t Atype, int lda, const void *B,
                            acblasDataType_t Btype, int ldb, const void *beta, void *C,
                            acblasDataType_t Ctype, int ldc, acblasComputeType_t computeType,
                            acblasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif
#endif
