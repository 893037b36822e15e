"""Neural-network ONNX operators: convolutions, Gemm/MatMul, normalizations, softmax, pooling, Dropout."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from hidet.graph import ops
from hidet.frontend.onnx.registry import REQUIRED, register
from hidet.graph.tensor import Tensor, _numel

_AUTO_PADS = ('NOTSET', 'SAME_UPPER', 'SAME_LOWER', 'VALID')


def _check_auto_pad(a) -> Optional[str]:
    return None if a.get('auto_pad', 'NOTSET') in _AUTO_PADS else f"auto_pad={a['auto_pad']!r}"


def _window(ctx, spatial: List[int], kernel: List[int], strides, dilations, ceil_mode=False) -> List[int]:
    """ONNX pads [begin..., end...] for the node's auto_pad / pads attributes."""
    nd = len(spatial)
    auto = ctx.attrs.get('auto_pad', 'NOTSET')
    pads = list(ctx.attrs.get('pads') or [0] * (2 * nd))
    if auto == 'VALID':
        return [0] * (2 * nd)
    if auto in ('SAME_UPPER', 'SAME_LOWER'):
        pads = [0] * (2 * nd)
        for i in range(nd):
            out = -(-spatial[i] // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - spatial[i], 0)
            small = total // 2
            pads[i], pads[i + nd] = (small, total - small) if auto == 'SAME_UPPER' else (total - small, small)
    return pads


def _torch_pads(pads: List[int]) -> List[int]:
    """ONNX [b0, b1, …, e0, e1, …] → torch's (b_last, e_last, …, b0, e0) for ops.pad over the trailing dims."""
    nd = len(pads) // 2
    out = []
    for i in reversed(range(nd)):
        out += [pads[i], pads[i + nd]]
    return out


# ---------------------------------------------------------------- convolution
_CONV_ATTRS = {'auto_pad': 'NOTSET', 'dilations': None, 'group': 1, 'kernel_shape': None, 'pads': None,
               'strides': None}


def _conv_rank_check(a) -> Optional[str]:
    why = _check_auto_pad(a)
    if why:
        return why
    if a['kernel_shape'] is not None and len(a['kernel_shape']) not in (1, 2):
        return f"{len(a['kernel_shape'])}-D kernel_shape (1-D and 2-D are supported)"
    return None


@register('Conv', attrs=_CONV_ATTRS, check=_conv_rank_check)
def conv(ctx, x, w, b=None):
    x, w = ctx.tensor(x), ctx.tensor(w)
    nd = x.ndim - 2
    if nd not in (1, 2):
        raise NotImplementedError(f'{nd}-D convolution is not supported (1-D and 2-D are)')
    kernel = list(w.shape[2:])
    strides = list(ctx.attrs['strides'] or [1] * nd)
    dilations = list(ctx.attrs['dilations'] or [1] * nd)
    pads = _window(ctx, list(x.shape[2:]), kernel, strides, dilations)
    if pads[:nd] != pads[nd:]:
        x = ops.pad(x, _torch_pads(pads))
        pads = [0] * (2 * nd)
    fn = ops.conv1d if nd == 1 else ops.conv2d
    return fn(x, w, ctx.tensor(b) if b is not None else None, stride=strides, padding=pads[:nd], dilation=dilations,
              groups=ctx.attrs['group'])


@register('ConvTranspose', attrs=dict(_CONV_ATTRS, output_padding=None, output_shape=None), check=_conv_rank_check)
def conv_transpose(ctx, x, w, b=None):
    x, w = ctx.tensor(x), ctx.tensor(w)
    nd = x.ndim - 2
    if nd not in (1, 2):
        raise NotImplementedError(f'{nd}-D transposed convolution is not supported (1-D and 2-D are)')
    if nd == 1:  # as 2-D with a unit height
        x, w = ops.unsqueeze(x, [2]), ops.unsqueeze(w, [2])
    spatial, kernel = list(x.shape[2:]), list(w.shape[2:])
    a = ctx.attrs

    def attr(name, default, fill=None):
        v = a[name]
        if v is None:
            return [default] * 2
        v = list(v)
        return [fill if fill is not None else default] + v if nd == 1 else v

    strides, dilations = attr('strides', 1, 1), attr('dilations', 1, 1)
    out_pad = attr('output_padding', 0, 0)
    full = [(spatial[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 for i in range(2)]
    if a['output_shape'] is not None:
        target = ([1] if nd == 1 else []) + list(a['output_shape'])[-nd:]
        pads = [0] * 4
        for i in range(2):
            total = full[i] + out_pad[i] - target[i]
            small = total // 2
            upper = a['auto_pad'] == 'SAME_UPPER'
            pads[i], pads[i + 2] = (small, total - small) if upper else (total - small, small)
    elif a['auto_pad'] in ('SAME_UPPER', 'SAME_LOWER'):
        pads = [0] * 4
        for i in range(2):
            total = max(full[i] + out_pad[i] - spatial[i] * strides[i], 0)
            small = total // 2
            pads[i], pads[i + 2] = (small, total - small) if a['auto_pad'] == 'SAME_UPPER' else (total - small, small)
    elif a['auto_pad'] == 'VALID' or a['pads'] is None:
        pads = [0] * 4
    else:
        p = list(a['pads'])
        pads = [0, p[0], 0, p[1]] if nd == 1 else p
    groups = a['group']
    if pads[:2] == pads[2:] and all(o < max(s, d) for o, s, d in zip(out_pad, strides, dilations)):
        y = ops.conv_transpose2d(x, w, None, stride=strides, padding=pads[:2], output_padding=out_pad,
                                 groups=groups, dilation=dilations)
    else:  # full result, then crop the pads (and extend by output_padding) explicitly
        y = ops.conv_transpose2d(x, w, None, stride=strides, padding=0, groups=groups, dilation=dilations)
        crop = []
        for i in reversed(range(2)):
            crop += [-pads[i], out_pad[i] - pads[i + 2]]
        if any(crop):
            y = ops.pad(y, crop)
    if b is not None:
        y = ops.add(y, ops.reshape(ctx.tensor(b), [-1, 1, 1]))
    return ops.squeeze(y, [2]) if nd == 1 else y


# ---------------------------------------------------------------- matmul
@register('MatMul')
def matmul(ctx, a, b):
    return ops.matmul(ctx.tensor(a), ctx.tensor(b))


@register('Gemm', attrs={'alpha': 1.0, 'beta': 1.0, 'transA': 0, 'transB': 0})
def gemm(ctx, a, b, c=None):
    at = ctx.attrs

    def operand(v, trans):
        if isinstance(v, np.ndarray):
            return ctx.tensor(np.ascontiguousarray(v.T) if trans else v)
        return ops.transpose(v, 0, 1) if trans else v

    y = ops.matmul(operand(a, at['transA']), operand(b, at['transB']))
    if at['alpha'] != 1.0:
        y = ops.multiply(y, at['alpha'])
    if c is not None and at['beta'] != 0.0:
        if isinstance(c, np.ndarray):
            c = ctx.tensor((c * at['beta']).astype(c.dtype)) if at['beta'] != 1.0 else ctx.tensor(c)
        elif at['beta'] != 1.0:
            c = ops.multiply(c, at['beta'])
        y = ops.add(y, c)
    return y


# ---------------------------------------------------------------- normalization
@register('BatchNormalization', attrs={'epsilon': 1e-5, 'momentum': 0.9, 'training_mode': 0},
          check=lambda a: 'training_mode=1' if a['training_mode'] else None, outputs=1)
def batch_norm(ctx, x, scale, bias, mean, var):
    return ops.batch_norm(ctx.tensor(x), ctx.tensor(mean), ctx.tensor(var), ctx.tensor(scale), ctx.tensor(bias),
                          eps=ctx.attrs['epsilon'])


def _moments(x: Tensor, axes: List[int], eps: float):
    xf = ops.cast(x, 'float32') if x.dtype.name in ('float16', 'bfloat16') else x
    mean = ops.mean(xf, axes, keepdim=True)
    centered = ops.subtract(xf, mean)
    var = ops.mean(ops.multiply(centered, centered), axes, keepdim=True)
    inv_std = ops.rsqrt(ops.add(var, eps))
    return centered, mean, inv_std


def _channel(p: Tensor, ndim: int) -> Tensor:
    return ops.reshape(p, [-1] + [1] * (ndim - 2))


@register('InstanceNormalization', attrs={'epsilon': 1e-5})
def instance_norm(ctx, x, scale, bias):
    x = ctx.tensor(x)
    centered, _, inv_std = _moments(x, list(range(2, x.ndim)), ctx.attrs['epsilon'])
    y = ops.multiply(ops.multiply(centered, inv_std), _channel(ctx.tensor(scale), x.ndim))
    y = ops.add(y, _channel(ctx.tensor(bias), x.ndim))
    return ops.cast(y, x.dtype)


@register('LayerNormalization', since=17, attrs={'axis': -1, 'epsilon': 1e-5, 'stash_type': 1})
def layer_norm(ctx, x, scale, bias=None):
    x = ctx.tensor(x)
    axis = ctx.attrs['axis'] % x.ndim
    eps = ctx.attrs['epsilon']
    w, b = ctx.tensor(scale), (ctx.tensor(bias) if bias is not None else None)
    if not ctx.wants_output(1) and not ctx.wants_output(2):
        return ops.layer_norm(x, list(x.shape[axis:]), w, b, eps=eps)
    centered, mean, inv_std = _moments(x, list(range(axis, x.ndim)), eps)
    y = ops.multiply(ops.multiply(centered, inv_std), w)
    if b is not None:
        y = ops.add(y, b)
    return [ops.cast(y, x.dtype), mean, inv_std]


@register('RMSNormalization', since=23, attrs={'axis': -1, 'epsilon': 1e-5, 'stash_type': 1})
def rms_norm(ctx, x, scale):
    x = ctx.tensor(x)
    axis = ctx.attrs['axis'] % x.ndim
    xf = ops.cast(x, 'float32') if x.dtype.name in ('float16', 'bfloat16') else x
    ms = ops.mean(ops.multiply(xf, xf), list(range(axis, x.ndim)), keepdim=True)
    y = ops.multiply(ops.multiply(xf, ops.rsqrt(ops.add(ms, ctx.attrs['epsilon']))), ctx.tensor(scale))
    return ops.cast(y, x.dtype)


@register('GroupNormalization', since=21, attrs={'epsilon': 1e-5, 'num_groups': None, 'stash_type': 1})
def group_norm(ctx, x, scale, bias):
    x = ctx.tensor(x)
    g = ctx.attrs['num_groups']
    grouped = ops.reshape(x, [x.shape[0], g, -1])
    centered, _, inv_std = _moments(grouped, [2], ctx.attrs['epsilon'])
    y = ops.reshape(ops.multiply(centered, inv_std), list(x.shape))
    y = ops.add(ops.multiply(y, _channel(ctx.tensor(scale), x.ndim)), _channel(ctx.tensor(bias), x.ndim))
    return ops.cast(y, x.dtype)


@register('LpNormalization', attrs={'axis': -1, 'p': 2}, check=lambda a: None if a['p'] in (1, 2) else f"p={a['p']}")
def lp_norm(ctx, x):
    x = ctx.tensor(x)
    axis = ctx.attrs['axis']
    norm = ops.sum(ops.abs(x), [axis], keepdim=True) if ctx.attrs['p'] == 1 else \
        ops.sqrt(ops.sum(ops.multiply(x, x), [axis], keepdim=True))
    return ops.where(ops.equal(norm, 0), 0.0, ops.divide(x, norm))


@register(['Softmax', 'LogSoftmax'], attrs={'axis': -1})
def softmax(ctx, x):
    fn = ops.softmax if ctx.node.op_type == 'Softmax' else ops.log_softmax
    return fn(ctx.tensor(x), ctx.attrs['axis'])


@register('Hardmax', attrs={'axis': -1})
def hardmax(ctx, x):
    x = ctx.tensor(x)
    axis = ctx.attrs['axis'] % x.ndim
    idx = ops.argmax(x, axis, keepdim=True)
    pos = ops.reshape(ops.cast(_arange(ctx, x.shape[axis]), idx.dtype), [-1] + [1] * (x.ndim - 1 - axis))
    return ops.cast(ops.equal(idx, pos), x.dtype)


def _arange(ctx, n: int) -> Tensor:
    return ctx.tensor(np.arange(n, dtype=np.int64))


@register('Dropout', attrs={'seed': 0})
def dropout(ctx, x, ratio=None, training_mode=None):
    if training_mode is not None and ctx.is_static(training_mode) and bool(ctx.scalar(training_mode, 'training_mode')):
        raise NotImplementedError('Dropout in training mode is not supported (inference only)')
    x = ctx.tensor(x)
    if ctx.wants_output(1):
        return [x, ctx.tensor(np.ones(x.shape, dtype=np.bool_))]
    return x


# ---------------------------------------------------------------- pooling
_POOL_ATTRS = {'auto_pad': 'NOTSET', 'ceil_mode': 0, 'dilations': None, 'kernel_shape': None, 'pads': None,
               'strides': None}


def _pool_check(a) -> Optional[str]:
    why = _check_auto_pad(a)
    if why:
        return why
    if a['kernel_shape'] is None:
        return "missing attribute 'kernel_shape'"
    if len(a['kernel_shape']) not in (1, 2):
        return f"{len(a['kernel_shape'])}-D kernel_shape (1-D and 2-D are supported)"
    if a.get('storage_order'):
        return 'storage_order=1'
    if 'count_include_pad' in a and a['dilations'] and any(d != 1 for d in a['dilations']):
        return f"dilations={list(a['dilations'])}"
    return None


def _pool(ctx, x, kind: str):
    x = ctx.tensor(x)
    a = ctx.attrs
    nd = len(a['kernel_shape'])
    kernel = list(a['kernel_shape'])
    strides = list(a['strides'] or [1] * nd)
    dilations = list(a['dilations'] or [1] * nd)
    pads = _window(ctx, list(x.shape[2:]), kernel, strides, dilations)
    if nd == 1:  # as 2-D with a unit height
        x = ops.unsqueeze(x, [2])
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        pads = [0, pads[0], 0, pads[1]]
    ceil = bool(a['ceil_mode'])
    include = bool(a.get('count_include_pad', 0))
    symmetric = pads[:2] == pads[2:] and all(2 * p <= k for p, k in zip(pads[:2], kernel))
    if kind == 'max':
        if not symmetric:
            x = ops.pad(x, _torch_pads(pads), value=float('-inf') if x.dtype.is_float() else int(np.iinfo(
                x.dtype.np_dtype).min))
            pads = [0] * 4
        y = ops.max_pool2d(x, kernel, strides, pads[:2], dilations, ceil_mode=ceil)
    elif symmetric:
        y = ops.avg_pool2d(x, kernel, strides, pads[:2], ceil_mode=ceil, count_include_pad=include)
    else:
        padded = ops.pad(x, _torch_pads(pads))
        y = ops.avg_pool2d(padded, kernel, strides, 0, ceil_mode=ceil, count_include_pad=True)
        if not include:  # rescale by the share of each window inside the input
            ones = ctx.tensor(np.ones([1, 1] + list(x.shape[2:]), dtype=x.dtype.np_dtype))
            share = ops.avg_pool2d(ops.pad(ones, _torch_pads(pads)), kernel, strides, 0, ceil_mode=ceil,
                                   count_include_pad=True)
            y = ops.divide(y, share)
    return ops.squeeze(y, [2]) if nd == 1 else y


@register('MaxPool', attrs=dict(_POOL_ATTRS, storage_order=0), check=_pool_check, outputs=1)
def max_pool(ctx, x):
    return _pool(ctx, x, 'max')


@register('AveragePool', attrs=dict(_POOL_ATTRS, count_include_pad=0), check=_pool_check)
def avg_pool(ctx, x):
    return _pool(ctx, x, 'avg')


@register(['GlobalAveragePool', 'GlobalMaxPool'])
def global_pool(ctx, x):
    x = ctx.tensor(x)
    axes = list(range(2, x.ndim))
    if ctx.node.op_type == 'GlobalMaxPool':
        return ops.max(x, axes, keepdim=True)
    return ops.mean(x, axes, keepdim=True)


# ---------------------------------------------------------------- losses
_REDUCTIONS = ('none', 'sum', 'mean')


def _check_loss(a):
    return None if a['reduction'] in _REDUCTIONS else f"reduction={a['reduction']!r}"


def _nll(ctx, log_prob, target, weight):
    """ONNX NegativeLogLikelihoodLoss of log-probabilities [N, C, d...] and classes [N, d...]."""
    target = ctx.tensor(target)
    ignore = ctx.attrs['ignore_index']
    kept = ops.not_equal(target, ignore) if ignore is not None else None
    cls = ops.where(kept, target, 0) if kept is not None else target  # (an ignored class may lie out of range)
    picked = ops.squeeze(ops.gather(log_prob, 1, ops.unsqueeze(cls, [1])), [1])
    w = ops.take(ctx.tensor(weight), cls, 0) if weight is not None else None
    if kept is not None:
        w = ops.where(kept, w, 0.0) if w is not None else ops.cast(kept, log_prob.dtype)
    loss = ops.neg(ops.multiply(picked, w) if w is not None else picked)
    reduction = ctx.attrs['reduction']
    if reduction == 'none':
        return loss
    total = ops.sum(loss)
    if reduction == 'sum':
        return total
    return ops.divide(total, ops.sum(w)) if w is not None else ops.divide(total, float(_numel(target.shape)))


@register('NegativeLogLikelihoodLoss', attrs={'reduction': 'mean', 'ignore_index': None}, check=_check_loss)
def negative_log_likelihood_loss(ctx, input, target, weight=None):
    return _nll(ctx, ctx.tensor(input), target, weight)


@register('SoftmaxCrossEntropyLoss', attrs={'reduction': 'mean', 'ignore_index': None}, check=_check_loss)
def softmax_cross_entropy_loss(ctx, scores, labels, weights=None):
    """The NLL of log_softmax(scores) over dimension 1; the log-probabilities are the optional second output."""
    log_prob = ops.log_softmax(ctx.tensor(scores), 1)
    return [_nll(ctx, log_prob, labels, weights), log_prob]


@register('LRN', attrs={'alpha': 1e-4, 'beta': 0.75, 'bias': 1.0, 'size': REQUIRED})
def lrn(ctx, x):
    """x / (bias + alpha / size · Σ x² over the size channels around each)^beta."""
    size = ctx.attrs['size']
    return ops.local_response_norm(ctx.tensor(x), size, ctx.attrs['alpha'], ctx.attrs['beta'], ctx.attrs['bias'],
                                   window=((size - 1) // 2, size // 2))
