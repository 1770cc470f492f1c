/*
 * The simulated ACDNN library (cuDNN's handle/descriptor/forward-convolution
 * API with the `acdnn` prefix).
 *
 * Handles and descriptors are checked against registries of live ones, so a
 * destroyed or made-up pointer is an error, not a crash. The convolution runs
 * in acdnn_conv2d_fwd_kernel on the handle's stream; its arguments are copied
 * into a heap block the kernel frees.
 *
 * Ground truth (HGGC_SIM_GROUND_TRUTH), besides api/pid/tid/ret/corr/start/end:
 *   acdnnCreate / acdnnDestroy: "handle"; acdnnSetStream: "handle", "stream";
 *   acdnnCreate*Descriptor / acdnnDestroy*Descriptor: "desc";
 *   acdnnSetTensor4dDescriptor: "desc", "format", "datatype", "dims" [n,c,h,w];
 *   acdnnSetFilter4dDescriptor: "desc", "datatype", "format", "dims" [k,c,h,w];
 *   acdnnSetConvolution2dDescriptor: "desc", "pad" [h,w], "stride" [u,v],
 *     "dilation" [h,w], "mode", "compute";
 *   acdnnGetConvolution2dForwardOutputDim: "conv", "x", "w" (descriptors),
 *     "dims" [n,c,h,w] (the output; [] on error);
 *   acdnnConvolutionForward: "handle", "x_dims", "w_dims", "y_dims" ([] for a
 *     bad descriptor), "pad", "stride", "dilation", "mode", "algo", "alpha",
 *     "beta", "x", "w", "y" (addresses), "workspace", "workspace_bytes",
 *     "stream", "kernel" ("" when nothing was launched).
 */
#define _GNU_SOURCE
#include "acdnn.h"
#include "sim_truth.h"

struct acdnnContext {
    hggcStream_t stream;
};

struct acdnnTensorStruct {
    int set, format, dtype, dims[4]; /* n, c, h, w */
};

struct acdnnFilterStruct {
    int set, dtype, format, dims[4]; /* k, c, h, w */
};

struct acdnnConvolutionStruct {
    int set, pad[2], stride[2], dilation[2], mode, compute;
};

static sim_live g_handles = SIM_LIVE_INIT;
static sim_live g_tensors = SIM_LIVE_INIT;
static sim_live g_filters = SIM_LIVE_INIT;
static sim_live g_convs = SIM_LIVE_INIT;

/* ------------------------------------------------------------------ kernel */

struct conv_work {
    void *argv[1]; /* argv[0] points at this block */
    int N, C, H, W, K, R, S, P, Q;
    int ph, pw, u, v, dh, dw, flip;
    float alpha, beta;
    const float *x, *w;
    float *y;
};

void acdnn_conv2d_fwd_kernel(void **args) {
    struct conv_work *k = args[0];
    for (long n = 0; n < k->N; n++)
        for (long o = 0; o < k->K; o++)
            for (long p = 0; p < k->P; p++)
                for (long q = 0; q < k->Q; q++) {
                    float acc = 0;
                    for (long c = 0; c < k->C; c++)
                        for (long r = 0; r < k->R; r++) {
                            long ih = p * k->u - k->ph + r * k->dh;
                            if (ih < 0 || ih >= k->H)
                                continue;
                            for (long s = 0; s < k->S; s++) {
                                long iw = q * k->v - k->pw + s * k->dw;
                                if (iw < 0 || iw >= k->W)
                                    continue;
                                long fr = k->flip ? k->R - 1 - r : r;
                                long fs = k->flip ? k->S - 1 - s : s;
                                acc += k->x[((n * k->C + c) * k->H + ih) * k->W + iw] *
                                       k->w[((o * k->C + c) * k->R + fr) * k->S + fs];
                            }
                        }
                    float *y = &k->y[((n * k->K + o) * k->P + p) * k->Q + q];
                    *y = k->beta == 0 ? k->alpha * acc : k->alpha * acc + k->beta * *y;
                }
    free(k);
}

/* ----------------------------------------------------------------- helpers */

