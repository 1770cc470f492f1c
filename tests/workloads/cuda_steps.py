# libcudart from PyPI through ctypes, three nvtx 'step' ranges in domain 'train' with calls inside.
import ctypes, os, sys, nvtx
site = [p for p in sys.path if p.endswith("site-packages")][0]
cudart = ctypes.CDLL(os.path.join(site, "nvidia/cuda_runtime/lib/libcudart.so.12"))
n = ctypes.c_int(-1)
for step in range(3):
    with nvtx.annotate("step", domain="train"):
        with nvtx.annotate("forward"):
            cudart.cudaGetDeviceCount(ctypes.byref(n))
            p = ctypes.c_void_p()
            cudart.cudaMalloc(ctypes.byref(p), 1 << 20)
            buf = ctypes.create_string_buffer(4096)
            cudart.cudaMemcpy(p, buf, 4096, 1)
        cudart.cudaGetLastError()
print("device-count", n.value)
