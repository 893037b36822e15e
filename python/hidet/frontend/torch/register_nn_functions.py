"""Conversions of torch.nn.functional (and their torch.* twins): linear and convolution layers,
activations, normalization, pooling, dropout (the identity in inference), embedding, resizing,
padding, scaled dot-product and multi-head attention."""
import math
from typing import Optional

import torch
import torch.nn.functional as F

from hidet import ops
from hidet.frontend.torch.register_functions import norm, repeat_interleave
from hidet.frontend.torch.registry import register_function
from hidet.frontend.torch.utils import as_float, dims_arg, pair, same_dtype, to_hidet_dtype
from hidet.graph.tensor import Tensor


def _targets(*names, spaces=(F, torch, torch._C._nn)):
    """The objects named ``names`` in torch.nn.functional, torch and torch._C._nn (those that exist)."""
    found = []
    for space in spaces:
        for name in names:
            obj = getattr(space, name, None)
            if obj is not None and all(obj is not f for f in found):
                found.append(obj)
    return found


# ---------------------------------------------------------------- linear layers
@register_function(*_targets('linear'))
def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None):
    same_dtype('linear', input, weight, bias)
    y = ops.matmul(input, ops.transpose(weight, 0, 1) if weight.ndim == 2 else weight)
    return ops.add(y, bias) if bias is not None else y


def _conv_padding(padding, weight: Tensor, dilation, nd: int):
    if isinstance(padding, str):
        if padding == 'valid':
            return [0] * nd, None
        if padding == 'same':  # torch pads the extra element (odd totals) at the end
            totals = [d * (k - 1) for d, k in zip(pair(dilation, nd), weight.shape[2:])]
            lo = [t // 2 for t in totals]
            extra = [t - 2 * lo_ for t, lo_ in zip(totals, lo)]
            return lo, extra if any(extra) else None
        raise ValueError(f'conv: unknown padding {padding!r}')
    return pair(padding, nd), None


def _conv(nd: int, input, weight, bias, stride, padding, dilation, groups):
    same_dtype(f'conv{nd}d', input, weight, bias)
    pads, extra = _conv_padding(padding, weight, dilation, nd)
    if extra is not None:
        input = ops.pad(input, [v for e in reversed(extra) for v in (0, e)])
    fn = ops.conv2d if nd == 2 else ops.conv1d
    return fn(input, weight, bias, pair(stride, nd), pads, pair(dilation, nd), groups)


@register_function(*_targets('conv2d'))
def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride=1, padding=0, dilation=1, groups=1):
    if input.ndim == 3:
        return ops.squeeze(conv2d(ops.unsqueeze(input, [0]), weight, bias, stride, padding, dilation, groups), [0])
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


@register_function(*_targets('conv1d'))
def conv1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride=1, padding=0, dilation=1, groups=1):
    if input.ndim == 2:
        return ops.squeeze(conv1d(ops.unsqueeze(input, [0]), weight, bias, stride, padding, dilation, groups), [0])
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


@register_function(*_targets('conv_transpose2d'))
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride=1, padding=0,
                     output_padding=0, groups=1, dilation=1):
    if input.ndim == 3:  # unbatched (C, H, W)
        return ops.squeeze(conv_transpose2d(ops.unsqueeze(input, [0]), weight, bias, stride, padding, output_padding,
                                            groups, dilation), [0])
    return ops.conv_transpose2d(input, weight, bias, pair(stride), pair(padding), pair(output_padding), groups,
                                pair(dilation))


# ---------------------------------------------------------------- activations
@register_function(*_targets('relu', 'relu_'))
def relu(input: Tensor, inplace=False):
    return ops.relu(input)


@register_function(*_targets('relu6'))
def relu6(input: Tensor, inplace=False):
    return ops.clamp(input, 0.0, 6.0)


@register_function(*_targets('hardtanh', 'hardtanh_'))
def hardtanh(input: Tensor, min_val=-1.0, max_val=1.0, inplace=False):
    return ops.clamp(input, float(min_val), float(max_val))


@register_function(*_targets('gelu'))
def gelu(input: Tensor, approximate: str = 'none'):
    return ops.gelu(input, approximate)


@register_function(*_targets('silu'))
def silu(input: Tensor, inplace=False):
    return ops.silu(input)