static int dtype_known(int t) { return t >= ACDNN_DATA_FLOAT && t <= ACDNN_DATA_INT32; }
static int format_known(int f) { return f >= ACDNN_TENSOR_NCHW && f <= ACDNN_TENSOR_NCHW_VECT_C; }

static struct acdnnTensorStruct *tensor_ok(acdnnTensorDescriptor_t t) {
    return sim_live_has(&g_tensors, t) && t->set ? t : NULL;
}
static struct acdnnFilterStruct *filter_ok(acdnnFilterDescriptor_t f) {
    return sim_live_has(&g_filters, f) && f->set ? f : NULL;
}
static struct acdnnConvolutionStruct *conv_ok(acdnnConvolutionDescriptor_t c) {
    return sim_live_has(&g_convs, c) && c->set ? c : NULL;
}

/* The output dims of a convolution, or BAD_PARAM. */
static acdnnStatus_t out_dims(const struct acdnnConvolutionStruct *cd,
                              const struct acdnnTensorStruct *x,
                              const struct acdnnFilterStruct *f, int out[4]) {
    if (!cd || !x || !f || x->dims[1] != f->dims[1])
        return ACDNN_STATUS_BAD_PARAM;
    out[0] = x->dims[0];
    out[1] = f->dims[0];
    for (int i = 0; i < 2; i++) {
        long span = (long)(f->dims[2 + i] - 1) * cd->dilation[i] + 1;
        long in = (long)x->dims[2 + i] + 2L * cd->pad[i];
        if (in < span)
            return ACDNN_STATUS_BAD_PARAM;
        out[2 + i] = (int)(1 + (in - span) / cd->stride[i]);
    }
    return ACDNN_STATUS_SUCCESS;
}

static acdnnStatus_t create_desc(sim_call c, sim_live *reg, size_t size, void **out) {
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    void *d = NULL;
    if (!out)
        r = ACDNN_STATUS_BAD_PARAM;
    else if (!(d = calloc(1, size)) || !sim_live_add(reg, d)) {
        free(d);
        d = NULL;
        r = ACDNN_STATUS_ALLOC_FAILED;
    } else {
        *out = d;
    }
    sim_json j = {0};
    sim_json_ptr(&j, "desc", d);
    sim_exit(c, r, &j);
    return r;
}

static acdnnStatus_t destroy_desc(sim_call c, sim_live *reg, void *d) {
    /* cuDNN accepts NULL here. */
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    if (d && !sim_live_remove(reg, d))
        r = ACDNN_STATUS_BAD_PARAM;
    else
        free(d);
    sim_json j = {0};
    sim_json_ptr(&j, "desc", d);
    sim_exit(c, r, &j);
    return r;
}

/* ---------------------------------------------------------------- handles */

acdnnStatus_t acdnnCreate(acdnnHandle_t *handle) {
    sim_call c = sim_enter(__func__);
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    struct acdnnContext *h = NULL;
    if (!handle)
        r = ACDNN_STATUS_BAD_PARAM;
    else if (!(h = calloc(1, sizeof *h)) || !sim_live_add(&g_handles, h)) {
        free(h);
        h = NULL;
        r = ACDNN_STATUS_ALLOC_FAILED;
    } else {
        *handle = h;
    }
    sim_json j = {0};
    sim_json_ptr(&j, "handle", h);
    sim_exit(c, r, &j);
    return r;
}

acdnnStatus_t acdnnDestroy(acdnnHandle_t handle) {
    sim_call c = sim_enter(__func__);
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    if (!handle)
        r = ACDNN_STATUS_BAD_PARAM;
    else if (!sim_live_remove(&g_handles, handle))
        r = ACDNN_STATUS_NOT_INITIALIZED;
    else
        free(handle);
    sim_json j = {0};
    sim_json_ptr(&j, "handle", handle);
    sim_exit(c, r, &j);
    return r;
}

