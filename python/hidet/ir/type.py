"""Types beyond scalars, for functions written in Hidet Script (hidet/lang):

- ``PointerType(base)``: the address of ``base`` values (``~f32`` in Hidet Script).
- ``TensorType(dtype, shape, scope)``: a row-major tensor (``f32[m, n]``). ``scope`` says where its
  elements live: ``'pointer'`` behind an address (kernel parameters, views of pointers), ``'shared'``
  in CUDA shared memory, ``'register'`` in a thread's registers (a local array). Elements are read and
  written at flat row-major indices (``BufferLoad`` / ``Store``); the shape may hold expressions of
  scalar parameters for ``'pointer'`` tensors, and must be constant elsewhere.
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


Type = Union[DataType, PointerType, TensorType]


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
