"""Shape and data-movement ONNX operators: Shape/Size, Constant/ConstantOfShape/Range, Cast/CastLike,
Reshape/Flatten/Squeeze/Unsqueeze, Transpose, Expand, Concat/Split/Slice, Tile, Pad, Identity,
DepthToSpace/SpaceToDepth, Trilu.

Shapes, axes, pads and the like must be known at import time (``ctx.static``); they usually are,
since constant subgraphs are evaluated at import time (module.py)."""
from __future__ import annotations

import numpy as np

from hidet.graph import ops
from hidet.frontend.onnx.registry import REQUIRED, register
from hidet.frontend.onnx.utils import (OnnxConversionError, hidet_dtype, onnx_dtype_name, unsupported_dtype,
                                             value_dtype, value_shape)


def _check_to(a):
    return f"to={onnx_dtype_name(a['to'])}" if unsupported_dtype(a['to']) else None


# ---------------------------------------------------------------- values known at import time
@register('Shape', attrs={'start': 0, 'end': None})
def shape(ctx, x):
    dims = value_shape(x)
    end = ctx.attrs['end']
    return np.array(dims[ctx.attrs['start']:end], dtype=np.int64)


@register('Size')
def size(ctx, x):
    return np.array(int(np.prod(value_shape(x), dtype=np.int64)), dtype=np.int64)


def _constant_check(a):
    given = [k for k, v in a.items() if v is not None]
    if len(given) != 1:
        return f'{len(given)} value attributes (exactly one is needed)'
    if given[0] in ('sparse_value', 'value_string', 'value_strings'):
        return f"attribute '{given[0]}'"
    if given[0] == 'value' and a['value'].dtype.kind in 'OUS':
        return 'a string value'
    return None


@register('Constant', attrs={'value': None, 'value_float': None, 'value_floats': None, 'value_int': None,
                             'value_ints': None, 'sparse_value': None, 'value_string': None, 'value_strings': None},
          check=_constant_check)
def constant(ctx):
    a = ctx.attrs
    if a['value'] is not None:
        return np.asarray(a['value'])
    if a['value_float'] is not None:
        return np.array(a['value_float'], dtype=np.float32)
    if a['value_floats'] is not None:
        return np.array(a['value_floats'], dtype=np.float32)
    if a['value_int'] is not None:
        return np.array(a['value_int'], dtype=np.int64)
    return np.array(a['value_ints'], dtype=np.int64)


@register('ConstantOfShape', attrs={'value': None})
def constant_of_shape(ctx, shape):
    dims = ctx.static_ints(shape, 'shape')
    value = ctx.attrs['value']
    value = np.zeros([1], np.float32) if value is None else np.asarray(value)
    return np.full(dims, value.reshape(-1)[0], dtype=value.dtype)


@register('EyeLike', attrs={'dtype': None, 'k': 0})
def eye_like(ctx, x):
    shape = value_shape(x)
    if shape is None or len(shape) != 2:
        raise OnnxConversionError(f'EyeLike needs a 2-D input of known shape, got {shape}')
    dtype = value_dtype(x) if ctx.attrs['dtype'] is None else hidet_dtype(ctx.attrs['dtype'])
    return ctx.constant(np.eye(shape[0], shape[1], k=ctx.attrs['k']), dtype)


@register('Range')
def range_(ctx, start, limit, delta):
    s, l, d = (ctx.scalar(v, n) for v, n in ((start, 'start'), (limit, 'limit'), (delta, 'delta')))
    dtype = value_dtype(start)
    n = max(int(np.ceil((l - s) / d)), 0)
    values = s + np.arange(n) * d
    if dtype.name == 'bfloat16':  # (numpy has no bfloat16: a tensor)
        return ctx.constant(values, dtype)
    return values.astype(dtype.np_dtype)


# ---------------------------------------------------------------- casts
@register('Cast', attrs={'to': REQUIRED, 'saturate': 1, 'round_mode': 'up'}, check=_check_to)
def cast(ctx, x):
    return ops.cast(ctx.tensor(x), hidet_dtype(ctx.attrs['to']))


@register('CastLike', attrs={'saturate': 1, 'round_mode': 'up'})
def cast_like(ctx, x, like):
    return ops.cast(ctx.tensor(x), value_dtype(like))


@register('Identity')
def identity(ctx, x):
    return x


# ---------------------------------------------------------------- reshapes
@register('Reshape', attrs={'allowzero': 0})
def reshape(ctx, x, shape):
    x = ctx.tensor(x)
    dims = ctx.static_ints(shape, 'shape')
    if not ctx.attrs['allowzero']:
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return ops.reshape(x, dims)


@register('Flatten', attrs={'axis': 1})
def flatten(ctx, x):
    x = ctx.tensor(x)
    axis = ctx.attrs['axis'] + x.ndim if ctx.attrs['axis'] < 0 else ctx.attrs['axis']
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return ops.reshape(x, [outer, int(np.prod(x.shape[axis:], dtype=np.int64))])


@register('Squeeze')
def squeeze(ctx, x, axes=None):
    x = ctx.tensor(x)
    dims = ctx.static_ints(axes, 'axes')
    if dims is None:
        return ops.squeeze(x)
    dims = [d % x.ndim for d in dims]
    bad = [d for d in dims if x.shape[d] != 1]
    if bad:
        raise OnnxConversionError(f'Squeeze: axes {bad} of shape {x.shape} are not of size 1')
    return ops.reshape(x, [n for d, n in enumerate(x.shape) if d not in dims])


