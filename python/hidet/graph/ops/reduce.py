"""Reductions over any axes, with keepdim: sum, mean, max, min, prod, any, all."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import input_node, normalize_axes
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute, reduce
from hidet.ir.task import Task

Axes = Optional[Union[int, Sequence[int]]]


class ReduceOp(Operator):
    def __init__(self, x: Tensor, axes: Axes, keepdim: bool, kind: str):
        a = input_node('x', x)
        dims = normalize_axes(f'reduce_{kind}', axes, len(a.shape))
        kept = [d for d in range(len(a.shape)) if d not in dims]
        out_shape = [1 if d in dims else a.shape[d] for d in range(len(a.shape))] if keepdim \
            else [a.shape[d] for d in kept]

        def element(*out_idx):
            kept_idx = [out_idx[d] for d in kept] if keepdim else list(out_idx)

            def value(*r):
                idx, ki, ri = [], iter(kept_idx), iter(r)
                for d in range(len(a.shape)):
                    idx.append(next(ri) if d in dims else next(ki))
                return a[tuple(idx)]

            return reduce([a.shape[d] for d in dims], value, kind)

        out = compute('y', out_shape, element)
        super().__init__([x], {'axes': dims, 'keepdim': keepdim, 'kind': kind}, Task(f'reduce_{kind}', [a], [out]))


def _reduce(x: Tensor, axes: Axes, keepdim: bool, kind: str) -> Tensor:
    return ReduceOp(x, axes, keepdim, kind).get_output(0)


def sum(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduce(x, dims, keepdim, 'sum')


def mean(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:
    if not x.dtype.is_float():
        raise TypeError(f'mean needs a floating-point tensor, got {x.dtype}; cast it first')
    return _reduce(x, dims, keepdim, 'mean')


def max(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduce(x, dims, keepdim, 'max')


def min(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduce(x, dims, keepdim, 'min')


def prod(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:
    return _reduce(x, dims, keepdim, 'prod')


def any(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduce(x, dims, keepdim, 'any')


def all(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _reduce(x, dims, keepdim, 'all')
