"""Built kernel libraries: a shared object following the uniform kernel ABI
(cpp/include/hidet/kernel_abi.h), its kernels callable from Python."""
from __future__ import annotations

import json
import os
from typing import Optional, Sequence

from hidet import _C
from hidet.runtime.cuda import current_stream


def _buffer_address(arg) -> int:
    if type(arg).__module__.startswith('torch'):  # torch.Tensor
        if not arg.is_contiguous():
            raise ValueError('kernels take contiguous tensors; call .contiguous() first')
        return arg.data_ptr()
    if hasattr(arg, 'is_symbolic') and hasattr(arg, 'data_ptr'):  # hidet.Tensor (runtime does not import graph)
        if arg.is_symbolic():
            raise TypeError('a symbolic tensor has no data to pass to a kernel')
        return arg.data_ptr()
    if isinstance(arg, int):  # a raw address
        return arg
    raise TypeError(f'cannot pass {type(arg).__name__} to a kernel: expected a hidet or torch tensor or an address')


def _default_stream(args) -> int:
    for arg in args:
        if type(arg).__module__.startswith('torch') and arg.is_cuda:
            import torch

            return torch.cuda.current_stream(arg.device).cuda_stream
    for arg in args:
        if hasattr(arg, 'device') and str(getattr(arg, 'device')).startswith('cuda'):
            return current_stream().handle
    return 0


class CompiledFunction:
    """One kernel of a CompiledModule."""

    def __init__(self, kernel: _C.Kernel):
        self._kernel = kernel

    @property
    def name(self) -> str:
        return self._kernel.name

    @property
    def signature(self) -> dict:
        """What the kernel declares (hidet/kernel_abi.h): ``{'buffers': [{'dtype', 'shape'}, ...], 'dims': [...]}``."""
        return json.loads(self._kernel.signature)

    def __call__(self, *buffers, dims: Sequence[int] = (), stream: Optional[int] = None) -> None:
        """Launch with ``buffers`` (hidet or torch tensors, inputs then outputs), the values of the kernel's
        symbolic dimensions, on ``stream`` (default: torch's current stream for torch CUDA tensors, else
        hidet's current stream)."""
        addrs = [_buffer_address(b) for b in buffers]
        handle = _default_stream(buffers) if stream is None else int(getattr(stream, 'handle', stream))
        self._kernel.launch(addrs, [int(d) for d in dims], handle)

    def time(self, *buffers, dims: Sequence[int] = (), device: int = 0, calls: int = 20, repeat: int = 5) -> float:
        """Median milliseconds per launch of this CUDA kernel on the GPU alone: ``calls`` launches captured in a
        CUDA graph on ``device``, replayed ``repeat`` times (the runtime's hidet_kernel_time), so the host's launch
        cost, larger than a small kernel's own time, is not what is measured."""
        addrs = [_buffer_address(b) for b in buffers]
        return self._kernel.time(addrs, [int(d) for d in dims], device, calls, repeat)


class CompiledModule:
    """A loaded kernel library. ``module['name']`` is its kernel ``name``."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        self._library = _C.KernelLibrary.load(self.path)

    def __contains__(self, name: str) -> bool:
        return self._library.has_kernel(name)

    def __getitem__(self, name: str) -> CompiledFunction:
        return CompiledFunction(self._library.get_kernel(name))

    def __repr__(self) -> str:
        return f'CompiledModule({self.path!r})'


def load_compiled_module(path: str) -> CompiledModule:
    return CompiledModule(path)
