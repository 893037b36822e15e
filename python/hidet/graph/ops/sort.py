"""Sorting along one axis: sort, argsort, topk, kthvalue and median, by ranks.

Each element's rank is the number of elements of its row that come before it in the order (ascending or
descending; NaN is larger than every number, as in torch; equal values keep their index order, so every
sort is stable), one reduction per element. The k-th output is then the index whose rank is k, another
reduction, and the values are gathered from it. Both reductions are over the whole row, so a row of n
elements costs n² comparisons: fine for the rows of routers, detections and small vocabularies (the
auto-scheduler runs the comparisons in parallel), slow for rows of tens of thousands; a selection kernel
for those is not written yet.
"""
from __future__ import annotations

from typing import Tuple

from hidet.graph.operator import Operator
from hidet.graph.ops import arithmetic as ew
from hidet.graph.ops.creation import full
from hidet.graph.ops.indexing import gather
from hidet.graph.ops.reduce import any as any_of, argmax
from hidet.graph.ops.reshape import squeeze
from hidet.graph.ops.transform import strided_slice
from hidet.graph.ops.utils import input_node, normalize_axis
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute, reduce
from hidet.ir.dtypes import int64
from hidet.ir.expr import Expr, binary, call, cast, convert, logical_and, logical_not, logical_or, select
from hidet.ir.task import Task


def _comes_before(xj: Expr, xi: Expr, j: Expr, i: Expr, descending: bool) -> Expr:
    """Whether element j precedes element i: a strictly earlier value, or an equal one at a lower index."""
    if xi.dtype.is_float():
        nan_i, nan_j = call('isnan', xi, dtype='bool'), call('isnan', xj, dtype='bool')
        if descending:  # NaN first
            earlier = logical_or(binary('>', xj, xi), logical_and(nan_j, logical_not(nan_i)))
        else:  # NaN last
            earlier = logical_or(binary('<', xj, xi), logical_and(nan_i, logical_not(nan_j)))
        same = logical_or(binary('==', xj, xi), logical_and(nan_i, nan_j))
    else:
        earlier = binary('>' if descending else '<', xj, xi)
        same = binary('==', xj, xi)
    return logical_or(earlier, logical_and(same, binary('<', j, i)))


class RankOp(Operator):
    """rank[..., i, ...] = how many elements of the row along ``axis`` come before element i."""

    def __init__(self, x: Tensor, axis: int, descending: bool):
        a = input_node('x', x)
        n = a.shape[axis]

        def element(*idx):
            def term(j):
                other = tuple(idx[:axis]) + (j,) + tuple(idx[axis + 1:])
                return select(_comes_before(a[other], a[idx], j, idx[axis], descending), convert(1, int64),
                              convert(0, int64))

            return reduce([n], term, 'sum', acc_dtype=int64, dtype=int64)

        out = compute('rank', a.shape, element)
        super().__init__([x], {'axis': axis, 'descending': descending}, Task('rank', [a], [out]))


class PositionsOp(Operator):
    """positions[..., r, ...] = the index whose rank is r, for r < k (ranks are a permutation)."""

    def __init__(self, rank: Tensor, axis: int, k: int):
        a = input_node('rank', rank)
        n = a.shape[axis]
        shape = list(a.shape)
        shape[axis] = k

        def element(*idx):
            def term(i):
                at = tuple(idx[:axis]) + (i,) + tuple(idx[axis + 1:])
                return select(binary('==', a[at], cast(idx[axis], int64)), cast(i, int64), convert(0, int64))

            return reduce([n], term, 'sum', acc_dtype=int64, dtype=int64)

        out = compute('positions', shape, element)
        super().__init__([rank], {'axis': axis, 'k': k}, Task('rank_positions', [a], [out]))


def _ordered(op: str, x: Tensor, k: int, axis: int, descending: bool) -> Tuple[Tensor, Tensor]:
    if x.ndim == 0:  # one element: itself, at index 0
        return x, full([], 0, 'int64', x.device)
    axis = normalize_axis(op, axis, x.ndim)
    n = x.shape[axis]
    if not isinstance(n, int):
        raise NotImplementedError(f'{op}: the sorted dimension must have a static size, got {n}')
    if not 0 <= k <= n:
        raise ValueError(f'{op}: k = {k} is out of range for a dimension of size {n}')
    rank = RankOp(x, axis, descending).get_output(0)
    positions = PositionsOp(rank, axis, k).get_output(0)
    return gather(x, axis, positions), positions


def sort(x: Tensor, axis: int = -1, descending: bool = False) -> Tuple[Tensor, Tensor]:
    """(values, indices) of ``x`` sorted along ``axis`` (stable: equal values keep their order; NaN is the
    largest value), as torch.sort."""
    n = x.shape[normalize_axis('sort', axis, max(x.ndim, 1))] if x.ndim else 1
    return _ordered('sort', x, n, axis, descending)


def argsort(x: Tensor, axis: int = -1, descending: bool = False) -> Tensor:
    return sort(x, axis, descending)[1]


def topk(x: Tensor, k: int, axis: int = -1, largest: bool = True) -> Tuple[Tensor, Tensor]:
    """(values, indices) of the ``k`` largest (or smallest) elements along ``axis``, in order, as torch.topk
    (ties: the lower index first)."""
    return _ordered('topk', x, k, axis, largest)


def kthvalue(x: Tensor, k: int, axis: int = -1, keepdim: bool = False) -> Tuple[Tensor, Tensor]:
    """(value, index) of the k-th smallest element (k from 1) along ``axis``, as torch.kthvalue."""
    values, indices = _ordered('kthvalue', x, k, axis, False)
    axis = normalize_axis('kthvalue', axis, max(x.ndim, 1))
    values, indices = (strided_slice(t, [k - 1], [k], axes=[axis]) for t in (values, indices))
    return (values, indices) if keepdim else (squeeze(values, [axis]), squeeze(indices, [axis]))


def median(x: Tensor, axis: int = -1, keepdim: bool = False) -> Tuple[Tensor, Tensor]:
    """(value, index) of the lower median along ``axis``, as torch.median(dim): a row holding NaN gives NaN
    and the index of its first NaN."""
    if x.ndim == 0:
        return _ordered('median', x, 1, 0, False)
    axis = normalize_axis('median', axis, x.ndim)
    value, index = kthvalue(x, (x.shape[axis] + 1) // 2, axis, keepdim)
    if not x.dtype.is_float():
        return value, index
    nans = ew.isnan(x)
    has_nan = any_of(nans, [axis], keepdim)
    first_nan = argmax(ew.cast_(nans, 'int32'), axis, keepdim)
    return ew.where(has_nan, float('nan'), value), ew.where(has_nan, first_nan, index)
