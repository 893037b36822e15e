"""ONNX QuantizeLinear / DequantizeLinear (QDQ models) for 8-, 16- and 32-bit integers: per-tensor, per-axis
and blocked scales and zero points. The graph computes in float (the dequantized values): hidet has no
integer-arithmetic kernels yet, so a QDQ model runs as its float twin, not faster."""
from __future__ import annotations

import numpy as np

from hidet.graph import ops
from hidet.frontend.onnx.registry import register
from hidet.frontend.onnx.utils import hidet_dtype
from hidet.graph.tensor import Tensor

_INT_RANGE = {'int8': (-128, 127), 'uint8': (0, 255), 'int16': (-32768, 32767), 'int32': (-2 ** 31, 2 ** 31 - 1)}


def _check(a):
    if a.get('block_size', 0) < 0:
        return f"block_size={a['block_size']}"
    return None


def _spread(ctx, p: Tensor, x: Tensor, axis: int, block_size: int) -> Tensor:
    """A scale or zero point laid out to broadcast against ``x``: one value, one per index of ``axis``, or
    (blocked) one per ``block_size`` indices of ``axis`` and per index of the other dimensions."""
    if p.ndim == 0 or (p.ndim == 1 and p.shape[0] == 1 and x.shape[axis] != 1 and not block_size):
        return ops.reshape(p, [])
    if block_size:
        if p.ndim != x.ndim:
            raise ValueError(f'blocked quantization needs a scale of rank {x.ndim}, got {p.shape}')
        blocks = ctx.constant(np.arange(x.shape[axis], dtype=np.int64) // block_size, 'int64')
        return ops.take(p, blocks, axis)  # the axis grows from ceil(D / block) back to D
    if p.ndim != 1 or p.shape[0] != x.shape[axis]:
        raise ValueError(f'a per-axis scale must have {x.shape[axis]} elements (dimension {axis} of {x.shape}), '
                         f'got {p.shape}')
    return ops.reshape(p, [x.shape[axis] if d == axis else 1 for d in range(x.ndim)])


@register('DequantizeLinear', attrs={'axis': 1, 'block_size': 0, 'output_dtype': 0}, check=_check)
def dequantize_linear(ctx, x, scale, zero_point=None):
    """(x - zero_point) · scale, in the scale's dtype (or output_dtype)."""
    x, scale = ctx.tensor(x), ctx.tensor(scale)
    axis = ctx.attrs['axis'] % max(x.ndim, 1)
    out_dtype = hidet_dtype(ctx.attrs['output_dtype']) if ctx.attrs['output_dtype'] else scale.dtype
    s = ops.cast(_spread(ctx, scale, x, axis, ctx.attrs['block_size']), 'float32')
    shifted = ops.cast(x, 'float32')
    if zero_point is not None:
        zp = _spread(ctx, ctx.tensor(zero_point), x, axis, ctx.attrs['block_size'])
        shifted = ops.subtract(shifted, ops.cast(zp, 'float32'))
    return ops.cast(ops.multiply(shifted, s), out_dtype)


@register('QuantizeLinear', attrs={'axis': 1, 'block_size': 0, 'output_dtype': 0, 'saturate': 1, 'precision': 0},
          check=_check)
def quantize_linear(ctx, x, scale, zero_point=None):
    """saturate(round_half_even(x / scale) + zero_point) in the zero point's dtype (or output_dtype; uint8)."""
    x, scale = ctx.tensor(x), ctx.tensor(scale)
    axis = ctx.attrs['axis'] % max(x.ndim, 1)
    if ctx.attrs['output_dtype']:
        out_dtype = hidet_dtype(ctx.attrs['output_dtype'])
    else:
        out_dtype = ctx.tensor(zero_point).dtype if zero_point is not None else hidet_dtype(2)  # (uint8)
    if out_dtype.name not in _INT_RANGE:
        raise NotImplementedError(f'QuantizeLinear to {out_dtype.name} is not supported (8-, 16- and 32-bit '
                                  'integers are)')
    s = ops.cast(_spread(ctx, scale, x, axis, ctx.attrs['block_size']), 'float32')
    y = ops.round(ops.divide(ops.cast(x, 'float32'), s))
    if zero_point is not None:
        zp = _spread(ctx, ctx.tensor(zero_point), x, axis, ctx.attrs['block_size'])
        y = ops.add(y, ops.cast(zp, 'float32'))
    lo, hi = _INT_RANGE[out_dtype.name]
    return ops.cast(ops.clamp(y, float(lo), float(hi)), out_dtype)
