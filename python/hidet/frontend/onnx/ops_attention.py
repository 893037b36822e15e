"""The ONNX transformer operators of opset 23+: Attention (scaled dot-product attention as one node) and
RotaryEmbedding.

Q, K, V in 4-D ([batch, heads, seq, head_size]) or 3-D ([batch, seq, heads * head_size], with
q_num_heads / kv_num_heads); grouped-query heads; a KV cache (past_key / past_value in, present_key /
present_value out) or an external one (nonpad_kv_seqlen); masks from attn_mask (bool, or float added,
shorter than the keys: padded with masked positions), is_causal (bottom-right: query i sees key j iff
j <= i + offset, offset = the keys before the query block) and the sliding windows of opset 25, all
summed into one additive bias; softcap; softmax_precision; the optional qk_matmul_output in its four
modes. A query row whose bias masks every key gives zeros (the spec's fully-masked-row rule), never NaN.

Without softcap, a qk_matmul_output or a float64 softmax the attention runs as hidet's fused
scaled_dot_product_attention; otherwise as matmul → softmax → matmul.
"""
from __future__ import annotations

import math
from typing import List, Optional, Union

import numpy as np

from hidet.graph import ops
from hidet.frontend.onnx.registry import register
from hidet.frontend.onnx.utils import hidet_dtype
from hidet.graph.tensor import Tensor

Bias = Union[None, np.ndarray, Tensor]  # an additive bias over [..., q, kv]: 0 where a key is seen, -inf not


def _check(a) -> Optional[str]:
    if a['qk_matmul_output_mode'] not in (0, 1, 2, 3):
        return f"qk_matmul_output_mode={a['qk_matmul_output_mode']}"
    if a['softmax_precision'] not in (None, 1, 10, 11, 16):
        return f"softmax_precision={a['softmax_precision']}"
    if a['left_window_size'] < -1 or a['right_window_size'] < -1:
        return f"window sizes ({a['left_window_size']}, {a['right_window_size']}) below -1"
    return None


_ATTRS = {'is_causal': 0, 'kv_num_heads': None, 'q_num_heads': None, 'qk_matmul_output_mode': 0, 'scale': None,
          'softcap': 0.0, 'softmax_precision': None, 'left_window_size': -1, 'right_window_size': -1}