@register('Unsqueeze')
def unsqueeze(ctx, x, axes):
    return ops.unsqueeze(ctx.tensor(x), ctx.static_ints(axes, 'axes'))


@register('Transpose', attrs={'perm': None})
def transpose(ctx, x):
    x = ctx.tensor(x)
    perm = ctx.attrs['perm']
    perm = list(reversed(range(x.ndim))) if perm is None else list(perm)
    return x if perm == list(range(x.ndim)) else ops.permute(x, perm)


@register('Expand')
def expand(ctx, x, shape):
    x = ctx.tensor(x)
    dims = ctx.static_ints(shape, 'shape')
    nd = max(len(dims), x.ndim)
    a, b = [1] * (nd - x.ndim) + list(x.shape), [1] * (nd - len(dims)) + dims
    out = []
    for p, q in zip(a, b):
        if p != q and p != 1 and q != 1:
            raise OnnxConversionError(f'Expand: shape {x.shape} cannot be broadcast to {dims}')
        out.append(q if p == 1 else p)
    return x if tuple(out) == x.shape else ops.broadcast(x, out)


@register('DepthToSpace', attrs={'blocksize': REQUIRED, 'mode': 'DCR'},
          check=lambda a: None if a['mode'] in ('DCR', 'CRD') else f"mode={a['mode']!r}")
def depth_to_space(ctx, x):
    x = ctx.tensor(x)
    b = ctx.attrs['blocksize']
    n, c, h, w = x.shape
    if ctx.attrs['mode'] == 'DCR':
        y = ops.permute(ops.reshape(x, [n, b, b, c // (b * b), h, w]), [0, 3, 4, 1, 5, 2])
    else:
        y = ops.permute(ops.reshape(x, [n, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
    return ops.reshape(y, [n, c // (b * b), h * b, w * b])


@register('SpaceToDepth', attrs={'blocksize': REQUIRED})
def space_to_depth(ctx, x):
    x = ctx.tensor(x)
    b = ctx.attrs['blocksize']
    n, c, h, w = x.shape
    y = ops.permute(ops.reshape(x, [n, c, h // b, b, w // b, b]), [0, 3, 5, 1, 2, 4])
    return ops.reshape(y, [n, c * b * b, h // b, w // b])


# ---------------------------------------------------------------- concat, split, slice, tile, pad
@register('Concat', attrs={'axis': REQUIRED})
def concat(ctx, *xs):
    tensors = [ctx.tensor(x) for x in xs if x is not None]
    nonempty = [t for t in tensors if t.numel() > 0] or tensors[:1]
    if len(nonempty) == 1 and nonempty[0].ndim and _concat_shape(tensors, ctx.attrs['axis']) == nonempty[0].shape:
        return nonempty[0]
    return ops.concat(tensors, ctx.attrs['axis'])


def _concat_shape(tensors, axis):
    shape = list(tensors[0].shape)
    axis %= len(shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    return tuple(shape)


@register('Split', attrs={'axis': 0, 'num_outputs': None})
def split(ctx, x, sizes=None):
    x = ctx.tensor(x)
    axis = ctx.attrs['axis'] % x.ndim
    n = x.shape[axis]
    sizes = ctx.static_ints(sizes, 'split')
    if sizes is None:
        k = ctx.attrs['num_outputs'] or ctx.num_outputs
        chunk = -(-n // k)
        sizes = [min(chunk, n - i * chunk) for i in range(k)]
    return ops.split(x, sizes, axis)


@register('Slice')
def slice_(ctx, x, starts, ends, axes=None, steps=None):
    x = ctx.tensor(x)
    starts, ends = ctx.static_ints(starts, 'starts'), ctx.static_ints(ends, 'ends')
    axes = ctx.static_ints(axes, 'axes') or list(range(len(starts)))
    steps = ctx.static_ints(steps, 'steps') or [1] * len(starts)
    axes = [a % x.ndim for a in axes]
    kept = [(a, s, e, p) for a, s, e, p in zip(axes, starts, ends, steps)
            if len(range(*slice(s, e, p).indices(x.shape[a]))) != x.shape[a] or p != 1]
    if not kept:
        return x
    a, s, e, p = (list(v) for v in zip(*kept))
    return ops.strided_slice(x, s, e, a, p)


@register('Tile')
def tile(ctx, x, repeats):
    return ops.tile(ctx.tensor(x), ctx.static_ints(repeats, 'repeats'))


@register('Pad', attrs={'mode': 'constant'},
          check=lambda a: None if a['mode'] in ('constant', 'reflect', 'edge') else f"mode={a['mode']!r}")
def pad(ctx, x, pads, value=None, axes=None):
    x = ctx.tensor(x)
    pads = ctx.static_ints(pads, 'pads')
    axes = ctx.static_ints(axes, 'axes')
    axes = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    k = len(axes)
    begin, end = [0] * x.ndim, [0] * x.ndim
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[i + k]
    torch_pads = []
    for d in reversed(range(x.ndim)):
        torch_pads += [begin[d], end[d]]
    fill = ctx.scalar(value, 'constant_value') if value is not None else 0
    fill = fill if fill is not None else 0
    mode = {'constant': 'constant', 'reflect': 'reflect', 'edge': 'replicate'}[ctx.attrs['mode']]
    if not any(torch_pads):
        return x
    return ops.pad(x, torch_pads, mode, fill)


@register('Trilu', attrs={'upper': 1})
def trilu(ctx, x, k=None):
    x = ctx.tensor(x)
    diagonal = int(ctx.scalar(k, 'k')) if k is not None else 0
    return ops.triu(x, diagonal) if ctx.attrs['upper'] else ops.tril(x, diagonal)

