"""Scatters: an output element takes (or reduces) the source elements whose index names it.

``scatter_elements(data, axis, index, src, reduce)`` is torch.scatter / scatter_reduce and ONNX
ScatterElements: ``out[.., index[.., j, ..], ..]`` receives ``src[.., j, ..]``. ``scatter_nd(data, indices,
updates, reduce)`` is ONNX ScatterND. Each output element looks at the index entries that could name it —
the m entries along ``axis`` beside it, or the M index tuples of scatter_nd — in one reduction, so a scatter
costs (output elements) x m: cheap for the usual few rows (a KV-cache step, MoE routing, one-hot), not for
scattering a whole large tensor. With ``reduce='none'`` an element named twice takes the last source (torch
and ONNX leave it undefined); 'sum', 'prod', 'amax', 'amin' and 'mean' combine every source and, with
``include_self``, the element itself. Negative indices count from the end; out-of-range ones never write.
"""
from __future__ import annotations

from typing import List, Sequence

from hidet.graph.operator import Operator
from hidet.graph.ops import arithmetic as ew
from hidet.graph.ops.creation import full
from hidet.graph.ops.indexing import check_index_into_empty
from hidet.graph.ops.reshape import reshape
from hidet.graph.ops.transform import broadcast
from hidet.graph.ops.utils import input_node, normalize_axis
from hidet.graph.tensor import Tensor, _numel
from hidet.ir.compute import compute, default_acc_dtype, reduce
from hidet.ir.dtypes import boolean, int64
from hidet.ir.expr import Expr, binary, cast, convert, logical_and, minimum, select
from hidet.ir.task import Task

REDUCTIONS = ('none', 'sum', 'prod', 'amax', 'amin', 'mean')
_KIND = {'sum': 'sum', 'mean': 'sum', 'prod': 'prod', 'amax': 'max', 'amin': 'min'}


def _names(index: Expr, p: Expr, extent) -> Expr:
    """Whether an index value names position ``p`` of a dimension of ``extent`` (negatives from the end)."""
    v = cast(index, int64)
    return logical_and(binary('<', v, convert(extent, int64)), logical_and(
        binary('>=', v, convert(-extent, int64)),
        binary('==', select(binary('<', v, convert(0, int64)), v + extent, v), cast(p, int64))))


class _ScatterOp(Operator):
    """The match (reduce 'none': the last entry naming each element, or -1) or the reduction of the sources
    naming it, for every element of ``data``'s shape; ``entries(p, j)`` gives (names p, source value)."""

    def __init__(self, inputs: List[Tensor], nodes, shape, m, entries, reduce_kind: str, name: str, attrs):
        def element(*p):
            if reduce_kind == 'none':
                return reduce([m], lambda j: select(entries(p, j)[0], cast(j, int64), convert(-1, int64)), 'max')
            value_dtype = entries(p, 0)[1].dtype
            acc = default_acc_dtype(_KIND[reduce_kind], value_dtype)
            identity = {'sum': 0, 'prod': 1, 'max': _lowest(acc), 'min': _highest(acc)}[_KIND[reduce_kind]]

            def term(j):
                hit, value = entries(p, j)
                return select(hit, cast(value, acc), convert(identity, acc))

            return reduce([m], term, _KIND[reduce_kind], acc_dtype=acc, dtype=acc)

        super().__init__(inputs, attrs, Task(name, nodes, [compute('y', shape, element)]))


def _lowest(dtype):
    return float('-inf') if dtype.is_float() else -(1 << (8 * dtype.nbytes - 1))


def _highest(dtype):
    return float('inf') if dtype.is_float() else (1 << (8 * dtype.nbytes - 1)) - 1


def _count(hit) -> Expr:
    return select(hit, convert(1, int64), convert(0, int64))


def _clamped(p: Sequence[Expr], limits: Sequence[int], axis: int, j) -> tuple:
    """p with ``j`` along ``axis`` and every other coordinate clamped into ``limits`` (always readable)."""
    return tuple(j if d == axis else minimum(p[d], convert(max(limits[d] - 1, 0), p[d].dtype))
                 for d in range(len(limits)))