@register('Attention', since=23, attrs=_ATTRS, check=_check)
def attention(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
    a = ctx.attrs
    q, k, v = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
    rank = q.ndim
    if not rank == k.ndim == v.ndim or rank not in (3, 4):
        raise ValueError(f'Q, K and V must all be 3-D or all 4-D, got {q.shape}, {k.shape}, {v.shape}')
    if rank == 3:
        if a['q_num_heads'] is None or a['kv_num_heads'] is None:
            raise ValueError('3-D Q, K and V need the q_num_heads and kv_num_heads attributes')
        q, k, v = _heads(q, a['q_num_heads']), _heads(k, a['kv_num_heads']), _heads(v, a['kv_num_heads'])
    if (past_key is None) != (past_value is None):
        raise ValueError('past_key and past_value go together')
    if past_key is not None and nonpad_kv_seqlen is not None:
        raise ValueError('nonpad_kv_seqlen cannot be combined with past_key / past_value')
    if past_key is not None:
        k = ops.concat([ctx.tensor(past_key), k], 2)
        v = ops.concat([ctx.tensor(past_value), v], 2)
    present_k, present_v = k, v
    batch, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    if hq != hkv:  # grouped-query attention: each KV head serves hq / hkv consecutive query heads
        if hq % hkv:
            raise ValueError(f'{hq} query heads cannot share {hkv} key/value heads evenly')
        k, v = _repeat_heads(k, hq // hkv), _repeat_heads(v, hq // hkv)

    scale = a['scale'] if a['scale'] is not None else 1.0 / math.sqrt(d)
    precision = hidet_dtype(a['softmax_precision']) if a['softmax_precision'] is not None else None
    fused = a['softcap'] == 0 and not ctx.wants_output(3) and (precision is None or precision.name != 'float64')
    windowed = a['left_window_size'] >= 0 or a['right_window_size'] >= 0
    qk_out = None
    if fused and a['is_causal'] and attn_mask is None and past_key is None and nonpad_kv_seqlen is None \
            and not windowed:  # no keys before the queries: the causal mask is torch's (top-left)
        y = ops.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    else:
        bias = _bias(ctx, q, sq, skv, attn_mask, nonpad_kv_seqlen, past_key.shape[2] if past_key is not None else 0)
        if fused:
            mask = None if bias is None else (ctx.constant(bias, q.dtype) if isinstance(bias, np.ndarray) else bias)
            y = _zero_unseen_rows(ctx, ops.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale), bias)
        else:
            y, qk_out = _composed(ctx, q, k, v, bias, scale, a['softcap'], precision, a['qk_matmul_output_mode'])
    if rank == 3:
        y = ops.reshape(ops.transpose(y, 1, 2), [batch, sq, -1])
    return [y, present_k, present_v, qk_out]


def _heads(x: Tensor, heads: int) -> Tensor:
    """[batch, seq, heads * size] → [batch, heads, seq, size]."""
    if x.shape[2] % heads:
        raise ValueError(f'a hidden size of {x.shape[2]} does not split into {heads} heads')
    return ops.transpose(ops.reshape(x, [x.shape[0], x.shape[1], heads, x.shape[2] // heads]), 1, 2)


def _repeat_heads(x: Tensor, times: int) -> Tensor:
    """[b, h, s, d] → [b, h * times, s, d], each head repeated ``times`` times in a row."""
    b, h, s, d = x.shape
    return ops.reshape(ops.broadcast(ops.unsqueeze(x, 2), [b, h, times, s, d]), [b, h * times, s, d])


# ---------------------------------------------------------------- the bias
def _bias(ctx, q: Tensor, sq: int, skv: int, attn_mask, nonpad, past: int) -> Bias:
    """attn_mask + causal mask + sliding window + key padding, as one additive bias (None: nothing is masked).
    Parts known at import time stay numpy arrays (one constant); the rest are graph tensors."""
    a = ctx.attrs
    parts: List[Union[np.ndarray, Tensor]] = []
    if attn_mask is not None:
        parts.append(_mask_bias(ctx, attn_mask, skv, q.dtype))
    nonpad_static = ctx.static(nonpad, 'nonpad_kv_seqlen') if nonpad is not None and ctx.is_static(nonpad) else None
    if a['is_causal'] or a['left_window_size'] >= 0 or a['right_window_size'] >= 0:
        i, j = np.arange(sq).reshape(sq, 1), np.arange(skv).reshape(1, skv)
        if nonpad is None or nonpad_static is not None:
            # the offset: the keys before the query block (a per-batch [b, 1, 1] array for an external cache)
            offset = past if nonpad is None else np.asarray(nonpad_static, np.int64).reshape(-1, 1, 1) - sq
            diff = i + offset - j  # how far key j lies before query i
            allowed = np.ones(np.shape(diff), bool)
            if a['is_causal']:
                allowed &= diff >= 0
            if a['left_window_size'] >= 0:
                allowed &= diff <= a['left_window_size']
            if a['right_window_size'] >= 0:
                allowed &= -diff <= a['right_window_size']
            parts.append(_from_allowed(allowed[:, None] if allowed.ndim == 3 else allowed))
        else:  # the same from the run-time lengths: diff [b, 1, q, kv]
            lengths = ops.reshape(ops.cast(ctx.tensor(nonpad), 'int64'), [-1, 1, 1, 1])
            diff = ops.subtract(ops.add(ops.subtract(lengths, sq), ctx.constant(i, 'int64')), ctx.constant(j, 'int64'))
            conds = []
            if a['is_causal']:
                conds.append(ops.greater_equal(diff, 0))
            if a['left_window_size'] >= 0:
                conds.append(ops.less_equal(diff, a['left_window_size']))
            if a['right_window_size'] >= 0:
                conds.append(ops.greater_equal(diff, -a['right_window_size']))
            allowed = conds[0]
            for c in conds[1:]:
                allowed = ops.logical_and(allowed, c)
            parts.append(ops.where(allowed, 0.0, float('-inf')))
    if nonpad is not None:  # keys at or past each batch's length are padding: [b, 1, 1, kv]
        if nonpad_static is not None:
            seen = np.arange(skv).reshape(1, skv) < np.asarray(nonpad_static, np.int64).reshape(-1, 1)
            parts.append(_from_allowed(seen[:, None, None, :]))
        else:
            lengths = ops.reshape(ops.cast(ctx.tensor(nonpad), 'int64'), [-1, 1, 1, 1])
            seen = ops.less(ctx.constant(np.arange(skv).reshape(1, 1, 1, skv), 'int64'), lengths)
            parts.append(ops.where(seen, 0.0, float('-inf')))
    if not parts:
        return None
    static = [p for p in parts if isinstance(p, np.ndarray)]
    total = None
    if static:
        total = static[0]
        for p in static[1:]:
            total = total + p
        if all(isinstance(p, np.ndarray) for p in parts):
            return total
        total = ctx.constant(total, q.dtype)
    for p in parts:
        if not isinstance(p, np.ndarray):
            p = ops.cast(p, q.dtype)
            total = p if total is None else ops.add(total, p)
    return total


def _from_allowed(allowed: np.ndarray) -> np.ndarray:
    return np.where(allowed, np.float32(0), np.float32(-np.inf))


def _mask_bias(ctx, mask, skv: int, dtype) -> Union[np.ndarray, Tensor]:
    """attn_mask as an additive bias over ``skv`` keys (a shorter mask masks the keys past its end)."""
    if isinstance(mask, np.ndarray):
        bias = _from_allowed(mask) if mask.dtype == np.bool_ else mask.astype(np.float32)
        pad = skv - bias.shape[-1]
        if pad > 0:
            bias = np.concatenate([bias, np.full(bias.shape[:-1] + (pad,), -np.inf, np.float32)], -1)
        return bias
    mask = ctx.tensor(mask)
    bias = ops.where(mask, 0.0, float('-inf')) if mask.dtype.is_boolean() else mask
    bias = ops.cast(bias, dtype)
    pad = skv - bias.shape[-1]
    return ops.pad(bias, [0, pad], value=float('-inf')) if pad > 0 else bias


def _zero_unseen_rows(ctx, x: Tensor, bias: Bias) -> Tensor:
    """``x`` [..., q, n] with zeros in the query rows where the bias masks every key (the fused kernel and
    softmax would give NaN there: the spec says zeros)."""
    if bias is None:
        return x
    if isinstance(bias, np.ndarray):
        seen = np.max(bias, -1, keepdims=True) > -np.inf
        if seen.all():
            return x
        seen = ctx.constant(seen, 'bool')
    else:
        seen = ops.greater(ops.max(ops.cast(bias, 'float32'), -1, keepdim=True), float('-inf'))
    return ops.where(seen, x, 0.0)


# ---------------------------------------------------------------- matmul → softmax → matmul
def _composed(ctx, q, k, v, bias: Bias, scale: float, softcap: float, precision, mode: int):
    scores = ops.multiply(ops.matmul(q, ops.transpose(k, -1, -2)), scale)
    qk = [scores]  # what qk_matmul_output holds in each mode
    if softcap > 0:
        scores = ops.multiply(ops.tanh(ops.divide(scores, softcap)), softcap)
    qk.append(scores)
    if bias is not None:
        scores = ops.add(scores, ctx.constant(bias, q.dtype) if isinstance(bias, np.ndarray) else bias)
    qk.append(scores)
    if precision is not None:
        scores = ops.cast(scores, precision)
    probs = _zero_unseen_rows(ctx, ops.softmax(scores, -1), bias)
    probs = ops.cast(probs, q.dtype)
    qk.append(probs)
    return ops.matmul(probs, v), ops.cast(qk[mode], q.dtype)


# ---------------------------------------------------------------- rotary embedding
@register('RotaryEmbedding', since=23, attrs={'interleaved': 0, 'num_heads': 0, 'rotary_embedding_dim': 0})
def rotary_embedding(ctx, x, cos_cache, sin_cache, position_ids=None):
    """RoPE on [batch, heads, seq, size] or [batch, seq, heads * size]: the first rotary_embedding_dim of each
    head (all by default) rotated pairwise — halves, or even/odd elements where interleaved — by the angles
    of cos/sin_cache, rows picked by position_ids ([batch, seq]) or given per token ([batch, seq, dim / 2])."""
    a = ctx.attrs
    x = ctx.tensor(x)
    shape = list(x.shape)
    if x.ndim == 4:
        x = ops.transpose(x, 1, 2)  # [b, s, h, d]
    elif x.ndim == 3:
        if a['num_heads'] <= 0 or shape[2] % a['num_heads']:
            raise ValueError(f'a 3-D input [batch, seq, hidden] needs num_heads dividing {shape[2]}, '
                             f"got {a['num_heads']}")
        x = ops.reshape(x, [shape[0], shape[1], a['num_heads'], shape[2] // a['num_heads']])
    else:
        raise ValueError(f'the input must be 3-D or 4-D, got {shape}')
    d = x.shape[3]
    r = a['rotary_embedding_dim'] or d
    if r % 2 or r > d:
        raise ValueError(f'rotary_embedding_dim {r} must be even and at most the head size {d}')
    cos, sin = ctx.tensor(cos_cache), ctx.tensor(sin_cache)
    if position_ids is not None:
        ids = ctx.tensor(position_ids)
        cos, sin = ops.take(cos, ids, 0), ops.take(sin, ids, 0)  # [b, s, r / 2]
    if cos.shape[-1] != r // 2 or sin.shape[-1] != r // 2:
        raise ValueError(f'cos_cache {cos.shape} and sin_cache {sin.shape} must end in rotary_embedding_dim / 2 '
                         f'= {r // 2}')
    cos, sin = ops.unsqueeze(ops.cast(cos, x.dtype), 2), ops.unsqueeze(ops.cast(sin, x.dtype), 2)
    if a['interleaved']:
        x1 = ops.strided_slice(x, [0], [r], axes=[3], strides=[2])
        x2 = ops.strided_slice(x, [1], [r], axes=[3], strides=[2])
    else:
        x1 = ops.strided_slice(x, [0], [r // 2], axes=[3])
        x2 = ops.strided_slice(x, [r // 2], [r], axes=[3])
    real = ops.subtract(ops.multiply(cos, x1), ops.multiply(sin, x2))
    imag = ops.add(ops.multiply(sin, x1), ops.multiply(cos, x2))
    if a['interleaved']:
        rotated = ops.reshape(ops.stack([real, imag], 4), list(real.shape[:3]) + [r])
    else:
        rotated = ops.concat([real, imag], 3)
    if r < d:
        rotated = ops.concat([rotated, ops.strided_slice(x, [r], [d], axes=[3])], 3)
    return ops.transpose(rotated, 1, 2) if len(shape) == 4 else ops.reshape(rotated, shape)
