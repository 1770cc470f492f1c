/* NCCL as an application calls it, without a GPU: every collective on a null
 * communicator fails with ncclInvalidArgument, and its bytes (count times the
 * element size) are still what the application asked for. */
#include "tally.h"
typedef int ncclResult_t;
typedef void *ncclComm_t;
typedef void *cudaStream_t;
typedef struct { char internal[128]; } ncclUniqueId;
enum { i8 = 0, u8 = 1, i32 = 2, u32 = 3, i64 = 4, u64 = 5, f16 = 6, f32 = 7, f64 = 8,
       bf16 = 9, fp8e4m3 = 10, fp8e5m2 = 11 };
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclReduce(const void *, void *, size_t, int, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclBcast(void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclBroadcast(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclReduceScatter(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclAllGather(const void *, void *, size_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclAlltoAll(const void *, void *, size_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclGather(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclScatter(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclSend(const void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclRecv(void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

static char buf[1 << 16];

int main(void) {
    int v = 0;
    ncclComm_t none = 0;
    cudaStream_t s = (cudaStream_t)0x5;
    ncclUniqueId id;
    CALL_INT("ncclGetVersion", ncclGetVersion(&v));
    CALL_INT("ncclGetUniqueId", ncclGetUniqueId(&id));
    int results[] = {0, 1, 4};
    for (int i = 0; i < 3; i++)
        CALL_PTR("ncclGetErrorString", ncclGetErrorString(results[i]));
    CALL_PTR("ncclGetLastError", ncclGetLastError(none));
    /* Element sizes as the program's own C types give them. */
    CALL_BYTES("ncclAllReduce", ncclAllReduce(buf, buf, 1000, f32, 0, none, s),
               1000 * sizeof(float));
    CALL_BYTES("ncclReduce", ncclReduce(buf, buf, 300, bf16, 0, 0, none, s),
               300 * sizeof(uint16_t));
    CALL_BYTES("ncclBcast", ncclBcast(buf, 77, fp8e4m3, 0, none, s), 77 * sizeof(uint8_t));
    CALL_BYTES("ncclBroadcast", ncclBroadcast(buf, buf, 5, f64, 0, none, s), 5 * sizeof(double));
    CALL_BYTES("ncclReduceScatter", ncclReduceScatter(buf, buf, 128, f16, 0, none, s),
               128 * sizeof(uint16_t));
    CALL_BYTES("ncclAllGather", ncclAllGather(buf, buf, 64, i64, none, s), 64 * sizeof(int64_t));
    CALL_BYTES("ncclAlltoAll", ncclAlltoAll(buf, buf, 10, u8, none, s), 10 * sizeof(uint8_t));
    CALL_BYTES("ncclGather", ncclGather(buf, buf, 11, i32, 0, none, s), 11 * sizeof(int32_t));
    CALL_BYTES("ncclScatter", ncclScatter(buf, buf, 12, fp8e5m2, 0, none, s), 12 * sizeof(uint8_t));
    CALL_INT("ncclGroupStart", ncclGroupStart());
    CALL_BYTES("ncclSend", ncclSend(buf, 13, u32, 1, none, s), 13 * sizeof(uint32_t));
    CALL_BYTES("ncclRecv", ncclRecv(buf, 14, u64, 1, none, s), 14 * sizeof(uint64_t));
    CALL_INT("ncclGroupEnd", ncclGroupEnd());
    CALL_BYTES("ncclAllReduce", ncclAllReduce(buf, buf, 3, i8, 0, none, s), 3 * sizeof(int8_t));
    return 0;
}
