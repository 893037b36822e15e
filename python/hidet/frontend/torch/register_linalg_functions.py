"""Conversions of torch's products and diagonals (einsum, dot, inner, outer, mv, tensordot, kron, addmv,
addbmm, diagonal, diag, trace), distances (cdist, F.cosine_similarity, F.pairwise_distance), and the shape
functions that go with them (movedim, unflatten, hstack/vstack/dstack/column_stack, tensor_split,
hsplit/vsplit, broadcast_tensors, atleast_nd, rot90, take_along_dim, F.pixel_shuffle/unshuffle,
F.one_hot), and scatters (scatter, scatter_add, scatter_reduce, index_copy, index_add, index_fill), onto
hidet.ops."""
from typing import List

import torch
import torch.nn.functional as F

from hidet import ops
from hidet.frontend.torch.register_functions import norm
from hidet.frontend.torch.registry import register_function
from hidet.frontend.torch.utils import as_float, dims_arg
from hidet.graph.ops.utils import broadcast_shapes, normalize_axis
from hidet.graph.tensor import Tensor, _numel


# ---------------------------------------------------------------- products
@register_function(torch.einsum)
def einsum(equation: str, *operands):
    return ops.einsum(equation, *operands)


@register_function(torch.dot, torch.vdot, torch.inner)
def inner(input: Tensor, other: Tensor, *, out=None):
    """The sum over the last dimension of both (for vectors: their dot product)."""
    if input.ndim == 0 or other.ndim == 0:
        return ops.multiply(input, other)
    return tensordot(input, other, ([-1], [-1]))


@register_function(torch.outer, torch.ger)
def outer(input: Tensor, vec2: Tensor, *, out=None):
    return ops.multiply(ops.unsqueeze(input, [1]), ops.unsqueeze(vec2, [0]))


@register_function(torch.mv)
def mv(input: Tensor, vec: Tensor, *, out=None):
    return ops.matmul(input, vec)


def _scaled_sum(input, product, beta, alpha):
    """beta * input + alpha * product (torch's addmm family; beta = 0 ignores input, NaN included)."""
    y = ops.multiply(product, alpha) if alpha != 1 else product
    if beta == 0:
        return y
    return ops.add(y, ops.multiply(input, beta) if beta != 1 else input)


@register_function(torch.addmv)
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1, out=None):
    return _scaled_sum(input, ops.matmul(mat, vec), beta, alpha)


@register_function(torch.addbmm)
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1, out=None):
    return _scaled_sum(input, ops.sum(ops.matmul(batch1, batch2), [0]), beta, alpha)


@register_function(torch.tensordot)
def tensordot(a: Tensor, b: Tensor, dims=2, out=None):
    """Contract ``dims`` (a count of a's last / b's first dimensions, or two lists) as one matmul; a contracted
    dimension of size 1 against a larger one is summed out of the other tensor first (torch broadcasts it)."""
    if isinstance(dims, int):
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = (dims_arg(d) for d in dims)
    dims_a = [normalize_axis('tensordot', d, a.ndim) for d in dims_a]
    dims_b = [normalize_axis('tensordot', d, b.ndim) for d in dims_b]
    if len(dims_a) != len(dims_b):
        raise ValueError(f'tensordot: {len(dims_a)} dimensions of a against {len(dims_b)} of b')
    for i, j in zip(dims_a, dims_b):  # a size 1 against a larger one broadcasts, as torch's: sum the other first
        if b.shape[j] == 1 and a.shape[i] != 1:
            a = ops.sum(a, [i], keepdim=True)
        elif a.shape[i] == 1 and b.shape[j] != 1:
            b = ops.sum(b, [j], keepdim=True)
        elif a.shape[i] != b.shape[j]:
            raise ValueError(f'tensordot: dimensions {dims_a} of {a.shape} do not match {dims_b} of {b.shape}')
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = _numel([a.shape[d] for d in dims_a])
    ma = ops.reshape(ops.permute(a, free_a + dims_a), [_numel([a.shape[d] for d in free_a]), k])
    mb = ops.reshape(ops.permute(b, dims_b + free_b), [k, _numel([b.shape[d] for d in free_b])])
    return ops.reshape(ops.matmul(ma, mb), [a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])


