"""hidet.Tensor: a contiguous, row-major tensor on a device.

A concrete tensor owns (a share of) a runtime ``Storage``: memory from the device's caching pool,
or memory borrowed zero-copy from another framework through DLPack. A symbolic tensor (later:
``hidet.symbol``) has no storage and records in ``trace`` the operator that produces it.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from hidet import _C
from hidet.ir.compute import dim
from hidet.ir.dtypes import DataType, bf16_to_f32, bfloat16, data_type, f32_to_bf16, from_dlpack_code
from hidet.ir.expr import Expr, SymbolVar, evaluate_dim, symbol_var
from hidet.runtime.device import Device, device as _device


def _dim(s):
    """A dimension: an int, or a symbolic one (a name, as 'batch', or an integer expression of names)."""
    return symbol_var(s) if isinstance(s, str) else dim(s)


def _normalize_shape(shape) -> Tuple[int, ...]:
    if isinstance(shape, (int, np.integer, str)):
        shape = (shape,)
    dims = tuple(_dim(s) for s in shape)
    if any(isinstance(s, int) and s < 0 for s in dims):
        raise ValueError(f'a tensor shape cannot have negative dimensions, got {dims}')
    return dims


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n = s if isinstance(n, int) and n == 1 else n * s
    return n


def bind_symbols(symbolic: Sequence['Tensor'], concrete: Sequence['Tensor']) -> dict:
    """{symbol name: size} read from concrete tensors of the symbolic ones' shapes; raises a ValueError
    naming the dimension where a size disagrees with the shape or with another input."""
    values = {}
    for i, (sym, val) in enumerate(zip(symbolic, concrete)):
        if len(sym.shape) != len(val.shape):
            raise ValueError(f'input {i}: expected {len(sym.shape)} dimensions {sym.shape}, got shape {val.shape}')
        for d, (s, v) in enumerate(zip(sym.shape, val.shape)):
            if isinstance(s, SymbolVar) and s.name not in values:
                values[s.name] = v
    for i, (sym, val) in enumerate(zip(symbolic, concrete)):
        for d, (s, v) in enumerate(zip(sym.shape, val.shape)):
            expected = evaluate_dim(s, values)
            if expected != v:
                bound = '' if isinstance(s, int) else f' ({s!r} with {values})'
                raise ValueError(f'input {i}: expected {sym.signature()}, got {val.signature()}: dimension {d} is '
                                 f'{v}, expected {expected}{bound}')
    return values


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
    def __rpow__(self, other): return _ops().pow(other, self)
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

    # ------------------------------------------------------------------ shape (ops/reshape.py, transform.py)
    def reshape(self, *shape) -> 'Tensor':
        """``t.reshape(2, -1)`` or ``t.reshape([2, -1])``, as torch."""
        return _ops().reshape(self, _shape_args(shape))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> 'Tensor':
        return _ops().flatten(self, start_dim, end_dim)

    def squeeze(self, dims=None) -> 'Tensor':
        return _ops().squeeze(self, dims)

    def unsqueeze(self, dims) -> 'Tensor':
        return _ops().unsqueeze(self, dims)

    def transpose(self, dim0: int, dim1: int) -> 'Tensor':
        return _ops().transpose(self, dim0, dim1)

    def permute(self, *dims) -> 'Tensor':
        """``t.permute(2, 0, 1)`` or ``t.permute([2, 0, 1])``, as torch."""
        return _ops().permute(self, _shape_args(dims))

    def expand(self, *sizes) -> 'Tensor':
        """``t.expand(4, -1, 3)`` or ``t.expand([4, -1, 3])``, as torch (-1 keeps a dimension)."""
        return _ops().broadcast(self, _shape_args(sizes))

    def __getitem__(self, key) -> 'Tensor':
        """Indexing as torch: ints (negative too), slices with steps, ``None``, ``...`` and one integer
        tensor (or list of ints) indexing one dimension, or one boolean mask (a bool tensor or list of
        bools) covering as many dimensions as it has. Always a new tensor (a copy), never a view.

        A mask's result has a data-dependent shape: its positions are found on the host (the mask is
        copied there), so masks need concrete tensors."""
        return _getitem(self, key)

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


def _shape_args(args) -> list:
    """``(2, 3)`` or ``([2, 3],)`` (the two spellings torch takes for shapes) as ``[2, 3]``."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return list(args[0])
    return list(args)


