"""Neural-network operators composed from the elementwise and reduction operators: softmax,
log_softmax, layer/group/RMS/batch normalization, scaled dot-product attention. float16/bfloat16 inputs are computed in float32
and the result cast back, as torch does. (Fusing each into one kernel is the graph optimizer's job.)"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

from hidet.graph.operator import Operator
from hidet.graph.ops import arithmetic as ew, reduce as red
from hidet.graph.ops.attention import attention
from hidet.graph.ops.matmul import matmul
from hidet.graph.ops.reshape import reshape
from hidet.graph.ops.transform import pad, strided_slice, transpose
from hidet.graph.ops.utils import input_node, normalize_axis
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute
from hidet.ir.expr import binary, call, select
from hidet.ir.task import Task


_FINFO_EPS = {'float16': 2.0 ** -10, 'bfloat16': 2.0 ** -7, 'float32': 2.0 ** -23, 'float64': 2.0 ** -52}


def _upcast(x: Tensor) -> Tensor:
    return ew.cast_(x, 'float32') if x.dtype.name in ('float16', 'bfloat16') else x


def _require_float(op: str, x: Tensor) -> None:
    if not x.dtype.is_float():
        raise TypeError(f'{op} needs a floating-point tensor, got {x.dtype}; cast it first')


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    _require_float('softmax', x)
    axis = normalize_axis('softmax', axis, x.ndim)
    xf = _upcast(x)
    e = ew.exp(ew.subtract(xf, red.max(xf, axis, keepdim=True)))
    return ew.cast_(ew.divide(e, red.sum(e, axis, keepdim=True)), x.dtype)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    _require_float('log_softmax', x)
    axis = normalize_axis('log_softmax', axis, x.ndim)
    xf = _upcast(x)
    shifted = ew.subtract(xf, red.max(xf, axis, keepdim=True))
    log_sum = ew.log(red.sum(ew.exp(shifted), axis, keepdim=True))
    return ew.cast_(ew.subtract(shifted, log_sum), x.dtype)


def _normalize(xf: Tensor, axes: Sequence[int], eps: float) -> Tensor:
    mean = red.mean(xf, axes, keepdim=True)
    centered = ew.subtract(xf, mean)
    var = red.mean(ew.multiply(centered, centered), axes, keepdim=True)
    return ew.multiply(centered, ew.rsqrt(ew.add(var, eps)))


def _affine(y: Tensor, weight: Optional[Tensor], bias: Optional[Tensor]) -> Tensor:
    if weight is not None:
        y = ew.multiply(y, _upcast(weight))
    if bias is not None:
        y = ew.add(y, _upcast(bias))
    return y


def layer_norm(x: Tensor, normalized_shape: Union[int, Sequence[int], None] = None, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5, *, num_last_dims: Optional[int] = None,
               epsilon: Optional[float] = None) -> Tensor:
    """torch.nn.functional.layer_norm; ``normalized_shape`` defaults to the last dimension. The original Hidet's
    ``num_last_dims=`` (how many trailing dimensions) and ``epsilon=`` are kept beside torch's spelling."""
    _require_float('layer_norm', x)
    if num_last_dims is not None:
        if normalized_shape is not None:
            raise TypeError('layer_norm: give normalized_shape or num_last_dims, not both')
        normalized_shape = list(x.shape[x.ndim - num_last_dims:])
    if normalized_shape is None:
        normalized_shape = x.shape[-1]
    eps = eps if epsilon is None else epsilon
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f'layer_norm: normalized_shape {shape} must match the trailing dimensions of the input '
                         f'{x.shape}')
    axes = list(range(x.ndim - len(shape), x.ndim))
    return ew.cast_(_affine(_normalize(_upcast(x), axes, eps), weight, bias), x.dtype)


def rms_norm(x: Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[Tensor] = None,
             eps: Optional[float] = None) -> Tensor:
    """torch.nn.functional.rms_norm: x / sqrt(mean(x^2) + eps) * weight (eps defaults to the dtype's epsilon)."""
    _require_float('rms_norm', x)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f'rms_norm: normalized_shape {shape} must match the trailing dimensions of the input '
                         f'{x.shape}')
    if eps is None:
        eps = _FINFO_EPS[x.dtype.name]
    axes = list(range(x.ndim - len(shape), x.ndim))
    xf = _upcast(x)
    ms = red.mean(ew.multiply(xf, xf), axes, keepdim=True)
    return ew.cast_(_affine(ew.multiply(xf, ew.rsqrt(ew.add(ms, eps))), weight, None), x.dtype)


def _channel_param(p: Optional[Tensor], ndim: int) -> Optional[Tensor]:
    """A per-channel vector [C] as a tensor [C, 1, ..., 1] broadcasting over an [N, C, ...] input."""
    if p is None:
        return None
    return reshape(p, [p.shape[0]] + [1] * (ndim - 2))


