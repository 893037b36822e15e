"""Types beyond scalars, for functions written in Hidet Script (hidet/lang):

- ``PointerType(base)``: the address of ``base`` values (``~f32`` in Hidet Script).
- ``TensorType(dtype, shape, scope)``: a row-major tensor (``f32[m, n]``). ``scope`` says where its
  elements live: ``'pointer'`` behind an address (kernel parameters, views of pointers), ``'shared'``
  in CUDA shared memory, ``'register'`` in a thread's registers (a local array). Elements are read and
  written at flat row-major indices (``BufferLoad`` / ``Store``); the shape may hold expressions of
  scalar parameters for ``'pointer'`` tensors, and must be constant elsewhere.
- ``TensorMapType``: a TMA tensor map (CUDA sm_90) over a tensor parameter of a kernel: a kernel parameter
  passed by value (``const __grid_constant__ CUtensorMap``), built by the kernel's launch entry.
- ``void``: the type of functions and intrinsics that return nothing.

A ``Var`` carries one of these as ``var.type`` (``None`` for a scalar of ``var.dtype``); its ``dtype`` is
then the element type.
"""
from __future__ import annotations

from typing import Sequence, Tuple, Union

from hidet.ir.dtypes import DataType, data_type

TENSOR_SCOPES = ('pointer', 'shared', 'register')

void = DataType('void', 'void', 0, 'void', -1, None)


class PointerType:
    def __init__(self, base: Union[DataType, 'PointerType']):
        self.base = base if isinstance(base, (PointerType, DataType)) else data_type(base)

    @property
    def dtype(self) -> DataType:
        """The scalar type at the end of the pointer chain."""
        return self.base.dtype if isinstance(self.base, PointerType) else self.base

    def __eq__(self, other):
        return isinstance(other, PointerType) and self.base == other.base

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f'~{self.base!r}'


class TensorType:
    def __init__(self, dtype, shape: Sequence, scope: str = 'pointer'):
        if scope not in TENSOR_SCOPES:
            raise ValueError(f'unknown tensor scope {scope!r}; expected one of {TENSOR_SCOPES}')
        self.dtype: DataType = data_type(dtype)
        self.shape: Tuple = tuple(shape)
        self.scope = scope

    def with_scope(self, scope: str) -> 'TensorType':
        return TensorType(self.dtype, self.shape, scope)

    def const_numel(self) -> int:
        """The number of elements; the shape must be constant."""
        n = 1
        for s in self.shape:
            if not isinstance(s, int):
                raise TypeError(f'a {self.scope} tensor needs a constant shape, got {list(self.shape)}')
            n *= s
        return n

    def __repr__(self) -> str:
        return f'{self.dtype!r}{list(self.shape)}@{self.scope}'


class Im2col:
    """TMA's im2col mode of a tensor map over a channels-last input ([c, w, h, n] innermost first): a copy
    reads pixels per column pixels (traversing w, then h, then n, each by its ``strides`` step, inside the
    bounding box from ``lower`` to the spatial sizes plus ``upper``, innermost first; both corners within
    [-128, 127]) of channels per pixel channels each, from coordinates shifted by the window offsets it is
    given; positions outside the tensor read zeros."""

    def __init__(self, lower: Sequence[int], upper: Sequence[int], strides: Sequence[int]):
        self.lower, self.upper, self.strides = tuple(lower), tuple(upper), tuple(strides)

    def __repr__(self) -> str:
        return f'Im2col(lower={list(self.lower)}, upper={list(self.upper)}, strides={list(self.strides)})'


class TensorMapType:
    """A TMA tensor map over kernel parameter ``tensor`` (a Var of TensorType): ``dims`` (innermost first) of
    ``tensor.dtype`` elements from element ``offset``, ``strides`` the byte strides of dims 1.. (multiples of 16),
    copied in boxes of ``box`` elements with the 128-byte swizzle. Sizes are ints or expressions of the
    kernel's scalar parameters. With ``im2col`` (Im2col; 4 dims [c, w, h, n]) a box is (channels per
    pixel, pixels per column) of TMA's im2col mode."""

    def __init__(self, tensor, dims: Sequence, strides: Sequence, box: Sequence[int], offset=0,
                 im2col: Im2col = None):
        if im2col is not None:
            if len(dims) != 4 or len(strides) != 3 or len(box) != 2 or len(im2col.lower) != 2 or \
                    len(im2col.upper) != 2 or len(im2col.strides) != 4:
                raise ValueError(f'an im2col tensor map has 4 dims [c, w, h, n] with a stride each but the first, '
                                 f'a box of (channels, pixels), 2 corners and 4 traversal strides; got dims '
                                 f'{list(dims)}, strides {list(strides)}, box {list(box)}, {im2col}')
        elif not 2 <= len(dims) <= 3 or len(strides) != len(dims) - 1 or len(box) != len(dims):
            raise ValueError(f'a tensor map has 2 or 3 dims with a stride each but the first and a box size each, got '
                             f'dims {list(dims)}, strides {list(strides)}, box {list(box)}')
        self.tensor, self.offset, self.im2col = tensor, offset, im2col
        self.dims, self.strides, self.box = tuple(dims), tuple(strides), tuple(box)

    @property
    def dtype(self) -> DataType:
        return self.tensor.type.dtype

    def __repr__(self) -> str:
        mode = f', {self.im2col}' if self.im2col is not None else ''
        return f'TensorMap({self.tensor.name}, dims={list(self.dims)}, box={list(self.box)}{mode})'


Type = Union[DataType, PointerType, TensorType, TensorMapType]


def tensor_type(dtype, shape, scope: str = 'pointer') -> TensorType:
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    return TensorType(dtype, shape, scope)


def type_of(expr) -> Type:
    """The type of an expression: its ``type`` when it holds one (pointers, tensors), else its dtype."""
    t = getattr(expr, 'type', None)
    return expr.dtype if t is None else t


def is_scalar(expr) -> bool:
    return isinstance(type_of(expr), DataType) and type_of(expr) is not void


def is_pointer(expr) -> bool:
    return isinstance(type_of(expr), PointerType)


def is_tensor(expr) -> bool:
    return isinstance(type_of(expr), TensorType)