acdnnStatus_t acdnnSetStream(acdnnHandle_t handle, hggcStream_t streamId) {
    sim_call c = sim_enter(__func__);
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    if (!handle)
        r = ACDNN_STATUS_BAD_PARAM;
    else if (!sim_live_has(&g_handles, handle))
        r = ACDNN_STATUS_NOT_INITIALIZED;
    else
        handle->stream = streamId;
    sim_json j = {0};
    sim_json_ptr(&j, "handle", handle);
    sim_json_ptr(&j, "stream", streamId);
    sim_exit(c, r, &j);
    return r;
}

/* ------------------------------------------------------------ descriptors */

acdnnStatus_t acdnnCreateTensorDescriptor(acdnnTensorDescriptor_t *tensorDesc) {
    sim_call c = sim_enter(__func__);
    return create_desc(c, &g_tensors, sizeof(struct acdnnTensorStruct), (void **)tensorDesc);
}

acdnnStatus_t acdnnSetTensor4dDescriptor(acdnnTensorDescriptor_t tensorDesc,
                                         acdnnTensorFormat_t format, acdnnDataType_t dataType,
                                         int n, int c, int h, int w) {
    sim_call call = sim_enter(__func__);
    int dims[4] = {n, c, h, w};
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    if (!sim_live_has(&g_tensors, tensorDesc) || !format_known((int)format) ||
        !dtype_known((int)dataType) || n <= 0 || c <= 0 || h <= 0 || w <= 0)
        r = ACDNN_STATUS_BAD_PARAM;
    else if (format != ACDNN_TENSOR_NCHW || dataType != ACDNN_DATA_FLOAT)
        r = ACDNN_STATUS_NOT_SUPPORTED;
    else {
        tensorDesc->format = (int)format;
        tensorDesc->dtype = (int)dataType;
        memcpy(tensorDesc->dims, dims, sizeof dims);
        tensorDesc->set = 1;
    }
    sim_json j = {0};
    sim_json_ptr(&j, "desc", tensorDesc);
    sim_json_int(&j, "format", (int)format);
    sim_json_int(&j, "datatype", (int)dataType);
    sim_json_dims(&j, "dims", dims, 4);
    sim_exit(call, r, &j);
    return r;
}

acdnnStatus_t acdnnDestroyTensorDescriptor(acdnnTensorDescriptor_t tensorDesc) {
    sim_call c = sim_enter(__func__);
    return destroy_desc(c, &g_tensors, tensorDesc);
}

acdnnStatus_t acdnnCreateFilterDescriptor(acdnnFilterDescriptor_t *filterDesc) {
    sim_call c = sim_enter(__func__);
    return create_desc(c, &g_filters, sizeof(struct acdnnFilterStruct), (void **)filterDesc);
}

acdnnStatus_t acdnnSetFilter4dDescriptor(acdnnFilterDescriptor_t filterDesc,
                                         acdnnDataType_t dataType, acdnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
    sim_call call = sim_enter(__func__);
    int dims[4] = {k, c, h, w};
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    if (!sim_live_has(&g_filters, filterDesc) || !format_known((int)format) ||
        !dtype_known((int)dataType) || k <= 0 || c <= 0 || h <= 0 || w <= 0)
        r = ACDNN_STATUS_BAD_PARAM;
    else if (format != ACDNN_TENSOR_NCHW || dataType != ACDNN_DATA_FLOAT)
        r = ACDNN_STATUS_NOT_SUPPORTED;
    else {
        filterDesc->format = (int)format;
        filterDesc->dtype = (int)dataType;
        memcpy(filterDesc->dims, dims, sizeof dims);
        filterDesc->set = 1;
    }
    sim_json j = {0};
    sim_json_ptr(&j, "desc", filterDesc);
    sim_json_int(&j, "datatype", (int)dataType);
    sim_json_int(&j, "format", (int)format);
    sim_json_dims(&j, "dims", dims, 4);
    sim_exit(call, r, &j);
    return r;
}

acdnnStatus_t acdnnDestroyFilterDescriptor(acdnnFilterDescriptor_t filterDesc) {
    sim_call c = sim_enter(__func__);
    return destroy_desc(c, &g_filters, filterDesc);
}

