"""Scalar data types.

A ``DataType`` names a scalar type once for every layer: its bit width, how numpy holds it on the
host, and its DLPack code for zero-copy exchange. ``bfloat16`` has no numpy type: on the host its
values travel as ``uint16`` bit patterns (see :func:`bf16_to_f32` / :func:`f32_to_bf16`).
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

# DLPack type codes (hidet/dlpack.h)
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6


class DataType:
    """A scalar type such as ``float32``; compares equal to its name (``hidet.float32 == 'float32'``)."""

    def __init__(self, name: str, short_name: str, nbytes: int, kind: str, dl_code: int, np_dtype: Optional[str]):
        self.name = name
        self.short_name = short_name
        self.nbytes = nbytes
        self.kind = kind  # 'float', 'int', 'uint' or 'bool'
        self.dl_code = dl_code
        self.np_dtype = np.dtype(np_dtype) if np_dtype else None
        # how numpy stores the values on the host (bfloat16: its raw 16-bit patterns)
        self.storage_np_dtype = self.np_dtype if self.np_dtype is not None else np.dtype('uint16')

    @property
    def bits(self) -> int:
        return self.nbytes * 8

    def is_float(self) -> bool:
        return self.kind == 'float'

    def is_integer(self) -> bool:
        return self.kind in ('int', 'uint')

    def is_boolean(self) -> bool:
        return self.kind == 'bool'

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        if isinstance(other, DataType):
            return self.name == other.name
        if isinstance(other, str):
            return other in (self.name, self.short_name)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)

    # Hidet Script annotations: ``f32[m, n]`` a tensor, ``~f32`` a pointer (hidet.ir.type)
    def __getitem__(self, shape):
        # (a circle at import time: hidet.ir.type imports this module)
        from hidet.ir.type import tensor_type

        return tensor_type(self, shape)

    def __invert__(self):
        # (a circle at import time: hidet.ir.type imports this module)
        from hidet.ir.type import PointerType

        return PointerType(self)


float16 = DataType('float16', 'f16', 2, 'float', _DL_FLOAT, 'float16')
float32 = DataType('float32', 'f32', 4, 'float', _DL_FLOAT, 'float32')
float64 = DataType('float64', 'f64', 8, 'float', _DL_FLOAT, 'float64')
bfloat16 = DataType('bfloat16', 'bf16', 2, 'float', _DL_BFLOAT, None)
int8 = DataType('int8', 'i8', 1, 'int', _DL_INT, 'int8')
int16 = DataType('int16', 'i16', 2, 'int', _DL_INT, 'int16')
int32 = DataType('int32', 'i32', 4, 'int', _DL_INT, 'int32')
int64 = DataType('int64', 'i64', 8, 'int', _DL_INT, 'int64')
uint8 = DataType('uint8', 'u8', 1, 'uint', _DL_UINT, 'uint8')
boolean = DataType('bool', 'bool', 1, 'bool', _DL_BOOL, 'bool')

f16, f32, f64, bf16 = float16, float32, float64, bfloat16
i8, i16, i32, i64, u8 = int8, int16, int32, int64, uint8

all_dtypes = (float16, float32, float64, bfloat16, int8, int16, int32, int64, uint8, boolean)
_by_name: Dict[str, DataType] = {}
for _t in all_dtypes:
    _by_name[_t.name] = _t
    _by_name[_t.short_name] = _t
_aliases = {'half': 'float16', 'float': 'float32', 'double': 'float64', 'int': 'int32', 'long': 'int64'}
_by_dlpack = {(t.dl_code, t.bits): t for t in all_dtypes}
_by_dlpack[(_DL_UINT, 1)] = boolean  # older producers send bool as a 1-bit unsigned integer


def data_type(obj) -> DataType:
    """The DataType named by ``obj``: a DataType, a name (``'float32'``, ``'f16'``, ``'bool'``), a numpy
    dtype or a ``torch.dtype``."""
    if isinstance(obj, DataType):
        return obj
    if isinstance(obj, str):
        name = _aliases.get(obj, obj)
        if name in _by_name:
            return _by_name[name]
        raise ValueError(f"unknown data type {obj!r}; hidet has: {', '.join(t.name for t in all_dtypes)}")
    if type(obj).__name__ == 'dtype' and type(obj).__module__ == 'torch':  # torch.dtype, without importing torch
        return data_type(str(obj).rsplit('.', 1)[-1])
    try:
        np_dtype = np.dtype(obj)
    except TypeError:
        raise TypeError(f"cannot interpret {obj!r} (of type {type(obj).__name__}) as a data type") from None
    for t in all_dtypes:
        if t.np_dtype == np_dtype:
            return t
    raise ValueError(f"numpy dtype {np_dtype} has no hidet counterpart")


def from_dlpack_code(code: int, bits: int) -> DataType:
    if (code, bits) not in _by_dlpack:
        raise ValueError(f"DLPack dtype (code={code}, bits={bits}) is not supported by hidet")
    return _by_dlpack[(code, bits)]


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values → bfloat16 bit patterns (uint16), rounding to nearest even; NaN stays NaN."""
    f32 = np.asarray(values, dtype=np.float32, order='C')
    bits = f32.view(np.uint32)
    rounded = ((bits + (((bits >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f32), np.uint16(0x7FC0), rounded)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) → float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)
