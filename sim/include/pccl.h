/*
 * pccl.h - the simulated PCCL collective library (libpccl.so), mirroring NCCL
 * with the `pccl` prefix. Ranks are real processes (or threads) on one machine.
 *
 * How it works (details in sim/src/pccl.c):
 *   - pcclGetUniqueId makes a random 48-bit communicator id and the name of a
 *     POSIX shared-memory segment; the first rank to reach pcclCommInitRank
 *     creates the segment, the last one to join unlinks its name.
 *   - Every collective and every send/recv runs as a kernel launched with
 *     hggcLaunchKernel on the given stream (pcclKernel_AllReduce,
 *     pcclKernel_AllGather, pcclKernel_Broadcast, pcclKernel_ReduceScatter,
 *     pcclKernel_SendRecv), so it is asynchronous and completes in stream order.
 *   - Between pcclGroupStart and pcclGroupEnd, calls are only recorded; at the
 *     outermost pcclGroupEnd the collectives are launched in call order, then
 *     the sends and receives of each (communicator, stream) pair as ONE
 *     pcclKernel_SendRecv that progresses them all at once (so rings work).
 *   - Timeouts: any wait that sees no progress from its peers for
 *     PCCL_TIMEOUT_MS milliseconds (environment, read at pcclCommInitRank,
 *     default 10000) fails. The kernel then marks the communicator failed for
 *     every rank (the others fail at once instead of waiting their own
 *     timeout) and records pcclRemoteError as the communicator's asynchronous
 *     error: pcclCommGetAsyncError reports it after the stream is synchronized,
 *     and later calls on the communicator return it without launching. Buffers
 *     of a failed operation hold unspecified data. pcclCommAbort also marks the
 *     communicator failed, so peers blocked in it fail promptly.
 *   - pcclFloat16 and pcclBfloat16 are stored as uint16; reductions on them are
 *     computed in float and rounded once (to nearest even).
 *   - One communicator must not run operations on two streams at once (as in
 *     NCCL, every rank must issue the same collectives in the same order; a
 *     mismatch that is detected fails with pcclInvalidUsage).
 */
#ifndef PCCL_H
#define PCCL_H

#include <stddef.h>

#include "hggc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PCCL_UNIQUE_ID_BYTES 128
#define PCCL_MAX_RANKS 64
#define PCCL_DEFAULT_TIMEOUT_MS 10000

typedef struct {
    char internal[PCCL_UNIQUE_ID_BYTES];
} pcclUniqueId;

typedef struct pcclComm *pcclComm_t;

typedef enum pcclResult_t {
    pcclSuccess = 0,
    pcclUnhandledCudaError = 1, /* a launch on the HGGC runtime failed */
    pcclSystemError = 2,
    pcclInternalError = 3,
    pcclInvalidArgument = 4,
    pcclInvalidUsage = 5,
    pcclRemoteError = 6,
    pcclInProgress = 7,
    pcclNumResults = 8,
} pcclResult_t;

typedef enum pcclDataType_t {
    pcclInt8 = 0,
    pcclChar = 0,
    pcclUint8 = 1,
    pcclInt32 = 2,
    pcclInt = 2,
    pcclUint32 = 3,
    pcclInt64 = 4,
    pcclUint64 = 5,
    pcclFloat16 = 6,
    pcclHalf = 6,
    pcclFloat32 = 7,
    pcclFloat = 7,
    pcclFloat64 = 8,
    pcclDouble = 8,
    pcclBfloat16 = 9,
    pcclNumTypes = 10,
} pcclDataType_t;

typedef enum pcclRedOp_t {
    pcclSum = 0,
    pcclProd = 1,
    pcclMax = 2,
    pcclMin = 3,
    pcclAvg = 4, /* integer types: the sum (in 64 bits) divided, truncating */
    pcclNumOps = 5,
} pcclRedOp_t;

pcclResult_t pcclGetUniqueId(pcclUniqueId *uniqueId);
/* Collective: blocks until all nranks ranks have joined (or the timeout). */
pcclResult_t pcclCommInitRank(pcclComm_t *comm, int nranks, pcclUniqueId commId, int rank);
/* Waits for the communicator's queued operations, then frees it. */
pcclResult_t pcclCommDestroy(pcclComm_t comm);
/* Marks the communicator failed for every rank, waits for this rank's queued
 * operations (which then fail fast), then frees it. */
pcclResult_t pcclCommAbort(pcclComm_t comm);
pcclResult_t pcclCommCount(const pcclComm_t comm, int *count);
pcclResult_t pcclCommUserRank(const pcclComm_t comm, int *rank);
/* The first error an operation of this communicator met (pcclSuccess if none). */
pcclResult_t pcclCommGetAsyncError(pcclComm_t comm, pcclResult_t *asyncError);

pcclResult_t pcclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           pcclDataType_t datatype, pcclRedOp_t op, pcclComm_t comm,
                           hggcStream_t stream);
/* recvbuff holds nranks * sendcount elements, rank r's at r * sendcount. */
pcclResult_t pcclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           pcclDataType_t datatype, pcclComm_t comm, hggcStream_t stream);
pcclResult_t pcclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           pcclDataType_t datatype, int root, pcclComm_t comm,
                           hggcStream_t stream);
/* sendbuff holds nranks * recvcount elements; rank r gets block r reduced. */
pcclResult_t pcclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               pcclDataType_t datatype, pcclRedOp_t op, pcclComm_t comm,
                               hggcStream_t stream);
pcclResult_t pcclSend(const void *sendbuff, size_t count, pcclDataType_t datatype, int peer,
                      pcclComm_t comm, hggcStream_t stream);
pcclResult_t pcclRecv(void *recvbuff, size_t count, pcclDataType_t datatype, int peer,
                      pcclComm_t comm, hggcStream_t stream);
pcclResult_t pcclGroupStart(void);
pcclResult_t pcclGroupEnd(void);
const char *pcclGetErrorString(pcclResult_t result);

#ifdef __cplusplus
}
#endif
#endif
