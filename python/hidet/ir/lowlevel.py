"""Low-level expressions that Hidet Script needs beside the scheduler's: the address of a buffer element,
calls of target intrinsics (``PrimCall``: thread indices, barriers, shuffles, atomics, cp.async, ldmatrix,
mma, …; their C spelling is in hidet/backend/primitives.py) and calls of other functions of the module.
Each has a ``type`` (hidet.ir.type) as well as a ``dtype`` (the scalar at the end of a pointer)."""
from __future__ import annotations

from typing import Sequence

from hidet.ir.dtypes import DataType
from hidet.ir.expr import Expr, convert
from hidet.ir.type import PointerType, Type, TensorType, type_of


class Address(Expr):
    """``&base[index]``: ``base`` is a pointer- or tensor-typed expression, ``index`` a flat element index."""

    def __init__(self, base: Expr, index: Expr):
        self.base, self.index = base, convert(index)
        base_type = type_of(base)
        if not isinstance(base_type, (PointerType, TensorType)):
            raise TypeError('only the elements of tensors and pointers have addresses')
        self.type = PointerType(base_type.base if isinstance(base_type, PointerType) else base_type.dtype)
        self.dtype = self.type.dtype


class PrimCall(Expr):
    """A call of the target intrinsic ``name`` (hidet/backend/primitives.py spells it in C)."""

    def __init__(self, name: str, args: Sequence, type: Type, attrs: dict = None):
        self.name, self.args = name, tuple(convert(a) for a in args)
        self.type = None if isinstance(type, DataType) else type
        self.dtype = type if isinstance(type, DataType) else type.dtype
        self.attrs = dict(attrs or {})  # compile-time arguments (immediates of the instruction)


class FunctionCall(Expr):
    """A call of another function (hidet.ir.stmt.Function) of the same module."""

    def __init__(self, func, args: Sequence[Expr]):
        self.func, self.args = func, tuple(args)
        ret = func.ret_type
        self.type = None if isinstance(ret, DataType) else ret
        self.dtype = ret if isinstance(ret, DataType) else ret.dtype
