/* Two ACDNN forward convolutions (cross-correlation with padding and strides;
 * a flipped convolution with dilation and beta accumulation), each inside an
 * HGTX range, checked against a host reference; plus a deliberately invalid
 * descriptor and an unsupported algorithm. Exits non-zero if anything is
 * wrong. Usage: conv */
#include "acdnn.h"
#include "hggc_runtime.h"
#include "hgtx.h"
#include "workload_common.h"
#include <math.h>

static int failures;

struct conv_case {
    int n, c, h, w, k, r, s;
    int ph, pw, u, v, dh, dw;
    acdnnConvolutionMode_t mode;
    float alpha, beta;
};

static void run_case(acdnnHandle_t h, hggcStream_t stream, const struct conv_case *t, int idx) {
    acdnnTensorDescriptor_t xd, yd;
    acdnnFilterDescriptor_t wd;
    acdnnConvolutionDescriptor_t cd;
    CHECK(CALL(acdnnCreateTensorDescriptor, &xd));
    CHECK(CALL(acdnnCreateTensorDescriptor, &yd));
    CHECK(CALL(acdnnCreateFilterDescriptor, &wd));
    CHECK(CALL(acdnnCreateConvolutionDescriptor, &cd));
    CHECK(CALL(acdnnSetTensor4dDescriptor, xd, ACDNN_TENSOR_NCHW, ACDNN_DATA_FLOAT, t->n, t->c,
               t->h, t->w));
    CHECK(CALL(acdnnSetFilter4dDescriptor, wd, ACDNN_DATA_FLOAT, ACDNN_TENSOR_NCHW, t->k, t->c,
               t->r, t->s));
    CHECK(CALL(acdnnSetConvolution2dDescriptor, cd, t->ph, t->pw, t->u, t->v, t->dh, t->dw,
               t->mode, ACDNN_DATA_FLOAT));
    int on, oc, oh, ow;
    CHECK(CALL(acdnnGetConvolution2dForwardOutputDim, cd, xd, wd, &on, &oc, &oh, &ow));
    int want_h = 1 + (t->h + 2 * t->ph - ((t->r - 1) * t->dh + 1)) / t->u;
    int want_w = 1 + (t->w + 2 * t->pw - ((t->s - 1) * t->dw + 1)) / t->v;
    if (on != t->n || oc != t->k || oh != want_h || ow != want_w) {
        fprintf(stderr, "conv: output dims %dx%dx%dx%d, expected %dx%dx%dx%d\n", on, oc, oh, ow,
                t->n, t->k, want_h, want_w);
        failures++;
        return;
    }
    CHECK(CALL(acdnnSetTensor4dDescriptor, yd, ACDNN_TENSOR_NCHW, ACDNN_DATA_FLOAT, on, oc, oh,
               ow));
    size_t nx = (size_t)t->n * t->c * t->h * t->w, nw = (size_t)t->k * t->c * t->r * t->s;
    size_t ny = (size_t)on * oc * oh * ow;
    float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *y = malloc(ny * sizeof *y);
    float *y0 = malloc(ny * sizeof *y0);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((int)((i * 7) % 17) - 8) * 0.125f;
    for (size_t i = 0; i < nw; i++)
        w[i] = (float)((int)((i * 3) % 7) - 3) * 0.5f;
    for (size_t i = 0; i < ny; i++)
        y0[i] = (float)((int)(i % 5) - 2);
    float *dx, *dw, *dy;
    CHECK(CALL(hggcMalloc, (void **)&dx, nx * sizeof *x));
    CHECK(CALL(hggcMalloc, (void **)&dw, nw * sizeof *w));
    CHECK(CALL(hggcMalloc, (void **)&dy, ny * sizeof *y));
    CHECK(CALL(hggcMemcpyAsync, dx, x, nx * sizeof *x, hggcMemcpyHostToDevice, stream));
    CHECK(CALL(hggcMemcpyAsync, dw, w, nw * sizeof *w, hggcMemcpyHostToDevice, stream));
    CHECK(CALL(hggcMemcpyAsync, dy, y0, ny * sizeof *y, hggcMemcpyHostToDevice, stream));
    char label[64];
    snprintf(label, sizeof label, "conv%d %dx%dx%dx%d * %dx%dx%dx%d", idx, t->n, t->c, t->h,
             t->w, t->k, t->c, t->r, t->s);
    CALL(hgtxRangePushA, label);
    CHECK(CALL(acdnnConvolutionForward, h, &t->alpha, xd, dx, wd, dw, cd,
               ACDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, (size_t)0, &t->beta, yd, dy));
    CHECK(CALL(hggcMemcpyAsync, y, dy, ny * sizeof *y, hggcMemcpyDeviceToHost, stream));
    CHECK(CALL(hggcStreamSynchronize, stream));
    CALL(hgtxRangePop);

    double worst = 0;
    for (int n = 0; n < on; n++)
        for (int k = 0; k < oc; k++)
            for (int p = 0; p < oh; p++)
                for (int q = 0; q < ow; q++) {
                    double acc = 0;
                    for (int c = 0; c < t->c; c++)
                        for (int r = 0; r < t->r; r++)
                            for (int s = 0; s < t->s; s++) {
                                int ih = p * t->u - t->ph + r * t->dh;
                                int iw = q * t->v - t->pw + s * t->dw;
                                if (ih < 0 || ih >= t->h || iw < 0 || iw >= t->w)
                                    continue;
                                int fr = t->mode == ACDNN_CONVOLUTION ? t->r - 1 - r : r;
                                int fs = t->mode == ACDNN_CONVOLUTION ? t->s - 1 - s : s;
                                acc += (double)x[((n * t->c + c) * t->h + ih) * t->w + iw] *
                                       w[((k * t->c + c) * t->r + fr) * t->s + fs];
                            }
                    size_t at = (((size_t)n * oc + k) * oh + p) * ow + q;
                    double want = t->alpha * acc + (t->beta != 0 ? t->beta * y0[at] : 0);
                    double err = fabs(y[at] - want) / (1.0 + fabs(want));
                    if (err > worst)
                        worst = err;
                }
    printf("conv: %-36s -> %dx%dx%dx%d, max relative error %.3g%s\n", label, on, oc, oh, ow,
           worst, worst > 1e-5 ? "  WRONG" : "");
    if (worst > 1e-5)
        failures++;
    if (idx == 0) {
        /* An algorithm this library does not do: rejected, nothing launched. */
        acdnnStatus_t st = CALL(acdnnConvolutionForward, h, &t->alpha, xd, dx, wd, dw, cd,
                                ACDNN_CONVOLUTION_FWD_ALGO_FFT, NULL, (size_t)0, &t->beta, yd, dy);
        if (st != ACDNN_STATUS_NOT_SUPPORTED) {
            fprintf(stderr, "conv: FFT gave %d, expected ACDNN_STATUS_NOT_SUPPORTED\n", st);
            failures++;
        }
    }
    CHECK(CALL(hggcFree, dx));
    CHECK(CALL(hggcFree, dw));
    CHECK(CALL(hggcFree, dy));
    CHECK(CALL(acdnnDestroyConvolutionDescriptor, cd));
    CHECK(CALL(acdnnDestroyFilterDescriptor, wd));
    CHECK(CALL(acdnnDestroyTensorDescriptor, yd));
    CHECK(CALL(acdnnDestroyTensorDescriptor, xd));
    free(x), free(w), free(y), free(y0);
}

