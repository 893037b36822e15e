"""hidet quick start: tensors on a device, shared with PyTorch without copies.

    python examples/quickstart.py            # CUDA when a GPU is present, else CPU
"""
import torch

import hidet

device = 'cuda' if hidet.cuda.available() else 'cpu'

a = hidet.randn([2, 3], device=device)
print(a)

# hidet -> torch and back share memory: no copies.
t = a.torch()
b = hidet.from_torch(t)
assert t.data_ptr() == a.data_ptr() == b.data_ptr()

# casts and moves
print(a.to('float16').cpu())
torch.testing.assert_close(b.torch(), t)
print(f'round trip through torch on {device}: ok, data pointer 0x{a.data_ptr():x} shared')
