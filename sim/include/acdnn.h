/*
 * acdnn.h - the simulated ACDNN library (libacdnn.so), mirroring cuDNN's
 * handle, descriptor and forward-convolution API with the `acdnn` prefix.
 *
 * Tensors are NCHW float (other valid formats and types are accepted by no
 * call: ACDNN_STATUS_NOT_SUPPORTED). acdnnConvolutionForward really convolves
 * (a direct algorithm, whatever algo is asked for among IMPLICIT_GEMM,
 * IMPLICIT_PRECOMP_GEMM, GEMM and DIRECT; the FFT and Winograd algorithms give
 * NOT_SUPPORTED) in the kernel acdnn_conv2d_fwd_kernel, launched with
 * hggcLaunchKernel on the handle's stream: y = alpha * conv(x, w) + beta * y
 * (y is not read when beta is 0). alpha and beta are host float pointers.
 * No workspace is needed.
 */
#ifndef ACDNN_H
#define ACDNN_H

#include <stddef.h>

#include "hggc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum acdnnStatus_t {
    ACDNN_STATUS_SUCCESS = 0,
    ACDNN_STATUS_NOT_INITIALIZED = 1,
    ACDNN_STATUS_ALLOC_FAILED = 2,
    ACDNN_STATUS_BAD_PARAM = 3,
    ACDNN_STATUS_INTERNAL_ERROR = 4,
    ACDNN_STATUS_INVALID_VALUE = 5,
    ACDNN_STATUS_ARCH_MISMATCH = 6,
    ACDNN_STATUS_MAPPING_ERROR = 7,
    ACDNN_STATUS_EXECUTION_FAILED = 8,
    ACDNN_STATUS_NOT_SUPPORTED = 9,
    ACDNN_STATUS_LICENSE_ERROR = 10,
} acdnnStatus_t;

typedef struct acdnnContext *acdnnHandle_t;
typedef struct acdnnTensorStruct *acdnnTensorDescriptor_t;
typedef struct acdnnFilterStruct *acdnnFilterDescriptor_t;
typedef struct acdnnConvolutionStruct *acdnnConvolutionDescriptor_t;

typedef enum acdnnDataType_t {
    ACDNN_DATA_FLOAT = 0,
    ACDNN_DATA_DOUBLE = 1,
    ACDNN_DATA_HALF = 2,
    ACDNN_DATA_INT8 = 3,
    ACDNN_DATA_INT32 = 4,
} acdnnDataType_t;

typedef enum acdnnTensorFormat_t {
    ACDNN_TENSOR_NCHW = 0,
    ACDNN_TENSOR_NHWC = 1,
    ACDNN_TENSOR_NCHW_VECT_C = 2,
} acdnnTensorFormat_t;

typedef enum acdnnConvolutionMode_t {
    ACDNN_CONVOLUTION = 0,       /* the filter is flipped */
    ACDNN_CROSS_CORRELATION = 1, /* what deep learning calls convolution */
} acdnnConvolutionMode_t;

typedef enum acdnnConvolutionFwdAlgo_t {
    ACDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
    ACDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
    ACDNN_CONVOLUTION_FWD_ALGO_GEMM = 2,
    ACDNN_CONVOLUTION_FWD_ALGO_DIRECT = 3,
    ACDNN_CONVOLUTION_FWD_ALGO_FFT = 4,
    ACDNN_CONVOLUTION_FWD_ALGO_FFT_TILING = 5,
    ACDNN_CONVOLUTION_FWD_ALGO_WINOGRAD = 6,
    ACDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED = 7,
    ACDNN_CONVOLUTION_FWD_ALGO_COUNT = 8,
} acdnnConvolutionFwdAlgo_t;

acdnnStatus_t acdnnCreate(acdnnHandle_t *handle);
acdnnStatus_t acdnnDestroy(acdnnHandle_t handle);
acdnnStatus_t acdnnSetStream(acdnnHandle_t handle, hggcStream_t streamId);

acdnnStatus_t acdnnCreateTensorDescriptor(acdnnTensorDescriptor_t *tensorDesc);
acdnnStatus_t acdnnSetTensor4dDescriptor(acdnnTensorDescriptor_t tensorDesc,
                                         acdnnTensorFormat_t format, acdnnDataType_t dataType,
                                         int n, int c, int h, int w);
acdnnStatus_t acdnnDestroyTensorDescriptor(acdnnTensorDescriptor_t tensorDesc);

acdnnStatus_t acdnnCreateFilterDescriptor(acdnnFilterDescriptor_t *filterDesc);
/* Note the argument order, as cuDNN's: data type before format. */
acdnnStatus_t acdnnSetFilter4dDescriptor(acdnnFilterDescriptor_t filterDesc,
                                         acdnnDataType_t dataType, acdnnTensorFormat_t format,
                                         int k, int c, int h, int w);
acdnnStatus_t acdnnDestroyFilterDescriptor(acdnnFilterDescriptor_t filterDesc);

acdnnStatus_t acdnnCreateConvolutionDescriptor(acdnnConvolutionDescriptor_t *convDesc);
acdnnStatus_t acdnnSetConvolution2dDescriptor(acdnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, acdnnConvolutionMode_t mode,
                                              acdnnDataType_t computeType);
acdnnStatus_t acdnnDestroyConvolutionDescriptor(acdnnConvolutionDescriptor_t convDesc);

acdnnStatus_t acdnnGetConvolution2dForwardOutputDim(const acdnnConvolutionDescriptor_t convDesc,
                                                    const acdnnTensorDescriptor_t inputTensorDesc,
                                                    const acdnnFilterDescriptor_t filterDesc,
                                                    int *n, int *c, int *h, int *w);

acdnnStatus_t acdnnConvolutionForward(acdnnHandle_t handle, const void *alpha,
                                      const acdnnTensorDescriptor_t xDesc, const void *x,
                                      const acdnnFilterDescriptor_t wDesc, const void *w,
                                      const acdnnConvolutionDescriptor_t convDesc,
                                      acdnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const acdnnTensorDescriptor_t yDesc, void *y);

#ifdef __cplusplus
}
#endif
#endif