def _getitem(t: Tensor, key) -> Tensor:
    """``t[key]`` with torch's rules: ints select (removing the dimension), slices keep it, None adds one,
    ``...`` stands for the dimensions not named; one integer tensor indexes one dimension, its shape
    taking that dimension's place. Built from strided_slice, take and reshape."""
    import sys

    ops = _ops()
    entries = list(key) if isinstance(key, tuple) else [key]
    # (a circle at import time: hidet.graph.creation imports this module)
    from hidet.graph.creation import asarray

    for i, k in enumerate(entries):
        if isinstance(k, (list, tuple)):  # a list of ints indexes like an int64 tensor, of bools like a mask
            bools = [isinstance(v, (bool, np.bool_)) for v in k]
            if any(bools) and not all(bools):
                raise IndexError('an index list must hold only ints or only bools')
            entries[i] = k = asarray(list(k), dtype='bool' if bools and all(bools) else 'int64', device=t.device)
        elif isinstance(k, (bool, np.bool_)):  # as a 0-d mask: a new dimension of size 1 (True) or 0 (False)
            entries[i] = k = asarray(bool(k), dtype='bool', device=t.device)
        if isinstance(k, Tensor):
            if not k.dtype.is_integer() and not k.dtype.is_boolean():
                raise IndexError(f'tensors used as indices must have an integer dtype (or bool: a mask), '
                                 f'got {k.dtype.name}')
        elif not (k is None or k is Ellipsis or isinstance(k, slice) or hasattr(k, '__index__')):
            raise TypeError(f'index {k!r} of type {type(k).__name__} is not supported: use ints, slices, None, '
                            '... or an integer tensor')
    if sum(isinstance(k, Tensor) for k in entries) > 1:
        raise NotImplementedError('indexing with more than one tensor (advanced indexing) is not supported')
    if sum(k is Ellipsis for k in entries) > 1:
        raise IndexError('an index can only have a single ellipsis (...)')
    if any(isinstance(k, Tensor) and k.dtype.is_boolean() for k in entries):
        return _getitem_mask(t, entries)
    consumed = sum(1 for k in entries if k is not None and k is not Ellipsis)
    if consumed > t.ndim:
        raise IndexError(f'too many indices for a tensor of {t.ndim} dimensions ({t.shape}): {consumed} given')
    fill = [slice(None)] * (t.ndim - consumed)
    if Ellipsis in [k for k in entries if not isinstance(k, Tensor)]:
        pos = next(i for i, k in enumerate(entries) if k is Ellipsis)
        entries = entries[:pos] + fill + entries[pos + 1:]
    else:
        entries = entries + fill

    starts, ends, axes, steps = [], [], [], []
    tensor_index = None  # (axis, index tensor)
    d = 0
    for k in entries:
        if k is None:
            continue
        n = t.shape[d]
        if isinstance(k, Tensor):
            tensor_index = (d, k)
        elif isinstance(k, slice) and any(isinstance(v, Expr) for v in (k.start, k.stop, n)):  # symbolic sizes
            if k.step not in (None, 1):
                raise NotImplementedError(f'slicing dimension {d} of size {n!r} with step {k.step}: symbolic '
                                          'slices take step 1')
            if k.start not in (None, 0) or k.stop is not None:
                starts.append(0 if k.start is None else k.start), ends.append(n if k.stop is None else k.stop)
                axes.append(d), steps.append(1)
        elif isinstance(k, slice):
            step = 1 if k.step is None else k.step.__index__()
            if step == 0:
                raise ValueError('slice step cannot be zero')
            if len(range(*k.indices(n))) != n or step < 0 and n > 1:  # (a full slice needs no kernel)
                start = k.start if k.start is not None else (0 if step > 0 else sys.maxsize)
                stop = k.stop if k.stop is not None else (sys.maxsize if step > 0 else -sys.maxsize - 1)
                starts.append(start.__index__()), ends.append(stop.__index__()), axes.append(d), steps.append(step)
        elif isinstance(n, Expr) or isinstance(k, Expr):  # an index into a symbolic dimension (in range)
            i = n + k if isinstance(k, int) and k < 0 else k
            starts.append(i), ends.append(i + 1), axes.append(d), steps.append(1)
        else:
            i = k.__index__()
            if not -n <= i < n:
                raise IndexError(f'index {i} is out of range for dimension {d} of size {n} (shape {t.shape})')
            i = i % n
            starts.append(i), ends.append(i + 1), axes.append(d), steps.append(1)
        d += 1

    y = ops.strided_slice(t, starts, ends, axes, steps) if axes else t
    if tensor_index is not None:
        y = ops.take(y, tensor_index[1], tensor_index[0])
    shape, d = [], 0
    for k in entries:
        if k is None:
            shape.append(1)
            continue
        if isinstance(k, Tensor):
            shape.extend(y.shape[d:d + k.ndim])
            d += k.ndim
            continue
        if isinstance(k, slice):
            shape.append(y.shape[d])
        d += 1
    if tuple(shape) != y.shape or y is t:
        y = ops.reshape(y, shape)
    return y


