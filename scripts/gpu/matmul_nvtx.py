"""A few matrix products inside NVTX ranges on an NVIDIA GPU with PyTorch.
Prints what it did as ground truth lines for check.sh:
  expect-range NAME LEVEL     (push/pop ranges, default domain)
  expect-matmuls N
"""
import torch

assert torch.cuda.is_available(), "this check needs a CUDA GPU"
dev = torch.device("cuda")
a = torch.randn(1024, 1024, device=dev)
b = torch.randn(1024, 1024, device=dev)
n = 0
print("expect-range step 0")
torch.cuda.nvtx.range_push("step")
for i in range(4):
    print("expect-range matmul 1")
    torch.cuda.nvtx.range_push("matmul")
    c = a @ b
    n += 1
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
print(f"expect-matmuls {n}")
print("checksum", float(c.sum().item()))