int main(void) {
    hggcStream_t stream;
    CHECK(CALL(hggcSetDevice, 0));
    CHECK(CALL(hggcStreamCreate, &stream));
    acdnnHandle_t h;
    CHECK(CALL(acdnnCreate, &h));
    CHECK(CALL(acdnnSetStream, h, stream));

    static const struct conv_case cases[] = {
        {2, 3, 9, 11, 4, 3, 3, 1, 1, 1, 2, 1, 1, ACDNN_CROSS_CORRELATION, 1.0f, 0.0f},
        {1, 2, 12, 10, 3, 2, 3, 0, 2, 2, 1, 2, 1, ACDNN_CONVOLUTION, 0.5f, 2.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(h, stream, &cases[i], (int)i);

    /* One deliberate mistake: a tensor with no images. */
    acdnnTensorDescriptor_t bad;
    CHECK(CALL(acdnnCreateTensorDescriptor, &bad));
    acdnnStatus_t st = CALL(acdnnSetTensor4dDescriptor, bad, ACDNN_TENSOR_NCHW, ACDNN_DATA_FLOAT,
                            0, 3, 8, 8);
    if (st != ACDNN_STATUS_BAD_PARAM) {
        fprintf(stderr, "conv: n = 0 gave %d, expected ACDNN_STATUS_BAD_PARAM\n", st);
        failures++;
    }
    CHECK(CALL(acdnnDestroyTensorDescriptor, bad));
    CHECK(CALL(acdnnDestroy, h));
    CHECK(CALL(hggcStreamDestroy, stream));
    printf("conv: %s\n", failures ? "FAILED" : "all convolutions verified");
    wl_report("conv");
    return failures ? 1 : 0;
}