@register_function(*_targets('hardswish'))
def hardswish(input: Tensor, inplace=False):
    return ops.hardswish(input)


@register_function(*_targets('hardsigmoid'))
def hardsigmoid(input: Tensor, inplace=False):
    return ops.clamp(ops.add(ops.divide(input, 6.0), 0.5), 0.0, 1.0)


@register_function(*_targets('leaky_relu', 'leaky_relu_'))
def leaky_relu(input: Tensor, negative_slope=0.01, inplace=False):
    return ops.leaky_relu(input, negative_slope)


@register_function(*_targets('elu', 'elu_'))
def elu(input: Tensor, alpha=1.0, inplace=False):
    return ops.where(ops.greater(input, 0.0), input, ops.multiply(ops.subtract(ops.exp(input), 1.0), alpha))


@register_function(*_targets('softplus'))
def softplus(input: Tensor, beta=1.0, threshold=20.0):
    bx = ops.multiply(input, beta) if beta != 1 else input
    soft = ops.log1p(ops.exp(ops.minimum(bx, float(threshold))))
    soft = ops.divide(soft, beta) if beta != 1 else soft
    return ops.where(ops.greater(bx, float(threshold)), input, soft)


@register_function(*_targets('mish'))
def mish(input: Tensor, inplace=False):
    return ops.multiply(input, ops.tanh(softplus(input)))


@register_function(*_targets('selu', 'selu_'))
def selu(input: Tensor, inplace=False):
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    return ops.multiply(elu(input, alpha), scale)


@register_function(*_targets('celu', 'celu_'))
def celu(input: Tensor, alpha=1.0, inplace=False):
    return ops.where(ops.greater(input, 0.0), input, ops.multiply(ops.expm1(ops.divide(input, alpha)), alpha))


@register_function(*_targets('prelu'))
def prelu(input: Tensor, weight: Tensor):
    """x where positive, else weight · x, the weight per channel (dimension 1) or one for all."""
    if weight.ndim == 1 and weight.shape[0] > 1 and input.ndim >= 2:
        weight = ops.reshape(weight, [weight.shape[0]] + [1] * (input.ndim - 2))
    return ops.where(ops.greater(input, 0.0), input, ops.multiply(input, weight))


