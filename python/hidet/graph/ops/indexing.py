"""Indexing by tensors with torch's semantics: gather, take, gather_nd, index_select and embedding.

Index tensors (gather, index_select, take, embedding) may be of any integer dtype; a negative index
counts from the end of its dimension (as in torch's indexing and numpy; torch.gather, index_select and
embedding accept non-negative indices only). Out-of-range indices (outside ``[-n, n)``):
- the kernels never read outside the tensor: they clamp every index into ``[0, n)``;
- an index tensor in host memory (CPU) is checked before the kernel runs, and an out-of-range index
  raises ``IndexError`` as in torch (the check is one pass over the indices, cheap beside the op);
- an index tensor on the GPU is not checked (that would copy it to the host and wait for the stream on
  every call): an out-of-range index reads the nearest end of its dimension (clamped) instead of raising.
"""
from __future__ import annotations

from hidet.graph.operator import Operator
from hidet.graph.ops.reshape import reshape
from hidet.graph.ops.utils import input_node, normalize_axis
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute
from hidet.ir.dtypes import int64
from hidet.ir.expr import Expr, binary, cast, maximum, minimum, select
from hidet.ir.task import Task


def _wrap_index(index: Expr, extent: int) -> Expr:
    """An index tensor's value as an int64 index into a dimension of ``extent``: negatives count from the
    end, and the result is clamped into ``[0, extent)`` so that no index reads outside the tensor."""
    unsigned = index.dtype.kind == 'uint'
    index = cast(index, int64)
    if not unsigned:
        index = maximum(select(binary('<', index, 0), index + extent, index), 0)
    return minimum(index, max(extent - 1, 0))


def _check_index_dtype(op: str, index: Tensor) -> None:
    if not index.dtype.is_integer():
        raise TypeError(f'{op}: the index tensor must have an integer dtype, got {index.dtype.name}')


def check_index_into_empty(op: str, index: Tensor, extent, axis: int) -> None:
    """Raise IndexError where an index tensor of at least one element indexes dimension ``axis`` of size
    ``extent`` 0: every index is out of range (torch raises too)."""
    n = index.numel()
    if isinstance(n, int) and n > 0 and isinstance(extent, int) and extent == 0:
        raise IndexError(f'{op}: cannot index dimension {axis} of size 0 (every index is out of range)')


def _check_index_range(op: str, index: Tensor, extent: int, axis: int) -> None:
    """Raise IndexError for an index outside ``[-extent, extent)`` where that is cheap to find out: for
    any index into an empty dimension, and for the values of index tensors in host memory."""
    if index.numel() == 0:
        return
    check_index_into_empty(op, index, extent, axis)
    if index.is_symbolic() or not index.device.is_cpu():
        return  # on the GPU the kernel clamps instead (see the module's docstring)
    import numpy as np

    values = np.asarray(index.numpy())
    lo, hi = values.min(), values.max()
    if lo < -extent or hi >= extent:
        bad = int(lo) if lo < -extent else int(hi)
        raise IndexError(f'{op}: index {bad} is out of range for dimension {axis} with size {extent} '
                         f'(valid indices: {-extent} to {extent - 1})')


class GatherOp(Operator):
    def __init__(self, x: Tensor, axis: int, index: Tensor):
        a, ind = input_node('x', x), input_node('index', index)
        n = a.shape[axis]

        def element(*idx):
            in_idx = list(idx)
            in_idx[axis] = _wrap_index(ind[idx], n)
            return a[tuple(in_idx)]

        super().__init__([x, index], {'axis': axis}, Task('gather', [a, ind], [compute('y', ind.shape, element)]))


