"""Reduction ONNX operators: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,SumSquare,LogSum,LogSumExp},
ArgMax/ArgMin, CumSum, CumProd and TopK."""
from __future__ import annotations

import numpy as np

from hidet.graph import ops
from hidet.frontend.onnx.registry import register

_KINDS = ('ReduceSum', 'ReduceMean', 'ReduceMax', 'ReduceMin', 'ReduceProd', 'ReduceL1', 'ReduceL2',
          'ReduceSumSquare', 'ReduceLogSum', 'ReduceLogSumExp')


def _reduce(ctx, x, axes):
    x = ctx.tensor(x)
    op = ctx.node.op_type
    keep = bool(ctx.attrs['keepdims'])
    if axes is None or len(axes) == 0:
        if ctx.attrs.get('noop_with_empty_axes', 0):
            return x
        axes = list(range(x.ndim))
    axes = sorted({a % max(x.ndim, 1) for a in axes})
    if x.ndim == 0:
        return x
    if any(x.shape[a] == 0 for a in axes):
        return _empty_reduce(ctx, x, axes, keep)
    if op == 'ReduceSum':
        return ops.sum(x, axes, keep)
    if op == 'ReduceMean':
        return ops.mean(x, axes, keep)
    if op == 'ReduceMax':
        return ops.max(x, axes, keep)
    if op == 'ReduceMin':
        return ops.min(x, axes, keep)
    if op == 'ReduceProd':
        return ops.prod(x, axes, keep)
    if op == 'ReduceL1':
        return ops.sum(ops.abs(x), axes, keep)
    if op == 'ReduceSumSquare':
        return ops.sum(ops.multiply(x, x), axes, keep)
    if op == 'ReduceL2':
        return ops.cast(ops.sqrt(ops.sum(ops.multiply(x, x), axes, keep)), x.dtype)
    if op == 'ReduceLogSum':
        return ops.log(ops.sum(x, axes, keep))
    # ReduceLogSumExp, shifted by the max for range
    m = ops.max(x, axes, keepdim=True)
    s = ops.log(ops.sum(ops.exp(ops.subtract(x, m)), axes, keep))
    return ops.add(s, m if keep else ops.squeeze(m, axes))


def _empty_reduce(ctx, x, axes, keep):
    """A reduction over an empty dimension: the identity of the reduction, as onnxruntime."""
    op = ctx.node.op_type
    shape = [1 if d in axes else n for d, n in enumerate(x.shape) if keep or d not in axes]
    if x.dtype.is_boolean() and op in ('ReduceMax', 'ReduceMin'):
        return ctx.tensor(np.full(shape, op == 'ReduceMin', dtype=np.bool_))
    if op in ('ReduceMax', 'ReduceLogSumExp'):
        fill = -np.inf if x.dtype.is_float() else np.iinfo(x.dtype.np_dtype).min
    elif op == 'ReduceMin':
        fill = np.inf if x.dtype.is_float() else np.iinfo(x.dtype.np_dtype).max
    elif op == 'ReduceProd':
        fill = 1
    elif op == 'ReduceLogSum':
        fill = -np.inf
    elif op == 'ReduceMean':
        fill = np.nan
    else:
        fill = 0
    return ctx.tensor(np.full(shape, fill, dtype=x.dtype.np_dtype))


_ATTRS = {'keepdims': 1, 'noop_with_empty_axes': 0}


_OTHERS = [k for k in _KINDS if k != 'ReduceSum']  # (ReduceSum took axes as an input from opset 13)


@register(_OTHERS, until=17, attrs={'keepdims': 1, 'axes': None})
def reduce_axes_attribute(ctx, x):
    return _reduce(ctx, x, ctx.attrs['axes'])


@register('ReduceSum', attrs=_ATTRS)
@register(_OTHERS, since=18, attrs=_ATTRS)
def reduce_axes_input(ctx, x, axes=None):
    return _reduce(ctx, x, ctx.static_ints(axes, 'axes'))


# ---------------------------------------------------------------- arg reductions, cumsum
@register(['ArgMax', 'ArgMin'], attrs={'axis': 0, 'keepdims': 1, 'select_last_index': 0})
def arg_reduce(ctx, x):
    x = ctx.tensor(x)
    axis = ctx.attrs['axis'] % x.ndim
    keep = bool(ctx.attrs['keepdims'])
    fn = ops.argmax if ctx.node.op_type == 'ArgMax' else ops.argmin
    if not ctx.attrs['select_last_index']:
        return fn(x, axis, keep)
    # the last extreme: the first one of the reversed tensor, counted from the end
    idx = fn(ops.flip(x, [axis]), axis, keep)
    return ops.subtract(x.shape[axis] - 1, idx)


@register('CumSum', attrs={'exclusive': 0, 'reverse': 0})
def cumsum(ctx, x, axis):
    return _cumulative(ctx, x, axis, ops.cumsum)


@register('CumProd', since=26, attrs={'exclusive': 0, 'reverse': 0})
def cumprod(ctx, x, axis):
    return _cumulative(ctx, x, axis, ops.cumprod)


def _cumulative(ctx, x, axis, fn):
    x = ctx.tensor(x)
    out = fn(x, int(ctx.scalar(axis, 'axis')) % x.ndim, bool(ctx.attrs['exclusive']), bool(ctx.attrs['reverse']))
    return ops.cast(out, x.dtype) if out.dtype != x.dtype else out


@register('TopK', attrs={'axis': -1, 'largest': 1, 'sorted': 1})
def topk(ctx, x, k):
    """The k largest (smallest) along axis, with their indices, sorted either way (sorted=0 allows any order)."""
    return list(ops.topk(ctx.tensor(x), int(ctx.scalar(k, 'k')), ctx.attrs['axis'], bool(ctx.attrs['largest'])))