@register_function(*_targets('rrelu', 'rrelu_'))
def rrelu(input: Tensor, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    if training:
        raise NotImplementedError('F.rrelu with training=True (random slopes) is not supported (inference only)')
    return ops.leaky_relu(input, (lower + upper) / 2)


@register_function(*_targets('logsigmoid'))
def logsigmoid(input: Tensor):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), without overflow."""
    return ops.subtract(ops.minimum(input, 0.0), ops.log1p(ops.exp(ops.neg(ops.abs(input)))))


@register_function(*_targets('softsign'))
def softsign(input: Tensor):
    return ops.divide(input, ops.add(ops.abs(input), 1.0))


@register_function(*_targets('softshrink'))
def softshrink(input: Tensor, lambd=0.5):
    return ops.where(ops.greater(input, lambd), ops.subtract(input, lambd),
                     ops.where(ops.less(input, -lambd), ops.add(input, lambd), ops.multiply(input, 0.0)))


@register_function(*_targets('hardshrink'))
def hardshrink(input: Tensor, lambd=0.5):
    inside = ops.logical_and(ops.greater_equal(input, -lambd), ops.less_equal(input, lambd))
    return ops.where(inside, 0.0, input)  # (a NaN stays NaN, as torch)


@register_function(*_targets('tanhshrink'))
def tanhshrink(input: Tensor):
    return ops.subtract(input, ops.tanh(input))


@register_function(*_targets('threshold', 'threshold_'))
def threshold(input: Tensor, threshold, value, inplace=False):
    return ops.where(ops.less_equal(input, threshold), ops.full([], value, input.dtype, input.device), input)


@register_function(*_targets('glu'))
def glu(input: Tensor, dim=-1):
    if isinstance(input.shape[dim], int) and input.shape[dim] % 2:
        raise ValueError(f'glu: halving dimension {dim} of {input.shape} must be even')
    half = input.shape[dim] // 2
    a = ops.strided_slice(input, [0], [half], axes=[dim])  # (a split of an empty dimension gives one piece)
    b = ops.strided_slice(input, [half], [2 * half], axes=[dim])
    return ops.multiply(a, ops.sigmoid(b))


@register_function(F.softmin)
def softmin(input: Tensor, dim=None, _stacklevel=3, dtype=None):
    return _softmax(ops.softmax, ops.neg(input), dim, dtype)


def _softmax(fn, input: Tensor, dim, dtype):
    if dtype is not None:
        input = ops.cast(input, to_hidet_dtype(dtype))
    if dim is None:  # torch's legacy implicit dim
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return fn(as_float(input), dim)


@register_function(F.softmax)
def softmax(input: Tensor, dim=None, _stacklevel=3, dtype=None):
    return _softmax(ops.softmax, input, dim, dtype)


@register_function(torch.softmax, torch._C._nn.softmax if hasattr(torch._C._nn, 'softmax') else torch.softmax,
                   torch.special.softmax)
def torch_softmax(input: Tensor, dim, dtype=None):
    return _softmax(ops.softmax, input, dim, dtype)


@register_function(F.log_softmax)
def log_softmax(input: Tensor, dim=None, _stacklevel=3, dtype=None):
    return _softmax(ops.log_softmax, input, dim, dtype)


@register_function(torch.log_softmax, torch.special.log_softmax)
def torch_log_softmax(input: Tensor, dim, dtype=None):
    return _softmax(ops.log_softmax, input, dim, dtype)


# ---------------------------------------------------------------- dropout: the identity in inference
@register_function(*_targets('dropout', 'dropout1d', 'dropout2d', 'dropout3d', 'alpha_dropout', 'feature_alpha_dropout'))
def dropout(input: Tensor, p=0.5, training=False, inplace=False):
    if training and p > 0:
        raise NotImplementedError('dropout in training mode is random; hidet compiles inference graphs: call '
                                  'model.eval() first')
    return input


# ---------------------------------------------------------------- normalization
@register_function(*_targets('layer_norm'))
def layer_norm(input: Tensor, normalized_shape, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps=1e-5, cudnn_enable=None):
    return ops.layer_norm(input, dims_arg(normalized_shape), weight, bias, eps)


@register_function(*_targets('group_norm'))
def group_norm(input: Tensor, num_groups, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps=1e-5,
               cudnn_enabled=None):
    return ops.group_norm(input, num_groups, weight, bias, eps)


@register_function(*_targets('rms_norm'))
def rms_norm(input: Tensor, normalized_shape, weight: Optional[Tensor] = None, eps=None):
    return ops.rms_norm(input, dims_arg(normalized_shape), weight, eps)


@register_function(*_targets('batch_norm'))
def batch_norm(input: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, training=False, momentum=0.1,
               eps=1e-5, cudnn_enabled=None):
    if training and running_mean is not None:
        # (declined: with fallback_to_eager the node runs in torch, which updates the buffers; else this error)
        raise NotImplementedError(
            'batch_norm in training mode updates running_mean and running_var in place, which hidet does not do '
            '(it compiles inference graphs): call model.eval() before compiling, or enable '
            'hidet.torch.dynamo_config.fallback_to_eager(True) to run it in torch')
    if training or running_mean is None:  # statistics of the batch itself
        axes = [d for d in range(input.ndim) if d != 1]
        x = as_float(input)
        mean = ops.mean(x, axes, keepdim=True)
        centered = ops.subtract(x, mean)
        var = ops.mean(ops.multiply(centered, centered), axes, keepdim=True)
        y = ops.multiply(centered, ops.rsqrt(ops.add(var, eps)))
        shape = [1, input.shape[1]] + [1] * (input.ndim - 2)
        if weight is not None:
            y = ops.multiply(y, ops.reshape(weight, shape))
        if bias is not None:
            y = ops.add(y, ops.reshape(bias, shape))
        return ops.cast(y, input.dtype)
    return ops.batch_norm(input, running_mean, running_var, weight, bias, eps)


@register_function(*_targets('instance_norm'))
def instance_norm(input: Tensor, running_mean=None, running_var=None, weight: Optional[Tensor] = None,
                  bias: Optional[Tensor] = None, use_input_stats=True, momentum=0.1, eps=1e-5, cudnn_enabled=None):
    return ops.group_norm(input, input.shape[1], weight, bias, eps)


@register_function(F.normalize)
def normalize(input: Tensor, p=2.0, dim=1, eps=1e-12, out=None):
    return ops.divide(input, ops.maximum(norm(input, p, dim, keepdim=True), eps))


@register_function(*_targets('local_response_norm'))
def local_response_norm(input: Tensor, size: int, alpha=1e-4, beta=0.75, k=1.0):
    return ops.local_response_norm(input, size, alpha, beta, k)


# ---------------------------------------------------------------- pooling
def _images(pool2d, input: Tensor, *args):
    """``pool2d`` of [N, C, H, W], or of an unbatched [C, H, W] as a batch of one (as torch)."""
    if input.ndim == 3:
        return ops.squeeze(pool2d(ops.unsqueeze(input, [0]), *args), [0])
    return pool2d(input, *args)


def _stride(stride, kernel, n: int):
    return kernel if stride is None or (isinstance(stride, (list, tuple)) and not stride) else pair(stride, n)


def _with_indices(values: Tensor, input: Tensor, nd: int, indices_of):
    """(values, indices) of a max pooling over ``nd`` spatial dims of a batched or unbatched input: the indices,
    int64, flat over each (spatial) plane of the input, as torch's return_indices=True."""
    if input.ndim == nd + 1:  # unbatched
        x, y = ops.unsqueeze(input, [0]), ops.unsqueeze(values, [0])
        return values, ops.squeeze(indices_of(x, y), [0])
    return values, indices_of(input, values)