def _within(p: Sequence[Expr], limits: Sequence[int], axis: int) -> Expr:
    conds = [binary('<', p[d], convert(limits[d], p[d].dtype)) for d in range(len(limits)) if d != axis]
    out = convert(True, boolean)
    for c in conds:
        out = logical_and(out, c)
    return out


def scatter_elements(data: Tensor, axis: int, index: Tensor, src, reduce: str = 'none',
                     include_self: bool = True) -> Tensor:
    """torch.scatter(data, axis, index, src) / scatter_reduce; ``src`` a tensor (at least index's shape) or
    a scalar."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"scatter: reduce must be one of {REDUCTIONS}, got {reduce!r}")
    if not index.dtype.is_integer():
        raise TypeError(f'scatter: the index tensor must have an integer dtype, got {index.dtype.name}')
    axis = normalize_axis('scatter', axis, data.ndim)
    if index.ndim != data.ndim or any(i > d for k, (i, d) in enumerate(zip(index.shape, data.shape)) if k != axis):
        raise ValueError(f'scatter: index {index.shape} must have the dimensions of data {data.shape}, no larger '
                         f'(but along axis {axis})')
    check_index_into_empty('scatter', index, data.shape[axis], axis)
    if not isinstance(src, Tensor):
        src = full(list(index.shape), src, data.dtype, data.device)
    if src.ndim != data.ndim or any(s < i for s, i in zip(src.shape, index.shape)):
        raise ValueError(f'scatter: src {src.shape} must be at least as large as index {index.shape}')
    ind, s = input_node('index', index), input_node('src', src)
    m, extent, limits = index.shape[axis], data.shape[axis], list(index.shape)

    def entries(p, j):
        at = _clamped(p, limits, axis, j)
        return logical_and(_within(p, limits, axis), _names(ind[at], p[axis], extent)), s[at]

    if reduce == 'none':
        match = _ScatterOp([index], [ind], data.shape, m, lambda p, j: entries(p, j)[:1] + (None,), 'none',
                           'scatter_match', {'axis': axis}).get_output(0)
        return _take_matched(data, src, match, axis)
    total = _ScatterOp([index, src], [ind, s], data.shape, m, entries, reduce, f'scatter_{reduce}',
                       {'axis': axis}).get_output(0)
    return _combine(data, total, reduce, include_self, lambda: _ScatterOp(
        [index], [ind], data.shape, m, lambda p, j: (entries(p, j)[0], _count(entries(p, j)[0])), 'sum',
        'scatter_count', {'axis': axis}).get_output(0))


class _TakeMatchedOp(Operator):
    """out[p] = src[p with ``match[p]`` along axis] where match[p] >= 0, else data[p]."""

    def __init__(self, data: Tensor, src: Tensor, match: Tensor, axis: int):
        d, s, mt = input_node('data', data), input_node('src', src), input_node('match', match)

        def element(*p):
            j = mt[p]
            at = tuple(cast(_at_least_zero(j), p[axis].dtype) if k == axis else p[k] for k in range(len(p)))
            return select(binary('>=', j, convert(0, int64)), cast(s[at], d.dtype), d[p])

        super().__init__([data, src, match], {'axis': axis},
                         Task('scatter_take', [d, s, mt], [compute('y', d.shape, element)]))


def _at_least_zero(j: Expr) -> Expr:
    return select(binary('<', j, convert(0, int64)), convert(0, int64), j)


def _take_matched(data: Tensor, src: Tensor, match: Tensor, axis: int) -> Tensor:
    return _TakeMatchedOp(data, src, match, axis).get_output(0)


def _combine(data: Tensor, total: Tensor, reduce: str, include_self: bool, count) -> Tensor:
    """data combined with the reduced sources (elements no source names keep data's value)."""
    hits = count()
    named = ew.greater(hits, 0)
    if reduce == 'mean':
        n = ew.add(hits, 1) if include_self else hits
        total = ew.add(total, data) if include_self else total
        value = ew.divide(total, ew.maximum_(n, 1)) if data.dtype.is_float() else \
            ew.floor_divide(total, ew.maximum_(n, 1))
    elif include_self:
        value = {'sum': ew.add, 'prod': ew.multiply, 'amax': ew.maximum_, 'amin': ew.minimum_}[reduce](total, data)
    else:
        value = total
    return ew.where(named, ew.cast_(value, data.dtype), data)


def scatter_nd(data: Tensor, indices: Tensor, updates: Tensor, reduce: str = 'none') -> Tensor:
    """ONNX ScatterND: indices [..., k] name slices data[i0, ..., ik-1, :] that take (or reduce with) the
    slices of updates [..., data.shape[k:]]."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"scatter_nd: reduce must be one of {REDUCTIONS}, got {reduce!r}")
    k = indices.shape[-1]
    lead = list(indices.shape[:-1])
    mcount = _numel(lead)
    if k > data.ndim or list(updates.shape) != lead + list(data.shape[k:]):
        raise ValueError(f'scatter_nd: updates {updates.shape} must be indices {indices.shape} without its last '
                         f'dimension followed by data {data.shape} past its first {k}')
    idx = reshape(indices, [mcount, k])
    upd = reshape(updates, [mcount] + list(data.shape[k:]))
    ind, u = input_node('indices', idx), input_node('updates', upd)

    def names(p, j):
        hit = convert(True, boolean)
        for t in range(k):
            hit = logical_and(hit, _names(ind[j, t], p[t], data.shape[t]))
        return hit

    def entries(p, j):
        return names(p, j), u[(j,) + tuple(p[k:])]

    if reduce == 'none':
        match = _ScatterOp([idx], [ind], data.shape, mcount, lambda p, j: (names(p, j), None), 'none',
                           'scatter_nd_match', {}).get_output(0)
        return _TakeMatchedNdOp(data, upd, match, k).get_output(0)
    total = _ScatterOp([idx, upd], [ind, u], data.shape, mcount, entries, reduce, f'scatter_nd_{reduce}',
                       {}).get_output(0)
    return _combine(data, total, reduce, True, lambda: _ScatterOp(
        [idx], [ind], data.shape, mcount, lambda p, j: (names(p, j), _count(names(p, j))), 'sum',
        'scatter_nd_count', {}).get_output(0))


class _TakeMatchedNdOp(Operator):
    def __init__(self, data: Tensor, updates: Tensor, match: Tensor, k: int):
        d, u, mt = input_node('data', data), input_node('updates', updates), input_node('match', match)

        def element(*p):
            j = mt[p]
            taken = cast(u[(_at_least_zero(j),) + tuple(p[k:])], d.dtype)
            return select(binary('>=', j, convert(0, int64)), taken, d[p])

        super().__init__([data, updates, match], {'k': k},
                         Task('scatter_nd_take', [d, u, mt], [compute('y', d.shape, element)]))


def _along(index: Tensor, axis: int, shape: Sequence[int]) -> Tensor:
    """A 1-D index of m entries as an index tensor of ``shape`` with m along ``axis`` (index_copy & co)."""
    if index.ndim > 1:
        raise ValueError(f'index_copy/index_add/index_fill: the index must be 0-D or 1-D, got {index.shape}')
    m = index.shape[0] if index.ndim else 1
    target = [m if d == axis else s for d, s in enumerate(shape)]
    return broadcast(reshape(index, [m if d == axis else 1 for d in range(len(shape))]), target)


def index_copy(data: Tensor, axis: int, index: Tensor, source: Tensor) -> Tensor:
    """data with data[.., index[j], ..] = source[.., j, ..] along ``axis`` (torch.index_copy)."""
    axis = normalize_axis('index_copy', axis, data.ndim)
    return scatter_elements(data, axis, _along(index, axis, source.shape), source)


def index_add(data: Tensor, axis: int, index: Tensor, source: Tensor, alpha=1) -> Tensor:
    """data with alpha * source[.., j, ..] added to data[.., index[j], ..] (torch.index_add)."""
    axis = normalize_axis('index_add', axis, data.ndim)
    src = ew.multiply(source, alpha) if alpha != 1 else source
    return scatter_elements(data, axis, _along(index, axis, source.shape), src, 'sum')


def index_fill(data: Tensor, axis: int, index: Tensor, value) -> Tensor:
    """data with the slices data[.., index[j], ..] set to ``value`` (torch.index_fill)."""
    axis = normalize_axis('index_fill', axis, data.ndim)
    return scatter_elements(data, axis, _along(index, axis, data.shape), value)
