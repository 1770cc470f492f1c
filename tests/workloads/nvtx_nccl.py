# Calls NCCL (argv[1]) through ctypes inside its own nvtx ranges, printing each call and range.
import ctypes, sys, nvtx
nccl = ctypes.CDLL(sys.argv[1])
v = ctypes.c_int(0)
buf = ctypes.create_string_buffer(4096)
print("pushpop mine 0")
with nvtx.annotate("mine"):
    print("call ncclGetVersion int %d" % nccl.ncclGetVersion(ctypes.byref(v)))
    for i in range(3):
        print("pushpop allreduce 1")
        with nvtx.annotate("allreduce"):
            # float32 on a null communicator: ncclInvalidArgument.
            r = nccl.ncclAllReduce(buf, buf, ctypes.c_size_t(100 + i), 7, 0, None, None)
            print("call ncclAllReduce int %d %d" % (r, 4 * (100 + i)))