acdnnStatus_t acdnnCreateConvolutionDescriptor(acdnnConvolutionDescriptor_t *convDesc) {
    sim_call c = sim_enter(__func__);
    return create_desc(c, &g_convs, sizeof(struct acdnnConvolutionStruct), (void **)convDesc);
}

acdnnStatus_t acdnnSetConvolution2dDescriptor(acdnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, acdnnConvolutionMode_t mode,
                                              acdnnDataType_t computeType) {
    sim_call c = sim_enter(__func__);
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    if (!sim_live_has(&g_convs, convDesc) || pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 ||
        dilation_h <= 0 || dilation_w <= 0 ||
        (mode != ACDNN_CONVOLUTION && mode != ACDNN_CROSS_CORRELATION) ||
        !dtype_known((int)computeType))
        r = ACDNN_STATUS_BAD_PARAM;
    else if (computeType != ACDNN_DATA_FLOAT)
        r = ACDNN_STATUS_NOT_SUPPORTED;
    else {
        convDesc->pad[0] = pad_h, convDesc->pad[1] = pad_w;
        convDesc->stride[0] = u, convDesc->stride[1] = v;
        convDesc->dilation[0] = dilation_h, convDesc->dilation[1] = dilation_w;
        convDesc->mode = (int)mode;
        convDesc->compute = (int)computeType;
        convDesc->set = 1;
    }
    int pad[2] = {pad_h, pad_w}, stride[2] = {u, v}, dil[2] = {dilation_h, dilation_w};
    sim_json j = {0};
    sim_json_ptr(&j, "desc", convDesc);
    sim_json_dims(&j, "pad", pad, 2);
    sim_json_dims(&j, "stride", stride, 2);
    sim_json_dims(&j, "dilation", dil, 2);
    sim_json_int(&j, "mode", (int)mode);
    sim_json_int(&j, "compute", (int)computeType);
    sim_exit(c, r, &j);
    return r;
}

acdnnStatus_t acdnnDestroyConvolutionDescriptor(acdnnConvolutionDescriptor_t convDesc) {
    sim_call c = sim_enter(__func__);
    return destroy_desc(c, &g_convs, convDesc);
}

acdnnStatus_t acdnnGetConvolution2dForwardOutputDim(const acdnnConvolutionDescriptor_t convDesc,
                                                    const acdnnTensorDescriptor_t inputTensorDesc,
                                                    const acdnnFilterDescriptor_t filterDesc,
                                                    int *n, int *c, int *h, int *w) {
    sim_call call = sim_enter(__func__);
    int out[4];
    acdnnStatus_t r = out_dims(conv_ok(convDesc), tensor_ok(inputTensorDesc),
                               filter_ok(filterDesc), out);
    if (r == ACDNN_STATUS_SUCCESS && (!n || !c || !h || !w))
        r = ACDNN_STATUS_BAD_PARAM;
    if (r == ACDNN_STATUS_SUCCESS)
        *n = out[0], *c = out[1], *h = out[2], *w = out[3];
    sim_json j = {0};
    sim_json_ptr(&j, "conv", convDesc);
    sim_json_ptr(&j, "x", inputTensorDesc);
    sim_json_ptr(&j, "w", filterDesc);
    sim_json_dims(&j, "dims", out, r == ACDNN_STATUS_SUCCESS ? 4 : 0);
    sim_exit(call, r, &j);
    return r;
}

/* ------------------------------------------------------------ convolution */

