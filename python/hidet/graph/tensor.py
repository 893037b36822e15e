"""hidet.Tensor: a contiguous, row-major tensor on a device.

A concrete tensor owns (a share of) a runtime ``Storage``: memory from the device's caching pool,
or memory borrowed zero-copy from another framework through DLPack. A symbolic tensor (later:
``hidet.symbol``) has no storage and records in ``trace`` the operator that produces it.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from hidet import _C
from hidet.ir.dtypes import DataType, bf16_to_f32, bfloat16, data_type, f32_to_bf16, from_dlpack_code
from hidet.runtime.device import Device, device as _device


def _normalize_shape(shape) -> Tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    dims = tuple(int(s) for s in shape)
    if any(s < 0 for s in dims):
        raise ValueError(f'a tensor shape cannot have negative dimensions, got {dims}')
    return dims


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class Tensor:
    """A tensor with a shape, a dtype and a device. Build one with the creation functions
    (``hidet.randn``, ``hidet.asarray``, ``hidet.from_torch`` …) rather than this constructor."""

    def __init__(self, shape, dtype, device, storage: Optional[_C.Storage], trace: Optional[Tuple[Any, int]] = None):
        self.shape: Tuple[int, ...] = _normalize_shape(shape)
        self.dtype: DataType = data_type(dtype)
        self.device: Device = _device(device)
        self.storage: Optional[_C.Storage] = storage
        self.trace = trace  # (operator, output index) for symbolic tensors

    # ------------------------------------------------------------------ properties
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return _numel(self.shape)

    @property
    def size(self) -> int:
        return self.numel()

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.nbytes

    def is_symbolic(self) -> bool:
        return self.storage is None

    def data_ptr(self) -> int:
        """Address of the first element (as ``torch.Tensor.data_ptr``)."""
        return self._require_storage('data_ptr').addr

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError('len() of a 0-d tensor')
        return self.shape[0]

    def _require_storage(self, what: str) -> _C.Storage:
        if self.storage is None:
            raise ValueError(f'{what}: this tensor is symbolic (it has no data); run the graph to get values')
        return self.storage

    # ------------------------------------------------------------------ printing
    def signature(self) -> str:
        return f"Tensor(shape={self.shape}, dtype='{self.dtype.name}', device='{self.device}')"

    def __repr__(self) -> str:
        if self.storage is None:
            return self.signature() + '\n<symbolic>'
        values = _host_values(self)
        if self.dtype == bfloat16:
            values = bf16_to_f32(values)
        return self.signature() + '\n' + np.array2string(values, separator=', ')

    __str__ = __repr__

    # ------------------------------------------------------------------ host / device transfer
    def numpy(self) -> np.ndarray:
        """The values as a new numpy array (copied to the host for a CUDA tensor)."""
        if self.dtype == bfloat16:
            raise TypeError("numpy has no bfloat16; use tensor.to('float32').numpy()")
        return _host_values(self)

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def to(self, dtype=None, device=None) -> 'Tensor':
        """This tensor with another dtype and/or on another device (itself when nothing changes).
        ``t.to('cuda')`` and ``t.to('float16')`` are understood as in torch."""
        if dtype is not None and device is None and not _is_dtype_spec(dtype):
            dtype, device = None, dtype
        target_dtype = self.dtype if dtype is None else data_type(dtype)
        target_device = self.device if device is None else _device(device)
        if target_dtype == self.dtype and target_device == self.device:
            return self
        if target_dtype == self.dtype:
            return _copy_to_device(self, target_device)
        # Casts run on the host for now; the operator library (hidet.ops.cast) takes over later.
        return _from_host_values(_cast_host(_host_values(self), self.dtype, target_dtype), target_dtype, target_device)

    def cpu(self) -> 'Tensor':
        return self.to(device='cpu')

    def cuda(self, device=None) -> 'Tensor':
        return self.to(device='cuda' if device is None else (f'cuda:{device}' if isinstance(device, int) else device))

    def copy(self) -> 'Tensor':
        """A new tensor with the same values in its own memory."""
        return _copy_to_device(self, self.device)

    # ------------------------------------------------------------------ operators (hidet.ops)
    def __add__(self, other): return _ops().add(self, other)
    def __radd__(self, other): return _ops().add(other, self)
    def __sub__(self, other): return _ops().subtract(self, other)
    def __rsub__(self, other): return _ops().subtract(other, self)
    def __mul__(self, other): return _ops().multiply(self, other)
    def __rmul__(self, other): return _ops().multiply(other, self)
    def __truediv__(self, other): return _ops().divide(self, other)
    def __rtruediv__(self, other): return _ops().divide(other, self)
    def __pow__(self, other): return _ops().pow(self, other)
    def __neg__(self): return _ops().neg(self)
    def __abs__(self): return _ops().abs(self)
    def __matmul__(self, other): return _ops().matmul(self, other)
    def __lt__(self, other): return _ops().less(self, other)
    def __le__(self, other): return _ops().less_equal(self, other)
    def __gt__(self, other): return _ops().greater(self, other)
    def __ge__(self, other): return _ops().greater_equal(self, other)
    def __eq__(self, other): return _ops().equal(self, other)  # elementwise, as in torch
    def __ne__(self, other): return _ops().not_equal(self, other)
    __hash__ = object.__hash__

    def sum(self, dims=None, keepdim=False): return _ops().sum(self, dims, keepdim)
    def mean(self, dims=None, keepdim=False): return _ops().mean(self, dims, keepdim)
    def max(self, dims=None, keepdim=False): return _ops().max(self, dims, keepdim)
    def min(self, dims=None, keepdim=False): return _ops().min(self, dims, keepdim)

    # ------------------------------------------------------------------ interop
    def torch(self):
        """A ``torch.Tensor`` sharing this tensor's memory (no copy)."""
        import torch

        self._require_storage('torch')
        return torch.from_dlpack(self)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self.device.dl_kind, self.device.id

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export as a DLPack capsule sharing this tensor's memory (versioned when the consumer takes
        DLPack >= 1.0). Hidet finishes its copies before returning them, so the data is ready on any
        stream the consumer names."""
        storage = self._require_storage('__dlpack__')
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f'__dlpack__: the tensor is on {self.device}, not on DLPack device {tuple(dl_device)}')
        if copy:
            storage = self.copy().storage
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return _C.to_dlpack(storage, list(self.shape), self.dtype.dl_code, self.dtype.bits, versioned)


def _ops():
    import hidet.graph.ops  # the operator library imports this module

    return hidet.graph.ops


def _is_dtype_spec(obj) -> bool:
    try:
        data_type(obj)
        return True
    except (ValueError, TypeError):
        return False


def _empty(shape, dtype: DataType, device: Device) -> Tensor:
    shape = _normalize_shape(shape)
    storage = _C.Storage.allocate(device.dl_kind, device.id, _numel(shape) * dtype.nbytes)
    return Tensor(shape, dtype, device, storage)


def _copy_bytes(dst: Tensor, src_addr: int, src_device: Device, nbytes: int) -> None:
    """Copy into ``dst`` and wait for the copy, so the bytes are in place when this returns."""
    if nbytes == 0:
        return
    _C.memcpy(dst.storage.addr, src_addr, nbytes)
    for d in (dst.device, src_device):
        if d.is_cuda():
            _C.cuda_device_synchronize(d.id)


def _copy_to_device(t: Tensor, target: Device) -> Tensor:
    src = t._require_storage('copy')
    out = _empty(t.shape, t.dtype, target)
    _copy_bytes(out, src.addr, t.device, t.nbytes)
    return out


def _host_values(t: Tensor) -> np.ndarray:
    """The values as a numpy array in the dtype's host storage type (bfloat16 as uint16 bit patterns)."""
    src = t._require_storage('read values')
    out = np.empty(t.shape, dtype=t.dtype.storage_np_dtype)
    if out.nbytes:
        _C.memcpy(out.ctypes.data, src.addr, out.nbytes)
        if t.device.is_cuda():
            _C.cuda_device_synchronize(t.device.id)
    return out


