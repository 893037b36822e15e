"""Shape helpers shared by the operator families: broadcasting and axis normalization, with
errors that name the operator, the shapes and the rule broken."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

from hidet.ir.compute import TensorNode, tensor_input
from hidet.ir.expr import Expr, convert, simplify_dim

Ints = Union[int, Sequence[int]]


def input_node(name: str, tensor) -> TensorNode:
    return tensor_input(name, tensor.dtype, tensor.shape)


def broadcast_shapes(op: str, *shapes: Sequence[int]) -> Tuple[int, ...]:
    """numpy/torch broadcasting of ``shapes``."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        # symbolic sizes are equal when they are written the same (b * s built twice is one size)
        dims = {repr(d) if isinstance(d, Expr) else d: d for s in shapes if len(s) - ndim + i >= 0
                for d in [simplify_dim(s[len(s) - ndim + i])]}
        dims.pop(1, None)
        if len(dims) > 1 and any(isinstance(d, Expr) for d in dims.values()):
            raise NotImplementedError(
                f'{op}: shapes {" and ".join(str(tuple(s)) for s in shapes)}: dimension {i - ndim} has the sizes '
                f'{sorted(map(str, dims))}, which hidet cannot tell equal (or 1) before the graph runs; broadcasting '
                'one symbolic size against another is not supported')
        if len(dims) > 1:
            raise ValueError(f'{op}: shapes {" and ".join(str(tuple(s)) for s in shapes)} cannot be broadcast: '
                             f'dimension {i - ndim} has sizes {sorted(map(str, dims))}; each must equal the others '
                             'or be 1')
        out.append(next(iter(dims.values())) if dims else 1)
    return tuple(out)


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise IndexError(f'{op}: axis {axis} is out of range for a tensor with {ndim} dimensions')
    return axis % max(ndim, 1)


def normalize_axes(op: str, axes: Optional[Union[int, Sequence[int]]], ndim: int) -> List[int]:
    if axes is None:
        return list(range(ndim))
    if isinstance(axes, int):
        axes = [axes]
    result = sorted(normalize_axis(op, a, ndim) for a in axes)
    if ndim == 0:  # a 0-d tensor's dimension 0 (or -1), as torch: nothing to reduce or move
        return []
    if len(set(result)) != len(result):
        raise ValueError(f'{op}: axis {list(axes)} names a dimension twice')
    return result


def as_ints(op: str, what: str, value) -> List[int]:
    """``value`` (an int or a sequence of ints) as a list of Python ints."""
    if isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    try:
        return [as_int(v) for v in items]
    except TypeError:
        raise TypeError(f'{op}: {what} must be an int or a sequence of ints, got {value!r}') from None


def as_dims(op: str, what: str, value) -> list:
    """As ``as_ints``, where symbolic dimensions (hidet expressions) may stand for ints."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return [v if isinstance(v, Expr) else as_ints(op, what, v)[0] for v in items]


def as_int(v) -> int:
    if isinstance(v, bool) or not hasattr(v, '__index__'):
        raise TypeError(f'not an int: {v!r}')
    return v.__index__()


def flatten_index(indices: Sequence[Expr], shape: Sequence[int]) -> Expr:
    """The row-major flat index of ``indices`` in a tensor of ``shape``."""
    flat: Expr = convert(0)
    first = True
    for idx, extent in zip(indices, shape):
        if extent == 1:
            continue  # its index is 0
        flat = idx if first else flat * extent + idx
        first = False
    return flat


def unflatten_index(flat: Expr, shape: Sequence[int]) -> List[Expr]:
    """The per-dimension indices of the row-major flat index ``flat`` into ``shape`` (ints or symbolic
    dimensions: the outermost dimension that is not 1 needs no modulo, as flat < numel)."""
    out: List[Expr] = []
    stride = 1
    for d in reversed(range(len(shape))):
        extent = shape[d]
        if isinstance(extent, int) and extent == 1:
            out.append(convert(0))
            continue
        idx = flat if isinstance(stride, int) and stride == 1 else flat // stride
        outermost = all(isinstance(e, int) and e == 1 for e in shape[:d])
        out.append(idx if outermost else idx % extent)
        stride = extent if isinstance(stride, int) and stride == 1 else stride * extent
    return list(reversed(out))
