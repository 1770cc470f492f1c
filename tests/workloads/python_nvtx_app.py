# Calls libcudart (argv[1]) through ctypes inside nvtx package ranges, printing each call, range and sleep.
import ctypes, sys, time
import nvtx
cudart = ctypes.CDLL(sys.argv[1])
v = ctypes.c_int()
for _ in range(3):
    with nvtx.annotate("py-step"):
        print("range py-step")
        r = cudart.cudaGetDeviceCount(ctypes.byref(v))
        print(f"call cudaGetDeviceCount int {r}")
        time.sleep(0.002)
        print("sleep")
sys.stdout.flush()
