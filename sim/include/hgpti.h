/*
 * hgpti.h - the simulated runtime's profiling interface, in the spirit of CUPTI.
 *
 * Device work (kernels, copies, memsets) is stamped on the device clock, which is
 * CLOCK_MONOTONIC plus a fixed offset (HGGC_SIM_CLOCK_OFFSET_NS), and carries the
 * correlation id of the API call that issued it. API callbacks see the same id.
 */
#ifndef HGPTI_H
#define HGPTI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hgptiResult { HGPTI_SUCCESS = 0, HGPTI_ERROR_INVALID_PARAMETER = 1 } hgptiResult;

typedef enum hgptiActivityKind {
    HGPTI_ACTIVITY_KIND_KERNEL = 1,
    HGPTI_ACTIVITY_KIND_MEMCPY = 2,
    HGPTI_ACTIVITY_KIND_MEMSET = 3,
} hgptiActivityKind;

/* One record of device activity. `name` is set for kernels (their symbol). */
typedef struct hgptiActivity {
    uint32_t kind;        /* hgptiActivityKind */
    uint32_t correlationId;
    uint64_t start;       /* device clock, ns */
    uint64_t end;         /* device clock, ns */
    uint32_t deviceId;
    uint32_t streamId;
    uint64_t bytes;       /* copies and memsets */
    uint32_t copyKind;    /* hggcMemcpyKind, copies only */
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t sharedMem;
    const void *func;     /* kernels only */
    uint32_t srcKind;     /* hgptiMemoryKind of a copy's source */
    uint32_t dstKind;     /* hgptiMemoryKind of a copy's destination (and a memset's) */
} hgptiActivity;

/* Where a copy's memory lives, numbered as CUPTI_ACTIVITY_MEMORY_KIND_*:
 * host memory from hggcMallocHost is pinned, any other host memory
 * (malloc, the stack) pageable. */
typedef enum hgptiMemoryKind {
    HGPTI_MEMORY_KIND_UNKNOWN = 0,
    HGPTI_MEMORY_KIND_PAGEABLE = 1,
    HGPTI_MEMORY_KIND_PINNED = 2,
    HGPTI_MEMORY_KIND_DEVICE = 3,
} hgptiMemoryKind;

typedef void (*hgptiBufferRequestedFn)(uint8_t **buffer, size_t *size, size_t *maxNumRecords);
typedef void (*hgptiBufferCompletedFn)(uint8_t *buffer, size_t size, size_t validSize);

/* Arguments handed to API callbacks, as 64-bit values laid out the way the
 * x86-64 SysV ABI passes them (six registers, then the stack; a dim3 by value
 * takes two slots: {x,y} then {z}), like CUPTI's functionParams. */
#define HGPTI_MAX_ARGS 8

/* API callback: site 0 = enter, 1 = exit; called on the calling thread.
 * `args` points to HGPTI_MAX_ARGS values; `result` is the return value at
 * exit (0 at entry), like CUPTI's functionReturnValue. */
typedef void (*hgptiApiCallbackFn)(void *userdata, int site, const char *apiName,
                                   uint32_t correlationId, const uint64_t *args,
                                   uint64_t result);

/* Activity may be enabled at any time, also after the runtime is set up (a
 * tool loaded into a running process), as CUPTI's cuptiActivityEnable after
 * cuInit: the work launched from then on is recorded, not work queued
 * before that runs afterwards. Disabling stops the records of work launched
 * before too. */
hgptiResult hgptiActivityEnable(hgptiActivityKind kind);
hgptiResult hgptiActivityDisable(hgptiActivityKind kind);
hgptiResult hgptiActivityRegisterCallbacks(hgptiBufferRequestedFn requested,
                                           hgptiBufferCompletedFn completed);
hgptiResult hgptiActivityFlushAll(void);
/* A NULL callback unsubscribes. */
hgptiResult hgptiSubscribe(hgptiApiCallbackFn callback, void *userdata);
hgptiResult hgptiGetTimestamp(uint64_t *timestamp);

#ifdef __cplusplus
}
#endif
#endif