@register_function(F.max_pool2d, torch.max_pool2d)
def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    kernel = pair(kernel_size)
    stride = _stride(stride, kernel, 2)
    y = _images(ops.max_pool2d, input, kernel, stride, pair(padding), pair(dilation), ceil_mode)
    if not return_indices:
        return y
    return _with_indices(y, input, 2, lambda x4, y4: ops.max_pool_indices(x4, y4, kernel, stride, pair(padding),
                                                                          pair(dilation)))


@register_function(*_targets('max_pool2d_with_indices'))
def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


@register_function(*_targets('avg_pool2d'))
def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    stride = None if stride is None or (isinstance(stride, (list, tuple)) and not stride) else pair(stride)
    kernel = pair(kernel_size)
    if divisor_override is not None:
        # the window's sum over the divisor: the average counting padding, times the window's area (every window
        # lies inside the padded input without ceil_mode)
        if ceil_mode:
            raise NotImplementedError('avg_pool2d with divisor_override and ceil_mode=True is not supported; '
                                      'pass ceil_mode=False or pad the input first')
        mean = _images(ops.avg_pool2d, input, kernel, stride, pair(padding), False, True)
        return ops.multiply(mean, float(kernel[0] * kernel[1]) / float(divisor_override))
    return _images(ops.avg_pool2d, input, kernel, stride, pair(padding), ceil_mode, count_include_pad)


@register_function(*_targets('adaptive_avg_pool2d'))
def adaptive_avg_pool2d(input: Tensor, output_size):
    return _images(ops.adaptive_avg_pool2d, input, output_size)


@register_function(F.adaptive_max_pool2d, torch.adaptive_max_pool2d if hasattr(torch, 'adaptive_max_pool2d')
                   else F.adaptive_max_pool2d)
def adaptive_max_pool2d(input: Tensor, output_size, return_indices=False):
    y = _images(ops.adaptive_max_pool2d, input, output_size)
    return _with_indices(y, input, 2, ops.adaptive_max_pool_indices) if return_indices else y


@register_function(*_targets('adaptive_max_pool2d_with_indices'))
def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices=True):
    return adaptive_max_pool2d(input, output_size, True)


def _as_2d(pool2d, input: Tensor, *args):
    """A 1-D pooling of [..., L] as the 2-D one of [..., 1, L] (and its indices: over (1, L), the same)."""
    out = pool2d(ops.unsqueeze(input, [-2]), *args)
    if isinstance(out, tuple):
        return tuple(ops.squeeze(t, [-2]) for t in out)
    return ops.squeeze(out, [-2])