@register_function(torch.kron)
def kron(input: Tensor, other: Tensor, *, out=None):
    """Every element of ``input`` times all of ``other``: dimension d of size n_d · m_d."""
    nd = max(input.ndim, other.ndim)
    a = ops.reshape(input, [1] * (nd - input.ndim) + list(input.shape))
    b = ops.reshape(other, [1] * (nd - other.ndim) + list(other.shape))
    a = ops.reshape(a, [s for n in a.shape for s in (n, 1)])  # [n0, 1, n1, 1, ...]
    b = ops.reshape(b, [s for m in b.shape for s in (1, m)])  # [1, m0, 1, m1, ...]
    return ops.reshape(ops.multiply(a, b), [n * m for n, m in zip(a.shape[::2], b.shape[1::2])])


# ---------------------------------------------------------------- diagonals
@register_function(torch.diagonal)
def _diagonal(input: Tensor, offset=0, dim1=0, dim2=1):
    """The elements (i, i + offset) of dimensions dim1, dim2, as the last dimension: a strided slice of the
    two dimensions flattened (element (i, i + offset) is at i·(m + 1) + offset)."""
    d1, d2 = normalize_axis('diagonal', dim1, input.ndim), normalize_axis('diagonal', dim2, input.ndim)
    if d1 == d2:
        raise ValueError(f'diagonal: dim1 and dim2 must differ, both are {d1}')
    rest = [d for d in range(input.ndim) if d not in (d1, d2)]
    n, m = input.shape[d1], input.shape[d2]
    x = ops.reshape(ops.permute(input, rest + [d1, d2]), [input.shape[d] for d in rest] + [n * m])
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    start = offset if offset >= 0 else -offset * m
    if length == 0:
        return ops.strided_slice(x, [0], [0], axes=[-1])
    return ops.strided_slice(x, [start], [start + (length - 1) * (m + 1) + 1], axes=[-1], strides=[m + 1])


@register_function(torch.diag)
def diag(input: Tensor, diagonal=0, *, out=None):
    """A vector → the square matrix with it on diagonal ``diagonal``; a matrix → that diagonal."""
    if input.ndim == 2:
        return _diagonal(input, diagonal)
    if input.ndim != 1:
        raise ValueError(f'diag: expected a 1-D or a 2-D tensor, got {input.shape}')
    n = input.shape[0] + abs(diagonal)
    if isinstance(input.shape[0], int) and input.shape[0] == 0:  # an empty vector: zeros, as torch
        return ops.full([n, n], 0, input.dtype, input.device)
    rows = ops.reshape(ops.arange(n, device=input.device), [n, 1])
    cols = ops.reshape(ops.arange(n, device=input.device), [1, n])
    # element (i, j) of the diagonal holds input[i] (diagonal >= 0) or input[j]; elsewhere any index, masked
    index = ops.clamp(ops.broadcast(rows if diagonal >= 0 else cols, [n, n]), 0, input.shape[0] - 1)
    return ops.where(ops.equal(ops.subtract(cols, rows), diagonal), ops.take(input, index, 0), 0)


@register_function(torch.trace)
def trace(input: Tensor):
    return ops.sum(_diagonal(input))


# ---------------------------------------------------------------- distances
@register_function(torch.cdist)
def cdist(x1: Tensor, x2: Tensor, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary'):
    """p-norm distances between the rows of x1 [..., P, M] and of x2 [..., R, M]: [..., P, R] (from the
    differences, as torch for small inputs)."""
    diff = ops.subtract(ops.unsqueeze(as_float(x1), [-2]), ops.unsqueeze(as_float(x2), [-3]))
    return norm(diff, p, -1)


@register_function(F.pairwise_distance, torch.pairwise_distance)
def pairwise_distance(x1: Tensor, x2: Tensor, p=2.0, eps=1e-6, keepdim=False):
    return norm(ops.add(ops.subtract(x1, x2), eps), p, -1, keepdim)


@register_function(F.cosine_similarity, torch.cosine_similarity)
def cosine_similarity(x1: Tensor, x2: Tensor, dim=1, eps=1e-8):
    """x1·x2 / (max(|x1|, eps) · max(|x2|, eps)) along ``dim``."""
    shape = broadcast_shapes('cosine_similarity', x1.shape, x2.shape)
    dim = normalize_axis('cosine_similarity', dim, len(shape))
    n1 = ops.maximum(ops.sqrt(ops.sum(ops.multiply(x1, x1), [dim - len(shape) + x1.ndim], True)), eps)
    n2 = ops.maximum(ops.sqrt(ops.sum(ops.multiply(x2, x2), [dim - len(shape) + x2.ndim], True)), eps)
    return ops.sum(ops.multiply(ops.divide(x1, n1), ops.divide(x2, n2)), [dim])


# ---------------------------------------------------------------- shape
@register_function(torch.movedim, torch.moveaxis)
def movedim(input: Tensor, source, destination):
    src = [normalize_axis('movedim', d, input.ndim) for d in dims_arg(source)]
    dst = [normalize_axis('movedim', d, input.ndim) for d in dims_arg(destination)]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f'movedim: source {source} and destination {destination} must be distinct and as many')
    order: List[int] = [-1] * input.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(input.ndim) if d not in src)
    return ops.permute(input, [o if o >= 0 else next(rest) for o in order])