def _from_host_values(values: np.ndarray, dtype: DataType, device: Device) -> Tensor:
    """A new tensor on ``device`` holding ``values`` (already in ``dtype``'s host storage type)."""
    values = np.asarray(values, dtype=dtype.storage_np_dtype, order='C')  # (ascontiguousarray makes 0-d 1-d)
    out = _empty(values.shape, dtype, device)
    _copy_bytes(out, values.ctypes.data, Device('cpu'), values.nbytes)
    return out


def _cast_host(values: np.ndarray, src: DataType, dst: DataType) -> np.ndarray:
    """Cast host values between dtypes with torch's rules (float→int truncates; nonzero→True)."""
    if src == bfloat16:
        values = bf16_to_f32(values)
    if dst == bfloat16:
        return f32_to_bf16(values.astype(np.float32))
    with np.errstate(invalid='ignore', over='ignore'):
        return values.astype(dst.np_dtype)


def from_numpy(array: np.ndarray, device='cpu') -> Tensor:
    """A new tensor with a copy of ``array``'s values."""
    array = np.asarray(array)
    return _from_host_values(array, data_type(array.dtype), _device(device))


def from_dlpack(obj) -> Tensor:
    """A tensor sharing the memory of ``obj`` (anything with ``__dlpack__``, or a DLPack capsule): no copy.
    The producer's memory stays alive as long as the hidet tensor does."""
    capsule = obj.__dlpack__() if hasattr(obj, '__dlpack__') else obj
    storage, shape, code, bits = _C.from_dlpack(capsule)
    dev = Device('cpu') if storage.device_kind == 1 else Device('cuda', storage.device_index)
    return Tensor(shape, from_dlpack_code(code, bits), dev, storage)


def from_torch(torch_tensor) -> Tensor:
    """A hidet tensor sharing a torch tensor's memory (no copy). A non-contiguous tensor is made
    contiguous first, which copies; gradients are not tracked."""
    import torch

    if not isinstance(torch_tensor, torch.Tensor):
        raise TypeError(f'from_torch expects a torch.Tensor, got {type(torch_tensor).__name__}')
    t = torch_tensor.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    return from_dlpack(torch.utils.dlpack.to_dlpack(t))