def _getitem_mask(t: Tensor, entries: list) -> Tensor:
    """``t[entries]`` where one entry is a bool mask: the dimensions it covers are merged into one and
    indexed by the mask's positions (found on the host), as an integer tensor index."""
    # (a circle at import time: hidet.graph.creation imports this module)
    from hidet.graph.creation import asarray

    pos = next(i for i, k in enumerate(entries) if isinstance(k, Tensor))
    mask: Tensor = entries[pos]
    if t.is_symbolic() or mask.is_symbolic():
        raise NotImplementedError('indexing with a bool mask needs concrete tensors: the shape of the result '
                                  'depends on the values of the mask')

    def consumed(k) -> int:
        return k.ndim if isinstance(k, Tensor) else 0 if k is None or k is Ellipsis else 1

    total = sum(consumed(k) for k in entries)
    if total > t.ndim:
        raise IndexError(f'too many indices for a tensor of {t.ndim} dimensions ({t.shape}): {total} given')
    start = sum(consumed(k) for k in entries[:pos])
    if any(k is Ellipsis for k in entries[:pos]):
        start += t.ndim - total
    covered = t.shape[start:start + mask.ndim]
    if tuple(covered) != tuple(mask.shape):
        for d, (m, n) in enumerate(zip(mask.shape, covered)):
            if m != n:
                raise IndexError(f'the shape of the mask {list(mask.shape)} at index {d} does not match the shape '
                                 f'of the indexed tensor {list(t.shape)} at index {start + d}')
    merged = 1
    for n in covered:
        merged *= n
    positions = np.flatnonzero(mask.numpy()).astype(np.int64)
    flat = _ops().reshape(t, list(t.shape[:start]) + [merged] + list(t.shape[start + mask.ndim:]))
    entries = list(entries)
    entries[pos] = asarray(positions, dtype='int64', device=t.device)
    return _getitem(flat, tuple(entries))


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
    t._require_storage('read values')  # (before the array: a symbolic tensor's shape has no size)
    out = np.empty(t.shape, dtype=t.dtype.storage_np_dtype)
    _copy_stored_bytes(t, out.ctypes.data)
    return out


def _copy_stored_bytes(t: Tensor, address: int) -> None:
    """Copy the tensor's stored bytes (``t.nbytes`` of them, its dtype's host storage type) to host memory at
    ``address`` (a graph's weights go straight into the artifact's bytes this way, with no array between)."""
    src = t._require_storage('read values')
    if t.nbytes:
        _C.memcpy(address, src.addr, t.nbytes)
        if t.device.is_cuda():
            _C.cuda_device_synchronize(t.device.id)


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