acdnnStatus_t acdnnConvolutionForward(acdnnHandle_t handle, const void *alpha,
                                      const acdnnTensorDescriptor_t xDesc, const void *x,
                                      const acdnnFilterDescriptor_t wDesc, const void *w,
                                      const acdnnConvolutionDescriptor_t convDesc,
                                      acdnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const acdnnTensorDescriptor_t yDesc, void *y) {
    sim_call c = sim_enter(__func__);
    const struct acdnnTensorStruct *xd = tensor_ok(xDesc), *yd = tensor_ok(yDesc);
    const struct acdnnFilterStruct *wd = filter_ok(wDesc);
    const struct acdnnConvolutionStruct *cd = conv_ok(convDesc);
    int live = handle && sim_live_has(&g_handles, handle);
    int out[4] = {0};
    const char *kernel = "";
    acdnnStatus_t r = ACDNN_STATUS_SUCCESS;
    if (!handle)
        r = ACDNN_STATUS_BAD_PARAM;
    else if (!live)
        r = ACDNN_STATUS_NOT_INITIALIZED;
    else if (!alpha || !beta || !x || !w || !y || !yd ||
             (r = out_dims(cd, xd, wd, out)) != ACDNN_STATUS_SUCCESS ||
             memcmp(out, yd->dims, sizeof out) != 0 || (int)algo < 0 ||
             (int)algo >= ACDNN_CONVOLUTION_FWD_ALGO_COUNT)
        r = ACDNN_STATUS_BAD_PARAM;
    else if (algo > ACDNN_CONVOLUTION_FWD_ALGO_DIRECT)
        r = ACDNN_STATUS_NOT_SUPPORTED;
    else {
        struct conv_work *k = calloc(1, sizeof *k);
        if (!k)
            r = ACDNN_STATUS_ALLOC_FAILED;
        else {
            k->argv[0] = k;
            k->N = xd->dims[0], k->C = xd->dims[1], k->H = xd->dims[2], k->W = xd->dims[3];
            k->K = wd->dims[0], k->R = wd->dims[2], k->S = wd->dims[3];
            k->P = out[2], k->Q = out[3];
            k->ph = cd->pad[0], k->pw = cd->pad[1], k->u = cd->stride[0], k->v = cd->stride[1];
            k->dh = cd->dilation[0], k->dw = cd->dilation[1];
            k->flip = cd->mode == ACDNN_CONVOLUTION;
            k->alpha = *(const float *)alpha;
            k->beta = *(const float *)beta;
            k->x = x, k->w = w, k->y = y;
            dim3 grid = {(unsigned)(((long)k->P * k->Q + 255) / 256), (unsigned)k->K,
                         (unsigned)k->N};
            dim3 block = {256, 1, 1};
            if (hggcLaunchKernel((const void *)acdnn_conv2d_fwd_kernel, grid, block, k->argv, 0,
                                 handle->stream) != hggcSuccess) {
                free(k);
                r = ACDNN_STATUS_EXECUTION_FAILED;
            } else {
                kernel = "acdnn_conv2d_fwd_kernel";
            }
        }
    }
    sim_json j = {0};
    sim_json_ptr(&j, "handle", handle);
    sim_json_dims(&j, "x_dims", xd ? xd->dims : NULL, xd ? 4 : 0);
    sim_json_dims(&j, "w_dims", wd ? wd->dims : NULL, wd ? 4 : 0);
    sim_json_dims(&j, "y_dims", yd ? yd->dims : NULL, yd ? 4 : 0);
    sim_json_dims(&j, "pad", cd ? cd->pad : NULL, cd ? 2 : 0);
    sim_json_dims(&j, "stride", cd ? cd->stride : NULL, cd ? 2 : 0);
    sim_json_dims(&j, "dilation", cd ? cd->dilation : NULL, cd ? 2 : 0);
    sim_json_int(&j, "mode", cd ? cd->mode : -1);
    sim_json_int(&j, "algo", (int)algo);
    sim_json_double(&j, "alpha", alpha ? (double)*(const float *)alpha : NAN);
    sim_json_double(&j, "beta", beta ? (double)*(const float *)beta : NAN);
    sim_json_ptr(&j, "x", x);
    sim_json_ptr(&j, "w", w);
    sim_json_ptr(&j, "y", y);
    sim_json_ptr(&j, "workspace", workSpace);
    sim_json_uint(&j, "workspace_bytes", workSpaceSizeInBytes);
    sim_json_ptr(&j, "stream", live ? handle->stream : NULL);
    sim_json_str(&j, "kernel", kernel);
    sim_exit(c, r, &j);
    return r;
}
