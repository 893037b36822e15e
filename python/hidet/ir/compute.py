"""Compute definitions: what an operator computes, independent of how it is scheduled.

    a = tensor_input('a', 'float32', [m, k])
    b = tensor_input('b', 'float32', [k, n])
    c = compute('c', [m, n], lambda i, j: reduce([k], lambda kk: a[i, kk] * b[kk, j], 'sum'))

A ``TensorNode`` is either an input (no definition) or defined by a ``GridCompute``: a value
expression over the output's index variables, which may contain ``ReduceCompute`` expressions.
"""
from __future__ import annotations

import inspect
from typing import Callable, List, Optional, Sequence, Union

from hidet.ir.dtypes import DataType, boolean, data_type, float32, int64
from hidet.ir.expr import Expr, TensorElement, Var, cast, convert, index_vars

Dim = Union[int, Expr]  # a Python int, or an int64 expression of symbolic dimensions (hidet.ir.expr.SymbolVar)


def dim(x) -> Dim:
    """``x`` as a dimension: a Python int, or an integer expression."""
    if isinstance(x, Expr):
        if not x.dtype.is_integer():
            raise TypeError(f'a dimension must be an integer, got an expression of {x.dtype}')
        return x
    return int(x)

REDUCE_KINDS = ('sum', 'mean', 'max', 'min', 'prod', 'any', 'all')


class GridCompute:
    def __init__(self, axes: Sequence[Var], value: Expr):
        self.axes = tuple(axes)
        self.value = value


class TensorNode:
    """A tensor of a compute definition: an input, or ``compute(...)``'s result."""

    def __init__(self, name: str, dtype, shape: Sequence[int], definition: Optional[GridCompute] = None):
        self.name = name
        self.dtype: DataType = data_type(dtype)
        self.shape = tuple(dim(s) for s in shape)
        self.definition = definition

    def is_input(self) -> bool:
        return self.definition is None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> TensorElement:
        indices = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if len(indices) != len(self.shape):
            raise IndexError(f'{self.name} has {len(self.shape)} dimensions, indexed with {len(indices)}')
        return TensorElement(self, indices)

    def __repr__(self) -> str:
        return f'{self.name}: {self.dtype}{list(self.shape)}'


class ReduceCompute(Expr):
    """A reduction of ``value`` over ``axes`` (ranging over ``shape``), accumulated in ``acc_dtype``."""

    def __init__(self, axes: Sequence[Var], shape: Sequence[int], value: Expr, kind: str, acc_dtype: DataType,
                 dtype: DataType):
        self.axes, self.shape, self.value = tuple(axes), tuple(dim(s) for s in shape), value
        self.kind, self.acc_dtype, self.dtype = kind, acc_dtype, dtype


def _check_arity(name: str, fcompute: Callable, n: int) -> None:
    params = inspect.signature(fcompute).parameters.values()
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        return
    if len(params) != n:
        raise TypeError(f'{name}: fcompute takes {len(params)} indices, the shape has {n}')


def tensor_input(name: str, dtype, shape: Sequence[int]) -> TensorNode:
    return TensorNode(name, dtype, shape)


def compute(name: str, shape: Sequence[int], fcompute: Callable[..., Expr], dtype=None) -> TensorNode:
    """A tensor whose element at ``indices`` is ``fcompute(*indices)``."""
    shape = tuple(dim(s) for s in shape)
    axes = index_vars([f'i{d}' for d in range(len(shape))])
    _check_arity(f'compute {name!r}', fcompute, len(shape))
    value = convert(fcompute(*axes))
    if dtype is not None:
        value = cast(value, dtype)
    return TensorNode(name, value.dtype, shape, GridCompute(axes, value))


def default_acc_dtype(kind: str, dtype: DataType) -> DataType:
    """fp16/bf16 accumulate in fp32 (DESIGN contract 5); integer sums in int64 as torch; any/all in bool."""
    if kind in ('any', 'all'):
        return boolean
    if dtype.name in ('float16', 'bfloat16') and kind in ('sum', 'mean', 'prod'):
        return float32
    if (dtype.is_integer() or dtype.is_boolean()) and kind in ('sum', 'prod'):
        return int64
    return dtype


def reduce(shape: Sequence[int], fcompute: Callable[..., Expr], kind: str, acc_dtype=None, dtype=None) -> Expr:
    """The ``kind`` reduction of ``fcompute(*r)`` over ``r`` in ``shape`` (use inside ``compute``)."""
    if kind not in REDUCE_KINDS:
        raise ValueError(f'unknown reduction {kind!r}; expected one of {REDUCE_KINDS}')
    shape = tuple(dim(s) for s in shape)
    axes = index_vars([f'r{d}' for d in range(len(shape))])
    _check_arity('reduce', fcompute, len(shape))
    value = convert(fcompute(*axes))
    acc = default_acc_dtype(kind, value.dtype) if acc_dtype is None else data_type(acc_dtype)
    if dtype is None:
        dtype = boolean if kind in ('any', 'all') else acc if kind in ('sum', 'prod') and value.dtype.is_integer() \
            else value.dtype
    return ReduceCompute(axes, shape, value, kind, acc, data_type(dtype))


def collect_inputs(outputs: Sequence[TensorNode]) -> List[TensorNode]:
    """The input tensors the outputs depend on, in first-use order."""
    # (a circle at import time: hidet.ir.functors imports this module)
    from hidet.ir.functors import collect

    found: List[TensorNode] = []
    for out in outputs:
        for node in collect(out, TensorNode):
            if node.is_input() and node not in found:
                found.append(node)
    return found
