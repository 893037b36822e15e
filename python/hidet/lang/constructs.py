"""Hidet Script constructs shared by the CPU and CUDA: loops, tensor declarations and views, casts.

These are ordinary Python functions that the transpiler calls while it translates a script function:
they take IR expressions (or Python values) and return IR expressions or the markers below.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from hidet.ir.dtypes import DataType, boolean, data_type, float32, int32, int64
from hidet.ir.expr import BufferLoad, Constant, Expr, cast as ir_cast
from hidet.ir.lowlevel import Address, PrimCall
from hidet.ir.type import PointerType, TensorType, is_pointer, is_scalar, is_tensor, tensor_type, type_of

LOOP_KINDS = {'.': 'serial', 's': 'serial', 'u': 'unroll', 'p': 'parallel'}


class LoopSpec:
    """What a ``for`` iterates: one (start, stop, step, kind) per loop variable (nested loops)."""

    def __init__(self, dims: Sequence[Tuple], kinds: Sequence[str]):
        self.dims, self.kinds = list(dims), list(kinds)


class TensorDecl:
    """A tensor declared when assigned to a name: a shared or register array, or a view of a pointer."""

    def __init__(self, type: TensorType, init: Optional[Expr] = None):
        self.type, self.init = type, init


class ScriptMacro:
    """Statements shared by script functions (``hidet.lang.macro``): a Python function whose Hidet Script body is
    translated where a script calls it, ``env`` the Python names of its scope."""

    def __init__(self, func, env):
        self.func = func
        self.env = env


def _int_value(v, what: str):
    if isinstance(v, bool) or not isinstance(v, (int, Expr)):
        raise TypeError(f'{what} must be an integer, got {type(v).__name__} {v!r}')
    if isinstance(v, Expr) and not (is_scalar(v) and v.dtype.is_integer()):
        raise TypeError(f'{what} must be an integer, got a value of type {type_of(v)!r}')
    return v


def range_spec(*args) -> LoopSpec:
    """``range(stop)``, ``range(start, stop)``, ``range(start, stop, step)`` as a loop (``for i in range(n)``)."""
    if not 1 <= len(args) <= 3:
        raise TypeError(f'range takes 1 to 3 arguments, got {len(args)}')
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    for v, what in ((start, 'range start'), (stop, 'range stop'), (step, 'range step')):
        _int_value(v, what)
    if isinstance(step, int) and step == 0:
        raise ValueError('range step must not be zero')
    return LoopSpec([(start, stop, step)], ['serial'])


def grid(*extents, attrs: Optional[str] = None) -> LoopSpec:
    """Nested loops over ``extents`` (``for i, j in grid(4, 8)``). ``attrs`` has one letter per loop (or one
    for all): ``'.'`` serial, ``'u'`` unrolled (``#pragma unroll``), ``'p'`` parallel (OpenMP, CPU kernels)."""
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    if not extents:
        raise TypeError('grid needs at least one extent')
    attrs = attrs or '.'
    if len(attrs) == 1:
        attrs = attrs * len(extents)
    if len(attrs) != len(extents) or any(a not in LOOP_KINDS for a in attrs):
        raise ValueError(f"grid attrs {attrs!r}: expected one of '.', 'u', 'p' per extent ({len(extents)})")
    for e in extents:
        _int_value(e, 'a grid extent')
    return LoopSpec([(0, e, 1) for e in extents], [LOOP_KINDS[a] for a in attrs])


def unroll(loop) -> LoopSpec:
    """``for i in unroll(range(8))`` (or ``unroll(8)``): the loop is unrolled by the C compiler."""
    if not isinstance(loop, LoopSpec):
        loop = range_spec(loop)
    return LoopSpec(loop.dims, ['unroll'] * len(loop.dims))


def _shape(shape) -> Tuple:
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    return tuple(shape)


def register_tensor(dtype, shape) -> TensorDecl:
    """``regs = register_tensor(f32, [4, 4])``: a per-thread local array (registers on CUDA)."""
    t = tensor_type(data_type(dtype), _shape(shape), 'register')
    t.const_numel()
    return TensorDecl(t)


def shared_tensor(dtype, shape) -> TensorDecl:
    """``smem = shared_tensor(f32, [32, 32])``: a CUDA shared-memory array of the thread block."""
    t = tensor_type(data_type(dtype), _shape(shape), 'shared')
    t.const_numel()
    return TensorDecl(t)


def as_pointer(x, what: str = 'argument') -> Expr:
    """An address from ``~t[i]`` / a pointer, a tensor (its first element) or ``t[i]`` (its element's address)."""
    if isinstance(x, BufferLoad):
        return Address(x.buffer, x.index)
    if isinstance(x, Expr) and (is_pointer(x) or is_tensor(x)):
        return x
    raise TypeError(f'{what} must be an address (e.g. ~a[i]) or a pointer, got {_describe(x)}')


def pointee(ptr: Expr) -> DataType:
    t = type_of(ptr)
    return t.dtype if isinstance(t, (PointerType, TensorType)) else t


def view(ptr, dtype_or_type, shape=None) -> TensorDecl:
    """``a = view(p, f32[m, n])`` (or ``view(p, f32, [m, n])``): index the memory at ``p`` as a row-major tensor.
    The shape may use scalar parameters."""
    t = dtype_or_type if shape is None else tensor_type(data_type(dtype_or_type), _shape(shape))
    if not isinstance(t, TensorType):
        raise TypeError('view(p, f32[m, n]): the second argument must be a tensor type such as f32[m, n]')
    return TensorDecl(TensorType(t.dtype, t.shape, 'pointer'), as_pointer(ptr, 'view: the pointer'))


def cast(x, dtype):
    """``cast(x, f16)`` converts a scalar; ``cast(p, ~i32)`` reinterprets a pointer."""
    if isinstance(dtype, PointerType):
        p = as_pointer(x, 'cast: the value')
        return PrimCall('reinterpret_pointer', [p], dtype)
    dtype = data_type(dtype)
    if isinstance(x, Expr):
        if not is_scalar(x):
            raise TypeError(f'cannot cast {_describe(x)} to {dtype}; pointers cast to pointer types (~{dtype})')
        return ir_cast(x, dtype)
    return Constant(x, dtype)


def scalar_literal(value) -> Expr:
    """The IR constant of a Python scalar declared as a variable: bool, int32 (int64 if large), float32."""
    if isinstance(value, bool):
        return Constant(value, boolean)
    if isinstance(value, int):
        return Constant(value, int32 if -2 ** 31 <= value < 2 ** 31 else int64)
    return Constant(value, float32)


def _describe(x) -> str:
    if isinstance(x, Expr):
        t = type_of(x)
        if isinstance(t, TensorType):
            return f'a tensor {t.dtype}{list(t.shape) if all(isinstance(s, int) for s in t.shape) else ""}'
        if isinstance(t, PointerType):
            return f'a pointer {t!r}'
        return f'a {t} value'
    return f'{type(x).__name__} {x!r}'


describe = _describe
