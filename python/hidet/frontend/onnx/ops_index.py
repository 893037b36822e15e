"""Indexing ONNX operators: Gather, GatherElements, GatherND, OneHot, ScatterElements, ScatterND."""
from __future__ import annotations

import numpy as np

from hidet.graph import ops
from hidet.frontend.onnx.registry import register
from hidet.frontend.onnx.utils import value_dtype


@register('Gather', attrs={'axis': 0})
def gather(ctx, x, indices):
    x = ctx.tensor(x)
    return ops.take(x, ctx.tensor(indices), ctx.attrs['axis'])


@register('GatherElements', attrs={'axis': 0})
def gather_elements(ctx, x, indices):
    return ops.gather(ctx.tensor(x), ctx.attrs['axis'], ctx.tensor(indices))


@register('GatherND', attrs={'batch_dims': 0})
def gather_nd(ctx, x, indices):
    return ops.gather_nd(ctx.tensor(x), ctx.tensor(indices), ctx.attrs['batch_dims'])


@register('OneHot', attrs={'axis': -1})
def one_hot(ctx, indices, depth, values):
    idx = ctx.tensor(indices)
    n = int(ctx.scalar(depth, 'depth'))
    off, on = (v.item() for v in np.asarray(ctx.static(values, 'values')).reshape(-1)[:2])
    dtype = value_dtype(values)
    axis = ctx.attrs['axis'] % (idx.ndim + 1)
    wrapped = ops.where(ops.less(idx, 0), ops.add(idx, n), idx)
    positions = ctx.tensor(np.arange(n, dtype=np.int64).reshape([-1] + [1] * (idx.ndim - axis)))
    hit = ops.equal(ops.unsqueeze(ops.cast(wrapped, 'int64'), [axis]), positions)
    return ops.where(hit, ctx.constant(on, dtype), ctx.constant(off, dtype))


_REDUCTION = {'none': 'none', 'add': 'sum', 'mul': 'prod', 'max': 'amax', 'min': 'amin'}


def _check_reduction(a):
    return None if a['reduction'] in _REDUCTION else f"reduction={a['reduction']!r}"


@register('ScatterElements', attrs={'axis': 0, 'reduction': 'none'}, check=_check_reduction)
def scatter_elements(ctx, data, indices, updates):
    return ops.scatter_elements(ctx.tensor(data), ctx.attrs['axis'], ctx.tensor(indices), ctx.tensor(updates),
                                _REDUCTION[ctx.attrs['reduction']])


@register('ScatterND', attrs={'reduction': 'none'}, check=_check_reduction)
def scatter_nd(ctx, data, indices, updates):
    return ops.scatter_nd(ctx.tensor(data), ctx.tensor(indices), ctx.tensor(updates),
                          _REDUCTION[ctx.attrs['reduction']])