def gather(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """``out[i][j][k] = x[index[i][j][k]][j][k]`` for axis 0 (and so on), as torch.gather: ``index`` has
    the dimensions of ``x``, no larger than ``x``'s except along ``axis``.
    Indices outside ``[-n, n)`` raise IndexError when ``index`` is in host memory; on the GPU they are
    clamped into range (never read outside ``x``); see the module's docstring."""
    _check_index_dtype('gather', index)
    if index.ndim != x.ndim:
        raise ValueError(f'gather: index {index.shape} must have as many dimensions as the input {x.shape}')
    if x.ndim == 0:
        normalize_axis('gather', axis, 0)
        return take(reshape(x, [1]), index, 0)
    ax = normalize_axis('gather', axis, x.ndim)
    _check_index_range('gather', index, x.shape[ax], ax)
    for d in range(x.ndim):
        if d != ax and index.shape[d] > x.shape[d]:
            raise ValueError(f'gather: index {index.shape} is larger than the input {x.shape} in dimension {d} '
                             f'({index.shape[d]} > {x.shape[d]}); only dimension {axis} may be larger')
    return GatherOp(x, ax, index).get_output(0)


class TakeOp(Operator):
    """``x`` indexed along ``axis`` by every element of ``index``: the result's dimension ``axis`` is
    replaced by ``index``'s dimensions (numpy.take)."""

    def __init__(self, x: Tensor, axis: int, index: Tensor, name: str = 'take'):
        a, ind = input_node('x', x), input_node('index', index)
        k = ind.ndim
        shape = a.shape[:axis] + ind.shape + a.shape[axis + 1:]

        def element(*idx):
            i = _wrap_index(ind[tuple(idx[axis:axis + k])], a.shape[axis])
            return a[tuple(idx[:axis]) + (i,) + tuple(idx[axis + k:])]

        super().__init__([x, index], {'axis': axis}, Task(name, [a, ind], [compute('y', shape, element)]))


def take(x: Tensor, index: Tensor, axis: int = 0) -> Tensor:
    """numpy.take along ``axis``: the result has ``x``'s dimensions with ``axis`` replaced by ``index``'s.
    Indices outside ``[-n, n)`` raise IndexError when ``index`` is in host memory; on the GPU they are
    clamped into range (never read outside ``x``); see the module's docstring."""
    _check_index_dtype('take', index)
    if x.ndim == 0:
        raise ValueError('take: the input must have at least one dimension')
    ax = normalize_axis('take', axis, x.ndim)
    _check_index_range('take', index, x.shape[ax], ax)
    return TakeOp(x, ax, index).get_output(0)


class GatherNdOp(Operator):
    """ONNX GatherND / tf.gather_nd: the last dimension of ``index`` holds coordinates into the dimensions
    of ``x`` after its first ``batch_dims`` ones (which ``index`` shares); each selects a slice."""

    def __init__(self, x: Tensor, index: Tensor, batch_dims: int):
        a, ind = input_node('x', x), input_node('index', index)
        m = ind.shape[-1]
        shape = ind.shape[:-1] + a.shape[batch_dims + m:]
        q = ind.ndim - 1

        def element(*idx):
            coords = [_wrap_index(ind[tuple(idx[:q]) + (j,)], a.shape[batch_dims + j]) for j in range(m)]
            return a[tuple(idx[:batch_dims]) + tuple(coords) + tuple(idx[q:])]

        super().__init__([x, index], {'batch_dims': batch_dims},
                         Task('gather_nd', [a, ind], [compute('y', shape, element)]))


def gather_nd(x: Tensor, index: Tensor, batch_dims: int = 0) -> Tensor:
    """ONNX GatherND: ``y[i..., rest...] = x[b..., index[i..., 0], ..., index[i..., m-1], rest...]`` where
    ``b...`` are the first ``batch_dims`` of ``i...``. Indices outside a dimension raise IndexError when
    ``index`` is in host memory; otherwise they are clamped into range (never read outside ``x``)."""
    _check_index_dtype('gather_nd', index)
    if index.ndim < 1 or not 0 <= batch_dims < min(x.ndim, index.ndim):
        raise ValueError(f'gather_nd: batch_dims {batch_dims} must be below the ranks of x {x.shape} and index '
                         f'{index.shape}')
    m = index.shape[-1]
    if x.shape[:batch_dims] != index.shape[:batch_dims] or m > x.ndim - batch_dims:
        raise ValueError(f'gather_nd: index {index.shape} does not fit x {x.shape} with batch_dims {batch_dims}: '
                         f'the batch dimensions must match and the last dimension of index ({m}) address at most '
                         f'{x.ndim - batch_dims} dimensions')
    if not index.is_symbolic() and index.device.is_cpu() and index.numel() > 0:
        import numpy as np

        values = np.asarray(index.numpy()).reshape(-1, m)
        for j in range(m):
            extent = x.shape[batch_dims + j]
            bad = values[:, j][(values[:, j] < -extent) | (values[:, j] >= extent)]
            if bad.size:
                raise IndexError(f'gather_nd: index {int(bad[0])} is out of range for dimension {batch_dims + j} '
                                 f'with size {extent}')
    return GatherNdOp(x, index, batch_dims).get_output(0)


def index_select(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """The entries ``index`` (a vector, or a scalar) of ``x`` along ``axis``, as torch.index_select.
    Indices outside ``[-n, n)`` raise IndexError when ``index`` is in host memory; on the GPU they are
    clamped into range (never read outside ``x``); see the module's docstring."""
    _check_index_dtype('index_select', index)
    if index.ndim > 1:
        raise ValueError(f'index_select: index must be a vector or a scalar, got shape {index.shape}')
    if x.ndim == 0:
        normalize_axis('index_select', axis, 0)
        return reshape(take(reshape(x, [1]), reshape(index, [-1]), 0), [])
    ax = normalize_axis('index_select', axis, x.ndim)
    _check_index_range('index_select', index, x.shape[ax], ax)
    if index.ndim == 0:
        index = reshape(index, [1])
    return TakeOp(x, ax, index, 'index_select').get_output(0)


def embedding(indices: Tensor, weight: Tensor) -> Tensor:
    """Rows ``indices`` of the table ``weight`` [num_embeddings, dim], as torch.nn.functional.embedding:
    the result has shape ``indices.shape + (dim,)``.
    Indices outside ``[-n, n)`` raise IndexError when ``indices`` is in host memory; on the GPU they are
    clamped into range (never read outside the table); see the module's docstring."""
    _check_index_dtype('embedding', indices)
    if weight.ndim != 2:
        raise ValueError(f'embedding: the weight must be a 2-D table [num_embeddings, dim], got {weight.shape}')
    _check_index_range('embedding', indices, weight.shape[0], 0)
    return TakeOp(weight, 0, indices, 'embedding').get_output(0)