def _pool3d(pool2d, input: Tensor, kernel, stride, padding, depth_args: tuple, plane_args: tuple):
    """A 3-D pooling of [N, C, D, H, W] (or unbatched [C, D, H, W]) as two 2-D ones: over (H, W) on
    [N, C * D, H, W], then over D on [N * C, 1, D, H' * W']. Max and average pooling are separable over a box
    window: padding and ceil_mode act per dimension, and the count of valid elements is the product of the
    counts per dimension."""
    if input.ndim == 4:
        return ops.squeeze(_pool3d(pool2d, ops.unsqueeze(input, [0]), kernel, stride, padding, depth_args,
                                   plane_args), [0])
    if input.ndim != 5:
        raise ValueError(f'3-D pooling expects a 4-D or 5-D input, got {list(input.shape)}')
    n, c, d, h, w = input.shape
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw) = kernel, stride, padding
    planes = pool2d(ops.reshape(input, [n, c * d, h, w]), [kh, kw], [sh, sw], [ph, pw], *plane_args)
    h2, w2 = planes.shape[2:]
    depth = pool2d(ops.reshape(planes, [n * c, 1, d, h2 * w2]), [kd, 1], [sd, 1], [pd, 0], *depth_args)
    return ops.reshape(depth, [n, c, depth.shape[2], h2, w2])


@register_function(*_targets('max_pool3d'))
def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    kernel = pair(kernel_size, 3)
    stride = _stride(stride, kernel, 3)
    dd, dh, dw = pair(dilation, 3)
    y = _pool3d(ops.max_pool2d, input, kernel, stride, pair(padding, 3), ([dd, 1], ceil_mode), ([dh, dw], ceil_mode))
    if not return_indices:
        return y
    return _with_indices(y, input, 3, lambda x5, y5: ops.max_pool_indices(x5, y5, kernel, stride, pair(padding, 3),
                                                                          pair(dilation, 3)))


@register_function(*_targets('max_pool3d_with_indices'))
def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


@register_function(*_targets('avg_pool3d'))
def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if divisor_override is not None:
        raise NotImplementedError('avg_pool3d with divisor_override is not supported')
    kernel = pair(kernel_size, 3)
    stride = kernel if stride is None or (isinstance(stride, (list, tuple)) and not stride) else pair(stride, 3)
    return _pool3d(ops.avg_pool2d, input, kernel, stride, pair(padding, 3), (ceil_mode, count_include_pad),
                   (ceil_mode, count_include_pad))


@register_function(*_targets('max_pool1d'))
def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    stride = None if stride is None or (isinstance(stride, (list, tuple)) and not stride) else [1, pair(stride, 1)[0]]
    return _as_2d(max_pool2d, input, [1, pair(kernel_size, 1)[0]], stride, [0, pair(padding, 1)[0]],
                  [1, pair(dilation, 1)[0]], ceil_mode, return_indices)


@register_function(*_targets('avg_pool1d'))
def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    stride = None if stride is None or (isinstance(stride, (list, tuple)) and not stride) else [1, pair(stride, 1)[0]]
    return _as_2d(avg_pool2d, input, [1, pair(kernel_size, 1)[0]], stride, [0, pair(padding, 1)[0]], ceil_mode,
                  count_include_pad)


@register_function(*_targets('max_pool1d_with_indices'))
def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


@register_function(*_targets('adaptive_max_pool1d'))
def adaptive_max_pool1d(input: Tensor, output_size, return_indices=False):
    return _as_2d(adaptive_max_pool2d, input, [1, pair(output_size, 1)[0]], return_indices)


@register_function(*_targets('adaptive_max_pool1d_with_indices'))
def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices=True):
    return adaptive_max_pool1d(input, output_size, True)


@register_function(*_targets('adaptive_avg_pool1d'))
def adaptive_avg_pool1d(input: Tensor, output_size):
    return _as_2d(adaptive_avg_pool2d, input, [1, pair(output_size, 1)[0]])


