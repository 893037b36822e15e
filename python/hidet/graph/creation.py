"""Functions that create concrete tensors: empty, zeros, ones, full, randn, randint, arange, asarray
and their ``*_like`` forms.

Values are produced on the host with numpy and copied to the device once. Random numbers come from
a numpy Generator: ``hidet.manual_seed(n)`` makes them reproducible.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from hidet.graph.tensor import Tensor, _cast_host, _empty, _from_host_values, _normalize_shape, from_torch
from hidet.ir.dtypes import DataType, bfloat16, boolean, data_type, float32, int64
from hidet.runtime.device import device as _device


class _RandomState:
    """Holds the generator behind hidet.randn / hidet.randint."""

    generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed the generator of ``randn`` and ``randint``."""
    _RandomState.generator = np.random.default_rng(seed)


def _make(values: np.ndarray, dtype: DataType, device) -> Tensor:
    """A tensor from host values of any numpy type, cast to ``dtype``."""
    return _from_host_values(_cast_host(values, data_type(values.dtype), dtype), dtype, _device(device))


def _infer_dtype(value) -> DataType:
    """torch's default dtype for a Python scalar."""
    if isinstance(value, (bool, np.bool_)):
        return boolean
    if isinstance(value, (int, np.integer)):
        return int64
    return float32


def empty(shape, dtype='float32', device='cpu') -> Tensor:
    """A tensor whose values are whatever its memory held (fast, not initialized)."""
    return _empty(shape, data_type(dtype), _device(device))


def full(shape, fill_value, dtype=None, device='cpu') -> Tensor:
    dtype = _infer_dtype(fill_value) if dtype is None else data_type(dtype)
    host = np.float32 if dtype == bfloat16 else dtype.np_dtype
    return _make(np.full(_normalize_shape(shape), fill_value, dtype=host), dtype, device)


def zeros(shape, dtype='float32', device='cpu') -> Tensor:
    return full(shape, 0, dtype, device)


def ones(shape, dtype='float32', device='cpu') -> Tensor:
    return full(shape, 1, dtype, device)


def randn(shape, dtype='float32', mean: float = 0.0, stddev: float = 1.0, device='cpu') -> Tensor:
    """Normally distributed values (a floating-point dtype)."""
    dtype = data_type(dtype)
    if not dtype.is_float():
        raise ValueError(f'randn needs a floating-point dtype, got {dtype}; use randint for integers')
    values = _RandomState.generator.normal(mean, stddev, size=_normalize_shape(shape))
    return _make(values, dtype, device)


def randint(low: int, high: Optional[int] = None, shape=(), dtype='int32', device='cpu') -> Tensor:
    """Integers drawn uniformly from [low, high) (``randint(high, shape=...)`` draws from [0, high))."""
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f'randint needs low < high, got low={low}, high={high}')
    values = _RandomState.generator.integers(low, high, size=_normalize_shape(shape))
    return _make(values, data_type(dtype), device)


def arange(start, stop=None, step=1, dtype=None, device='cpu') -> Tensor:
    """Evenly spaced values in [start, stop); integer arguments give int64, others float32 (as torch)."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError('arange: step must not be zero')
    if dtype is None:
        dtype = int64 if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)) else float32
    return _make(np.arange(start, stop, step), data_type(dtype), device)


def asarray(obj, dtype=None, device=None) -> Tensor:
    """A tensor from a Python scalar or (nested) list, a numpy array, a torch tensor or a hidet tensor.
    The result has its own memory unless ``obj`` is already a tensor with that dtype and device."""
    if isinstance(obj, Tensor):
        return obj.to(dtype=dtype, device=device)
    if type(obj).__module__.startswith('torch'):
        return from_torch(obj).to(dtype=dtype, device=device)
    array = np.asarray(obj)
    if array.dtype == np.float64 and not isinstance(obj, np.ndarray) and dtype is None:
        array = array.astype(np.float32)  # Python floats default to float32, as in torch
    target = data_type(array.dtype) if dtype is None else data_type(dtype)
    return _make(array, target, 'cpu' if device is None else device)


def _like(t: Tensor, dtype, device):
    return (t.shape, t.dtype if dtype is None else data_type(dtype), t.device if device is None else _device(device))


def empty_like(t: Tensor, dtype=None, device=None) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return empty(shape, dtype, device)


def zeros_like(t: Tensor, dtype=None, device=None) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return zeros(shape, dtype, device)


def ones_like(t: Tensor, dtype=None, device=None) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return ones(shape, dtype, device)


def full_like(t: Tensor, fill_value, dtype=None, device=None) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return full(shape, fill_value, dtype, device)


def randn_like(t: Tensor, dtype=None, device=None, mean: float = 0.0, stddev: float = 1.0) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return randn(shape, dtype, mean, stddev, device)


def randint_like(t: Tensor, low: int, high: Optional[int] = None, dtype=None, device=None) -> Tensor:
    shape, dtype, device = _like(t, dtype, device)
    return randint(low, high, shape, dtype, device)


__all__ = [
    'manual_seed', 'empty', 'full', 'zeros', 'ones', 'randn', 'randint', 'arange', 'asarray', 'empty_like',
    'zeros_like', 'ones_like', 'full_like', 'randn_like', 'randint_like',
]