@register_function(torch.unflatten)
def unflatten(input: Tensor, dim, sizes):
    # (a circle at import time: register_methods imports this module)
    from hidet.frontend.torch.register_methods import unflatten as method

    return method(input, dim, sizes)


def _atleast(x: Tensor, nd: int) -> Tensor:
    if x.ndim >= nd:
        return x
    shape = {0: [1] * nd, 1: [1, x.shape[0], 1][:nd] if nd == 3 else [1, x.shape[0]],
             2: list(x.shape) + [1]}[x.ndim]
    return ops.reshape(x, shape)


def _atleast_of(nd: int):
    def convert(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(_atleast(t, nd) for t in tensors[0])
        return _atleast(tensors[0], nd) if len(tensors) == 1 else tuple(_atleast(t, nd) for t in tensors)

    return convert


for _fn, _nd in ((torch.atleast_1d, 1), (torch.atleast_2d, 2), (torch.atleast_3d, 3)):
    register_function(_fn)(_atleast_of(_nd))


@register_function(torch.hstack)
def hstack(tensors, *, out=None):
    tensors = [_atleast(t, 1) for t in tensors]
    return ops.concat(tensors, 0 if tensors[0].ndim == 1 else 1)


@register_function(torch.vstack, torch.row_stack)
def vstack(tensors, *, out=None):
    return ops.concat([_atleast(t, 2) for t in tensors], 0)


@register_function(torch.dstack)
def dstack(tensors, *, out=None):
    return ops.concat([_atleast(t, 3) for t in tensors], 2)


@register_function(torch.column_stack)
def column_stack(tensors, *, out=None):
    return ops.concat([ops.reshape(t, [-1, 1]) if t.ndim <= 1 else t for t in tensors], 1)


@register_function(torch.tensor_split)
def tensor_split(input: Tensor, indices_or_sections, dim=0):
    """Parts along ``dim``: ``n`` sections (the first n % k one longer) or the pieces between indices."""
    dim = normalize_axis('tensor_split', dim, input.ndim)
    size = input.shape[dim]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0:
            raise ValueError(f'tensor_split: the number of sections must be positive, got {k}')
        bounds = [i * (size // k) + min(i, size % k) for i in range(k + 1)]
    else:
        bounds = [0] + [min(max(int(i) if i >= 0 else int(i) + size, 0), size) for i in indices_or_sections] + [size]
    return tuple(ops.strided_slice(input, [lo], [max(lo, hi)], axes=[dim]) for lo, hi in zip(bounds, bounds[1:]))


@register_function(torch.hsplit)
def hsplit(input: Tensor, indices_or_sections):
    return _even_split('hsplit', input, indices_or_sections, 0 if input.ndim == 1 else 1)


@register_function(torch.vsplit)
def vsplit(input: Tensor, indices_or_sections):
    return _even_split('vsplit', input, indices_or_sections, 0)


def _even_split(name: str, input: Tensor, indices_or_sections, dim: int):
    if isinstance(indices_or_sections, int) and input.shape[dim] % indices_or_sections:
        raise ValueError(f'{name}: dimension {dim} of {input.shape} does not split into {indices_or_sections} '
                         'equal parts')
    return tensor_split(input, indices_or_sections, dim)


@register_function(torch.broadcast_tensors)
def broadcast_tensors(*tensors):
    shape = broadcast_shapes('broadcast_tensors', *[t.shape for t in tensors])
    return tuple(t if tuple(t.shape) == tuple(shape) else ops.broadcast(t, list(shape)) for t in tensors)


@register_function(torch.rot90)
def rot90(input: Tensor, k=1, dims=(0, 1)):
    d0, d1 = (normalize_axis('rot90', d, input.ndim) for d in dims)
    k %= 4
    if k == 0:
        return input
    if k == 2:
        return ops.flip(input, [d0, d1])
    return ops.transpose(ops.flip(input, [d1 if k == 1 else d0]), d0, d1)


@register_function(torch.take_along_dim)
def take_along_dim(input: Tensor, indices: Tensor, dim=None, *, out=None):
    if dim is None:
        return ops.gather(ops.reshape(input, [-1]), 0, ops.reshape(indices, [-1]))
    dim = normalize_axis('take_along_dim', dim, input.ndim)
    shape = list(broadcast_shapes('take_along_dim', [s for i, s in enumerate(input.shape) if i != dim],
                                  [s for i, s in enumerate(indices.shape) if i != dim]))
    x = ops.broadcast(input, shape[:dim] + [input.shape[dim]] + shape[dim:])
    idx = ops.broadcast(indices, shape[:dim] + [indices.shape[dim]] + shape[dim:])
    return ops.gather(x, dim, idx)


@register_function(F.pixel_shuffle, torch.pixel_shuffle)
def pixel_shuffle(input: Tensor, upscale_factor: int):
    """[..., C·r², H, W] → [..., C, H·r, W·r]."""
    r = upscale_factor
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ValueError(f'pixel_shuffle: {c} channels do not divide by upscale_factor² = {r * r}')
    x = ops.reshape(input, lead + [c // (r * r), r, r, h, w])
    n = len(lead)
    x = ops.permute(x, list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2])
    return ops.reshape(x, lead + [c // (r * r), h * r, w * r])


@register_function(F.pixel_unshuffle, torch.pixel_unshuffle)
def pixel_unshuffle(input: Tensor, downscale_factor: int):
    """[..., C, H·r, W·r] → [..., C·r², H, W]."""
    r = downscale_factor
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ValueError(f'pixel_unshuffle: height {h} and width {w} must divide by downscale_factor {r}')
    x = ops.reshape(input, lead + [c, h // r, r, w // r, r])
    n = len(lead)
    x = ops.permute(x, list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3])
    return ops.reshape(x, lead + [c * r * r, h // r, w // r])


@register_function(F.one_hot)
def one_hot(tensor: Tensor, num_classes=-1):
    if num_classes < 0:
        raise NotImplementedError('F.one_hot without num_classes: the number of classes depends on the data; '
                                  'pass num_classes')
    classes = ops.arange(num_classes, device=tensor.device)
    return ops.cast(ops.equal(ops.unsqueeze(tensor, [tensor.ndim]), classes), 'int64')



# ---------------------------------------------------------------- scatters (see hidet.ops.scatter)
_REDUCE = {None: 'none', 'add': 'sum', 'multiply': 'prod', 'sum': 'sum', 'prod': 'prod', 'mean': 'mean',
           'amax': 'amax', 'amin': 'amin'}


@register_function(torch.scatter)
def scatter(input: Tensor, dim, index: Tensor, src=None, value=None, *, reduce=None, out=None):
    source = src if src is not None else value
    if reduce not in _REDUCE:
        raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
    return ops.scatter_elements(input, dim, index, source, _REDUCE[reduce])


@register_function(torch.scatter_add)
def scatter_add(input: Tensor, dim, index: Tensor, src: Tensor):
    return ops.scatter_elements(input, dim, index, src, 'sum')


@register_function(torch.scatter_reduce)
def scatter_reduce(input: Tensor, dim, index: Tensor, src: Tensor, reduce, *, include_self=True, out=None):
    if reduce not in ('sum', 'prod', 'mean', 'amax', 'amin'):
        raise ValueError(f"scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got {reduce!r}")
    return ops.scatter_elements(input, dim, index, src, reduce, include_self)


@register_function(torch.index_copy)
def index_copy(input: Tensor, dim, index: Tensor, source: Tensor):
    return _of_0d(lambda x, d, src: ops.index_copy(x, d, index, src), input, dim, source)


@register_function(torch.index_add)
def index_add(input: Tensor, dim, index: Tensor, source: Tensor, *, alpha=1, out=None):
    return _of_0d(lambda x, d, src: ops.index_add(x, d, index, src, alpha), input, dim, source)


@register_function(torch.index_fill)
def index_fill(input: Tensor, dim, index: Tensor, value):
    return _of_0d(lambda x, d, v: ops.index_fill(x, d, index, v), input, dim, value)


def _of_0d(op, input: Tensor, dim, value):
    """``op(input, dim, value)``; a 0-d input (dim 0 or -1, as torch) as a 1-element one, and back."""
    if input.ndim != 0:
        return op(input, dim, value)
    normalize_axis('index_copy/index_add/index_fill', dim, 0)
    if isinstance(value, Tensor) and value.ndim == 0:
        value = ops.reshape(value, [1])
    return ops.reshape(op(ops.reshape(input, [1]), 0, value), [])