def group_norm(x: Tensor, num_groups: int, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5) -> Tensor:
    """torch.nn.functional.group_norm. The channels split into [groups, channels per group] by a reshape that
    keeps the other dimensions apart, so each channel's statistics are read at an index of its own
    dimensions only and the fused kernel computes them per row (hidet.ir.schedulers.lowering.row_split)."""
    _require_float('group_norm', x)
    if x.ndim < 2 or x.shape[1] % num_groups != 0:
        raise ValueError(f'group_norm: the channels of input {x.shape} (dimension 1) must divide into '
                         f'{num_groups} groups')
    spatial = list(x.shape[2:])
    split = [num_groups, x.shape[1] // num_groups]
    grouped = reshape(_upcast(x), [x.shape[0]] + split + spatial)
    y = _normalize(grouped, list(range(2, grouped.ndim)), eps)

    def per_channel(p: Optional[Tensor]) -> Optional[Tensor]:
        return None if p is None else reshape(p, split + [1] * len(spatial))

    return reshape(ew.cast_(_affine(y, per_channel(weight), per_channel(bias)), x.dtype), list(x.shape))


def batch_norm(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """Inference-mode batch normalization over dimension 1 with the running statistics."""
    _require_float('batch_norm', x)
    if x.ndim < 2 or running_mean.shape != (x.shape[1],) or running_var.shape != (x.shape[1],):
        raise ValueError(f'batch_norm: running_mean {running_mean.shape} and running_var {running_var.shape} must '
                         f'be vectors of the input\'s channel count (dimension 1 of {x.shape})')
    mean = _channel_param(_upcast(running_mean), x.ndim)
    inv_std = ew.rsqrt(ew.add(_channel_param(_upcast(running_var), x.ndim), eps))
    y = ew.multiply(ew.subtract(_upcast(x), mean), inv_std)
    return ew.cast_(_affine(y, _channel_param(weight, x.ndim), _channel_param(bias, x.ndim)), x.dtype)


class CausalMaskOp(Operator):
    """Scores [..., L, S] with positions j > i set to -inf (torch's is_causal: a lower-triangular mask)."""

    def __init__(self, scores: Tensor):
        a = input_node('s', scores)

        def element(*idx):
            i, j = idx[-2], idx[-1]
            return select(binary('<=', j, i), a[idx], call('hidet_lowest', dtype=a.dtype))

        super().__init__([scores], {}, Task('causal_mask', [a], [compute('y', a.shape, element)]))


def local_response_norm(x: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0,
                        window: Optional[Sequence[int]] = None) -> Tensor:
    """x / (k + alpha / size · Σ x²)^beta, the sum over ``size`` channels (dimension 1) around each: ``window``
    = (before, after) channels, torch's (size // 2, (size - 1) // 2) by default (ONNX's puts the longer side
    after)."""
    _require_float('local_response_norm', x)
    if x.ndim < 3:
        raise ValueError(f'local_response_norm: expected [batch, channels, ...], got {x.shape}')
    before, after = window if window is not None else (size // 2, (size - 1) // 2)
    xf = _upcast(x)
    sq = pad(ew.multiply(xf, xf), [0, 0] * (x.ndim - 2) + [before, after])  # channels padded with zeros
    c = x.shape[1]
    total = strided_slice(sq, [0], [c], axes=[1])
    for i in range(1, before + after + 1):
        total = ew.add(total, strided_slice(sq, [i], [i + c], axes=[1]))
    denom = ew.pow(ew.add(ew.multiply(total, alpha / size), k), beta)
    return ew.cast_(ew.divide(xf, denom), x.dtype)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor] = None,
                                 is_causal: bool = False, scale: Optional[float] = None) -> Tensor:
    """softmax(q @ kᵀ · scale + mask) @ v, as torch.nn.functional.scaled_dot_product_attention (inference:
    no dropout). A bool mask keeps the positions where it is True; a float mask is added. One fused
    attention operator (attention.py) where q, k and v share their batch dimensions, else composed."""
    if q.ndim < 2 or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f'scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not match: '
                         'q and k need the same last dimension, k and v the same sequence length')
    if is_causal and attn_mask is not None:
        raise ValueError('scaled_dot_product_attention: give attn_mask or is_causal, not both')
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and (attn_mask is None or attn_mask.ndim <= q.ndim):
        return attention(q, k, v, attn_mask, scale, is_causal)
    qf, kf, vf = _upcast(q), _upcast(k), _upcast(v)
    scores = ew.multiply(matmul(qf, transpose(kf, -1, -2)), scale)
    if is_causal:
        scores = CausalMaskOp(scores).get_output(0)
    elif attn_mask is not None:
        if attn_mask.dtype.is_boolean():
            scores = ew.where(attn_mask, scores, float('-inf'))
        else:
            scores = ew.add(scores, _upcast(attn_mask))
    return ew.cast_(matmul(softmax(scores, -1), vf), q.dtype)
