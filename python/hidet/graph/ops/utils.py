"""Shape helpers shared by the operator families: broadcasting and axis normalization, with
errors that name the operator, the shapes and the rule broken."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

from hidet.ir.compute import TensorNode, tensor_input
from hidet.ir.expr import Expr, convert, simplify_dim


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


def broadcast_indices(indices: Sequence[Expr], shape: Sequence[int]) -> List[Expr]:
    """Indices into a tensor of ``shape`` broadcast to the (longer) index list ``indices``."""
    offset = len(indices) - len(shape)
    return [convert(0) if extent == 1 else indices[offset + d] for d, extent in enumerate(shape)]


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
    if len(set(result)) != len(result):
        raise ValueError(f'{op}: axis {list(axes)} names a dimension twice')
    return result
