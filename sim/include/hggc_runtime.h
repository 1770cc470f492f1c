/*
 * hggc_runtime.h - the simulated HGGC runtime (a stand-in for a PPU runtime).
 *
 * The ABI mirrors the CUDA runtime with the `hggc` prefix. Work submitted to a
 * stream runs asynchronously and in order on that stream's worker thread, copies
 * move real bytes at a configurable bandwidth, and errors come back as codes, so
 * every run has a known ground truth.
 *
 * Environment:
 *   HGGC_SIM_DEVICE_COUNT   number of devices (default 1)
 *   HGGC_SIM_BANDWIDTH_GBPS copy bandwidth in GB/s (default 10)
 *   HGGC_SIM_CLOCK_OFFSET_NS device clock minus CLOCK_MONOTONIC (default 1000000000123)
 *   HGGC_SIM_GROUND_TRUTH   path: every API call is appended there as one line
 *   HGGC_INJECTION64_PATH   shared library loaded at first API call; its
 *                           `int InitializeInjection(void)` is called (as CUDA does)
 */
#ifndef HGGC_RUNTIME_H
#define HGGC_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hggcError {
    hggcSuccess = 0,
    hggcErrorInvalidValue = 1,
    hggcErrorMemoryAllocation = 2,
    hggcErrorInitializationError = 3,
    hggcErrorProfilerDisabled = 5,
    hggcErrorInvalidDevicePointer = 17,
    hggcErrorInvalidMemcpyDirection = 21,
    hggcErrorInvalidDeviceFunction = 98,
    hggcErrorNoDevice = 100,
    hggcErrorInvalidDevice = 101,
    hggcErrorInvalidResourceHandle = 400,
    hggcErrorNotReady = 600,
} hggcError_t;

typedef struct dim3 {
    unsigned int x, y, z;
} dim3;

typedef struct hggcStream_st *hggcStream_t;
typedef struct hggcEvent_st *hggcEvent_t;

typedef enum hggcMemcpyKind {
    hggcMemcpyHostToHost = 0,
    hggcMemcpyHostToDevice = 1,
    hggcMemcpyDeviceToHost = 2,
    hggcMemcpyDeviceToDevice = 3,
} hggcMemcpyKind;

/* A kernel is a host function run on the stream's worker thread. */
typedef void (*hggcKernel_t)(void **args);

hggcError_t hggcGetDeviceCount(int *count);
hggcError_t hggcSetDevice(int device);
hggcError_t hggcGetDevice(int *device);
hggcError_t hggcMalloc(void **devPtr, size_t size);
hggcError_t hggcFree(void *devPtr);
hggcError_t hggcMallocHost(void **ptr, size_t size);
hggcError_t hggcFreeHost(void *ptr);
hggcError_t hggcMemcpy(void *dst, const void *src, size_t count, hggcMemcpyKind kind);
hggcError_t hggcMemcpyAsync(void *dst, const void *src, size_t count, hggcMemcpyKind kind,
                            hggcStream_t stream);
hggcError_t hggcMemset(void *devPtr, int value, size_t count);
hggcError_t hggcMemsetAsync(void *devPtr, int value, size_t count, hggcStream_t stream);
hggcError_t hggcStreamCreate(hggcStream_t *stream);
hggcError_t hggcStreamSynchronize(hggcStream_t stream);
hggcError_t hggcStreamDestroy(hggcStream_t stream);
hggcError_t hggcDeviceSynchronize(void);
hggcError_t hggcEventCreate(hggcEvent_t *event);
hggcError_t hggcEventRecord(hggcEvent_t event, hggcStream_t stream);
hggcError_t hggcEventSynchronize(hggcEvent_t event);
hggcError_t hggcEventElapsedTime(float *ms, hggcEvent_t start, hggcEvent_t end);
hggcError_t hggcEventDestroy(hggcEvent_t event);
hggcError_t hggcProfilerStart(void);
hggcError_t hggcProfilerStop(void);
hggcError_t hggcGetLastError(void);

/* Runs fn(user) on the calling thread before returning, and returns what it
 * returned: a host callback run synchronously. The callback is the
 * application's code, so the runtime calls it makes are the application's. */
typedef hggcError_t (*hggcHostCallback_t)(void *user);
hggcError_t hggcRunHostCallback(hggcHostCallback_t fn, void *user);

/* Asks the runtime's own exported hggcGetDevice n times, as vendor libraries
 * call their own API internally (libcudnn calling cudnnGetLibConfig): those
 * calls are the runtime's, not the application's. */
hggcError_t hggcQueryDeviceInternally(int n);
hggcError_t hggcLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                             size_t sharedMem, hggcStream_t stream);
const char *hggcGetErrorString(hggcError_t error);

#ifdef __cplusplus
}
#endif
#endif