# ---------------------------------------------------------------- embedding, resizing, padding
@register_function(F.embedding, torch.embedding)
def embedding(input: Tensor, weight: Tensor, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise NotImplementedError('embedding with max_norm is not supported')
    return ops.embedding(input, weight)


@register_function(F.interpolate, F.upsample if hasattr(F, 'upsample') else F.interpolate)
def interpolate(input: Tensor, size=None, scale_factor=None, mode='nearest', align_corners=None,
                recompute_scale_factor=None, antialias=False):
    if input.ndim != 4 or mode not in ('nearest', 'bilinear', 'bicubic') or antialias:
        raise NotImplementedError(f'interpolate: only 4-D nearest/bilinear/bicubic resizing without antialias is '
                                  f'supported (mode={mode!r}, {input.ndim}-D input)')
    return ops.resize2d(input, size, scale_factor, mode, align_corners, recompute_scale_factor)


@register_function(*_targets('pad', spaces=(F, torch._C._nn)))
def pad(input: Tensor, pad, mode='constant', value=None):
    return ops.pad(input, list(pad), mode, 0 if value is None else value)


# ---------------------------------------------------------------- attention
@register_function(*_targets('scaled_dot_product_attention'))
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if enable_gqa and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key, value = repeat_interleave(key, groups, -3), repeat_interleave(value, groups, -3)
    if attn_mask is not None and not attn_mask.dtype.is_float() and attn_mask.dtype.name != 'bool':
        attn_mask = ops.cast(attn_mask, 'bool')
    return ops.scaled_dot_product_attention(query, key, value, attn_mask, bool(is_causal), scale)


def _attention(q, k, v, num_heads, mask, need_weights, average_weights):
    """q [B, L, E], k/v [B, S, E] (projected) → output [B, L, E] and weights ([B, L, S] or per head)."""
    b, l_, e = q.shape
    s = k.shape[1]
    hd = e // num_heads

    def heads(t, n):
        return ops.transpose(ops.reshape(t, [b, n, num_heads, hd]), 1, 2)

    qh, kh, vh = heads(q, l_), heads(k, s), heads(v, s)
    if mask is not None and mask.ndim == 3:  # [B * heads, L, S]
        mask = ops.reshape(mask, [b, num_heads, l_, s])
    if not need_weights:
        out = ops.scaled_dot_product_attention(qh, kh, vh, mask)
        weights = None
    else:
        scores = ops.multiply(ops.matmul(qh, ops.transpose(kh, -1, -2)), 1.0 / math.sqrt(hd))
        if mask is not None:
            scores = ops.where(mask, scores, float('-inf')) if mask.dtype.name == 'bool' else ops.add(scores, mask)
        weights = ops.softmax(scores, -1)
        out = ops.matmul(weights, vh)
        if average_weights:
            weights = ops.mean(weights, [1])
    return ops.reshape(ops.transpose(out, 1, 2), [b, l_, e]), weights


def _merge_masks(attn_mask, key_padding_mask, b: int, num_heads: int, l_: int, s: int):
    """attn_mask [L, S] / [B*heads, L, S] and key_padding_mask [B, S] (True = ignore) as one additive or
    keep-where-True boolean mask broadcastable to [B, heads, L, S]."""
    masks = []
    for m, is_padding in ((attn_mask, False), (key_padding_mask, True)):
        if m is None:
            continue
        if is_padding:
            m = ops.reshape(m, [b, 1, 1, s])
        elif m.ndim == 3:
            m = ops.reshape(m, [b, num_heads, l_, s])
        if m.dtype.name == 'bool':  # torch's MHA masks are True where attention is NOT allowed
            m = ops.where(m, float('-inf'), 0.0)
        masks.append(m)
    if not masks:
        return None
    return masks[0] if len(masks) == 1 else ops.add(masks[0], masks[1])


@register_function(F.multi_head_attention_forward)
def multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check, num_heads,
                                 in_proj_weight: Optional[Tensor], in_proj_bias: Optional[Tensor],
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight: Tensor,
                                 out_proj_bias: Optional[Tensor], training=True, key_padding_mask=None,
                                 need_weights=True, attn_mask=None, use_separate_proj_weight=False,
                                 q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    if bias_k is not None or bias_v is not None or add_zero_attn or static_k is not None or static_v is not None:
        raise NotImplementedError('multi_head_attention_forward: bias_k/bias_v, add_zero_attn and static_k/v are '
                                  'not supported')
    if training and dropout_p > 0:
        raise NotImplementedError('multi_head_attention_forward in training mode (dropout) is not supported')
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = (ops.unsqueeze(t, [1]) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = ops.unsqueeze(key_padding_mask, [0])
    # (L, B, E) → (B, L, E)
    q, k, v = (ops.transpose(t, 0, 1) for t in (query, key, value))
    e = q.shape[-1]
    if use_separate_proj_weight:
        ws = [q_proj_weight, k_proj_weight, v_proj_weight]
    else:
        ws = list(ops.split(in_proj_weight, e, 0))
    bs = list(ops.split(in_proj_bias, e, 0)) if in_proj_bias is not None else [None] * 3
    q, k, v = (linear(t, w, bb) for t, w, bb in zip((q, k, v), ws, bs))
    b, l_, s = q.shape[0], q.shape[1], k.shape[1]
    mask = _merge_masks(attn_mask, key_padding_mask, b, num_heads, l_, s)
    if is_causal and mask is None:
        raise NotImplementedError('multi_head_attention_forward: is_causal needs an attn_mask, as torch requires')
    out, weights = _attention(q, k, v, num_heads, mask, need_weights, average_attn_weights)
    out = ops.transpose(linear(out, out_proj_weight, out_proj_bias), 0, 1)  # back to (L, B, E)
    if unbatched:
        out = ops.squeeze(out, [1])
        weights = ops.squeeze(weights, [0]) if weights is not None else None
    return out, weights


if hasattr(torch, '_native_multi_head_attention'):
    @register_function(torch._native_multi_head_attention)
    def native_multi_head_attention(query: Tensor, key: Tensor, value: Tensor, embed_dim, num_head,
                                    qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor,
                                    proj_bias: Tensor, mask=None, need_weights=True, average_attn_weights=True,
                                    mask_type=None):
        # batch-first (B, L, E) inputs; mask_type 1: key padding mask [B, S], 0/2: attention mask
        e = query.shape[-1]
        ws, bs = ops.split(qkv_weight, e, 0), ops.split(qkv_bias, e, 0)
        q, k, v = (linear(t, w, bb) for t, w, bb in zip((query, key, value), ws, bs))
        b, l_, s = q.shape[0], q.shape[1], k.shape[1]
        padding = mask if mask_type == 1 else None
        attn = mask if mask_type != 1 else None
        merged = _merge_masks(attn, padding, b, num_head, l_, s) if mask is not None else None
        out, weights = _attention(q, k, v, num_head, merged, need_weights, average_attn_weights)
        return linear(out, proj_weight, proj_bias), weights


if hasattr(torch, '_transformer_encoder_layer_fwd'):
    @register_function(torch._transformer_encoder_layer_fwd)
    def transformer_encoder_layer_fwd(src: Tensor, embed_dim, num_heads, qkv_weight: Tensor, qkv_bias: Tensor,
                                      proj_weight: Tensor, proj_bias: Tensor, use_gelu, norm_first, eps,
                                      norm_weight_1: Tensor, norm_bias_1: Tensor, norm_weight_2: Tensor,
                                      norm_bias_2: Tensor, ffn_weight_1: Tensor, ffn_bias_1: Tensor,
                                      ffn_weight_2: Tensor, ffn_bias_2: Tensor, mask=None, mask_type=None):
        """nn.TransformerEncoderLayer's fused inference path (eval mode without gradients; batch-first): self-
        attention and a ReLU or GELU feed-forward block, each added to its input, layer-normed after (or, with
        norm_first, before) it, as ATen's transformer_encoder_layer_forward."""
        def norm1(t):
            return layer_norm(t, [embed_dim], norm_weight_1, norm_bias_1, eps)

        def norm2(t):
            return layer_norm(t, [embed_dim], norm_weight_2, norm_bias_2, eps)

        x = norm1(src) if norm_first else src
        x = native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                        proj_bias, mask, False, True, mask_type)[0]
        x = ops.add(x, src)
        if not norm_first:
            x = norm1(x)
        residual = x
        x = norm2(x) if norm_first else x
        hidden = linear(x, ffn_weight_1, ffn_bias_1)
        hidden = ops.gelu(hidden) if use_gelu else ops.relu(hidden)
        x = ops.add(linear(hidden, ffn_weight_2, ffn_bias_2), residual)
        return x if norm_first else norm2(x)


# ---------------------------------------------------------------- sampling
@register_function(F.grid_sample)
def grid_sample(input: Tensor, grid: Tensor, mode='bilinear', padding_mode='zeros', align_corners=None):
    return ops.grid_sample(input, grid, mode, padding_mode, bool(align_corners))


@register_function(F.affine_grid)
def affine_grid(theta: Tensor, size, align_corners=None):
    if len(size) != 4:
        raise NotImplementedError(f'F.affine_grid: only 2-D grids (size [N, C, H, W]) are supported, got {list(size)}')
    return ops.affine_grid(theta, size, bool(align_corners))
