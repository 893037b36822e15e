"""``x`` with ``x[key] = value``, as a new tensor: what torch's in-place ``x[key] = value`` (``operator.setitem``)
computes, for the torch frontend, which rebinds ``x`` to the result. Keys as torch's:

- ints, slices (steps > 0), ``None`` and ``...``: one kernel selecting, per element, ``value`` inside the region
  and ``x`` outside (``value`` a Python scalar or a tensor broadcast to the region's shape);
- one bool mask over some dimensions (the others full slices): ``where(mask, value, x)``, ``value`` a scalar or
  a tensor broadcast to the dimensions after the mask (a value per selected element depends on the mask's
  values: not supported);
- one 1-D integer tensor indexing one dimension (the others full slices): ``index_copy`` / ``index_fill``
  (negative indices wrap).

``index_put(x, indices, values, accumulate)`` is torch's ``index_put``: integer index tensors (broadcast
together) for some dimensions, ``None`` (a full slice) for others, the values set or, with ``accumulate``,
added (repeated indices add up) through ``scatter_nd``; or one bool mask with values broadcast to what it
selects.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Union

from hidet.graph.operator import Operator
from hidet.graph.ops import arithmetic as ew
from hidet.graph.ops.creation import full
from hidet.graph.ops.indexing import check_index_into_empty
from hidet.graph.ops.reshape import reshape
from hidet.graph.ops.scatter import index_copy, index_fill, scatter_nd
from hidet.graph.ops.transform import broadcast, concat, permute
from hidet.graph.ops.utils import broadcast_shapes, input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute
from hidet.ir.expr import Expr, binary, cast, convert, logical_and, maximum, minimum, select
from hidet.ir.schedulers.lowering import broadcast_indices
from hidet.ir.task import Task

Scalar = Union[int, float, bool]


class AssignRegionOp(Operator):
    """``x`` with the region ``entries`` (normalized: per dimension of ``x`` an int or a (start, step, count)
    slice, and None for a new view dimension) set to ``value`` (a tensor of the region's view shape,
    broadcastable) or to ``scalar``."""

    def __init__(self, x: Tensor, entries: list, value: Optional[Tensor], scalar: Optional[Scalar]):
        a = input_node('x', x)
        v = input_node('v', value) if value is not None else None

        def element(*idx):
            conds: List[Expr] = []
            view: List[Expr] = []
            d = 0
            for e in entries:
                if e is None:
                    view.append(convert(0))
                    continue
                i = idx[d]
                d += 1
                if isinstance(e, int):
                    conds.append(binary('==', i, e))
                    continue
                start, step, count = e
                conds += [binary('>=', i, start), binary('<', i, start + step * (count - 1) + 1)]
                if step > 1:
                    conds.append(binary('==', (i - start) % step, 0))
                view.append(maximum(minimum((i - start) / step, max(count - 1, 0)), 0))  # (clamped: read in bounds)
            new = v[tuple(broadcast_indices(view, v.shape))] if v is not None else convert(scalar)
            inside = conds[0] if conds else convert(True)
            for c in conds[1:]:
                inside = logical_and(inside, c)
            return select(inside, cast(new, a.dtype), a[idx])

        inputs = [x] + ([value] if value is not None else [])
        out = compute('y', a.shape, element)
        super().__init__(inputs, {'entries': repr(entries), 'scalar': scalar},
                         Task('assign_region', [a] + ([v] if v is not None else []), [out]))


def index_assign(x: Tensor, key, value: Union[Tensor, Scalar]) -> Tensor:
    """``x`` with ``x[key] = value`` (see the module's docstring for the keys taken)."""
    entries = list(key) if isinstance(key, tuple) else [key]
    if isinstance(value, Tensor):
        value = ew.cast_(value, x.dtype) if value.dtype != x.dtype else value
        if value.ndim == 0:
            value = reshape(value, [1])
    tensors = [k for k in entries if isinstance(k, Tensor)]
    if any(isinstance(k, (list, tuple)) for k in entries):
        raise NotImplementedError('assigning through a list index: use an integer tensor')
    if sum(k is Ellipsis for k in entries) > 1:
        raise IndexError('an index can only have a single ellipsis (...)')
    if len(tensors) > 1 or tensors and tensors[0].ndim > 1 and not tensors[0].dtype.is_boolean():
        return _assign_advanced(x, entries, value)
    if tensors:
        return _assign_by_tensor(x, entries, tensors[0], value)
    return _assign_region(x, entries, value)


def _assign_advanced(x: Tensor, entries: list, value) -> Tensor:
    """Several integer tensor indices (or one of several dimensions), the others full slices: ``index_put``."""
    entries = _expanded(x, entries, sum(1 for k in entries if k is not Ellipsis))
    if any(not (isinstance(k, Tensor) and not k.dtype.is_boolean() or isinstance(k, slice) and k == slice(None))
           for k in entries):
        raise NotImplementedError('assigning through several tensor indices (advanced indexing): only integer tensors '
                                  'and full slices (:) are supported in the index')
    last = max(d for d, k in enumerate(entries) if isinstance(k, Tensor))
    return index_put(x, [k if isinstance(k, Tensor) else None for k in entries[:last + 1]], value)


def _expanded(x: Tensor, entries: list, consumed: int) -> list:
    """``entries`` with ``...`` (or the missing trailing dimensions) as full slices."""
    if consumed > x.ndim:
        raise IndexError(f'too many indices for a tensor of {x.ndim} dimensions ({x.shape}): {consumed} given')
    fill = [slice(None)] * (x.ndim - consumed)
    if any(k is Ellipsis for k in entries):
        pos = next(i for i, k in enumerate(entries) if k is Ellipsis)
        return entries[:pos] + fill + entries[pos + 1:]
    return entries + fill


def _assign_region(x: Tensor, entries: list, value) -> Tensor:
    entries = _expanded(x, entries, sum(1 for k in entries if k is not None and k is not Ellipsis))
    normalized, view_shape, d = [], [], 0
    for k in entries:
        if k is None:
            normalized.append(None)
            view_shape.append(1)
            continue
        n = x.shape[d]
        if not isinstance(n, int):
            raise NotImplementedError(f'assigning into dimension {d} of symbolic size {n!r} is not supported')
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step <= 0:
                raise ValueError('slice steps must be positive (as in torch)')
            count = len(range(start, stop, step))
            normalized.append((start, step, count))
            view_shape.append(count)
        else:
            i = k.__index__()
            if not -n <= i < n:
                raise IndexError(f'index {i} is out of bounds for dimension {d} with size {n}')
            normalized.append(i % n)
        d += 1
    if isinstance(value, Tensor):
        value = _fit(value, view_shape, 'the assigned region')
        return AssignRegionOp(x, normalized, value, None).get_output(0)
    return AssignRegionOp(x, normalized, None, value).get_output(0)


def _fit(value: Tensor, shape: Sequence[int], what: str) -> Tensor:
    """``value`` as a tensor broadcastable to ``shape`` (extra leading dimensions of size 1 dropped)."""
    extra = value.ndim - len(shape)
    if extra > 0:
        if any(s != 1 for s in value.shape[:extra]):
            raise ValueError(f'shape mismatch: value of shape {list(value.shape)} cannot be broadcast to {what} of '
                             f'shape {list(shape)}')
        value = reshape(value, list(value.shape[extra:]))
    for vs, s in zip(reversed(value.shape), reversed(shape)):
        if vs != 1 and vs != s:
            raise ValueError(f'shape mismatch: value of shape {list(value.shape)} cannot be broadcast to {what} of '
                             f'shape {list(shape)}')
    return value


def _assign_by_tensor(x: Tensor, entries: list, index: Tensor, value) -> Tensor:
    consumed = sum(k.ndim if isinstance(k, Tensor) and k.dtype.is_boolean() else 0 if k is None or k is Ellipsis
                   else 1 for k in entries)
    entries = _expanded(x, entries, consumed)
    pos = next(i for i, k in enumerate(entries) if isinstance(k, Tensor))
    others = [k for k in entries if k is not index]
    if any(not (isinstance(k, slice) and k == slice(None)) for k in others):
        raise NotImplementedError('assigning through a tensor index combined with other indices: only full slices '
                                  '(:) may accompany it')
    if index.dtype.is_boolean():
        mask_dims = list(x.shape[pos:pos + index.ndim])
        if list(index.shape) != mask_dims:
            raise IndexError(f'the mask of shape {list(index.shape)} does not match dimensions {pos}.. of the '
                             f'tensor {list(x.shape)}')
        rest = list(x.shape[pos + index.ndim:])
        mask = reshape(index, [1] * pos + mask_dims + [1] * len(rest))
        if isinstance(value, Tensor):
            if value.ndim > len(rest) and any(s != 1 for s in value.shape[:value.ndim - len(rest)]):
                raise NotImplementedError('assigning a value per masked element (its count depends on the mask\'s '
                                          'values) is not supported: assign a scalar, or use torch.where')
            value = _fit(value, rest, 'the masked elements')
        return ew.where(mask, value, x)
    if not index.dtype.is_integer():
        raise IndexError(f'tensors used as indices must have an integer dtype (or bool: a mask), got {index.dtype}')
    if index.ndim != 1:
        raise NotImplementedError('assigning through an integer tensor index of more than one dimension is not '
                                  'supported')
    n = x.shape[pos]
    index = ew.where(ew.less(index, 0), ew.add(index, n), index)  # negative indices wrap, as torch
    if not isinstance(value, Tensor):
        return index_fill(x, pos, index, value)
    shape = list(x.shape)
    shape[pos] = index.shape[0]
    return index_copy(x, pos, index, broadcast(_fit(value, shape, 'the indexed slices'), shape))


def index_put(x: Tensor, indices: Sequence[Optional[Tensor]], values: Union[Tensor, Scalar],
              accumulate: bool = False) -> Tensor:
    """``x`` with ``x[indices] = values`` (``+=`` with ``accumulate``, repeated indices adding up), as torch's
    ``index_put``: ``indices`` gives, for the leading dimensions, an integer tensor or None (all of it)."""
    indices = list(indices)
    if len(indices) > x.ndim:
        raise IndexError(f'index_put: too many indices ({len(indices)}) for a tensor of {x.ndim} dimensions')
    if not isinstance(values, Tensor):
        values = full([], values, x.dtype, x.device)
    values = ew.cast_(values, x.dtype) if values.dtype != x.dtype else values
    tensors = [(d, k) for d, k in enumerate(indices) if k is not None]
    if not tensors:
        return ew.add(x, broadcast(values, list(x.shape))) if accumulate else broadcast(values, list(x.shape))
    if any(k.dtype.is_boolean() for _, k in tensors):
        return _index_put_mask(x, indices, values, accumulate)
    for d, k in tensors:
        if not k.dtype.is_integer():
            raise IndexError(f'index_put: tensors used as indices must be integer or bool, got {k.dtype}')
        check_index_into_empty('index_put', k, x.shape[d], d)
    dims = [d for d, _ in tensors]
    lead = list(broadcast_shapes('index_put', *(k.shape for _, k in tensors)))
    others = [d for d in range(x.ndim) if d not in dims]
    rest = [x.shape[d] for d in others]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    if adjacent:  # the values' layout: x's dims before the indexed ones, the index shape, x's dims after them
        pre = [x.shape[d] for d in others if d < dims[0]]
        layout = pre + lead + rest[len(pre):]
    else:  # the index shape first
        pre, layout = [], lead + rest
    values = broadcast(_fit(values, layout, 'the indexed elements'), layout)
    if pre:
        order = list(range(len(pre), len(pre) + len(lead))) + list(range(len(pre))) + \
            list(range(len(pre) + len(lead), len(layout)))
        values = permute(values, order)
    columns = []
    for d, k in tensors:
        k = ew.cast_(k, 'int64') if k.dtype.name != 'int64' else k
        k = ew.where(ew.less(k, 0), ew.add(k, x.shape[d]), k)  # negative indices wrap, as torch
        columns.append(reshape(broadcast(k, lead), lead + [1]))
    index = concat(columns, len(lead)) if len(columns) > 1 else columns[0]
    perm = dims + others
    moved = permute(x, perm) if perm != list(range(x.ndim)) else x
    out = scatter_nd(moved, index, values, 'sum' if accumulate else 'none')
    if perm == list(range(x.ndim)):
        return out
    inverse = [perm.index(d) for d in range(x.ndim)]
    return permute(out, inverse)


def _index_put_mask(x: Tensor, indices: list, values: Tensor, accumulate: bool) -> Tensor:
    if len(indices) != 1 or values.numel() != 1 and values.ndim > 0 and \
            any(s != 1 for s in values.shape[:max(values.ndim - (x.ndim - indices[0].ndim), 0)]):
        raise NotImplementedError('index_put with a bool mask: only one mask, and values broadcast to the elements '
                                  'it selects (a value per selected element depends on the mask\'s values); use '
                                  'torch.where')
    mask = indices[0]
    rest = list(x.shape[mask.ndim:])
    if list(mask.shape) != list(x.shape[:mask.ndim]):
        raise IndexError(f'index_put: the mask of shape {list(mask.shape)} does not match the tensor {list(x.shape)}')
    value = _fit(values, rest, 'the masked elements')
    mask = reshape(mask, list(mask.shape) + [1] * len(rest))
    return ew.where(mask, ew.add(x, value) if accumulate else value, x)
