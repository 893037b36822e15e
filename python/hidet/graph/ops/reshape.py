"""Reshapes with torch's semantics: reshape (view), flatten, squeeze and unsqueeze, on static and
symbolic shapes (a symbolic reshape matches the dimensions of both shapes as products of symbols).

A reshape is one injective compute definition: an output element reads the input element of the same
row-major position; the auto-scheduler turns it into a kernel for the CPU or CUDA.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import (
    Ints, as_int, as_ints, flatten_index, input_node, normalize_axis, unflatten_index,
)
from hidet.graph.tensor import Tensor, _numel as _prod  # product of dimensions, ints or symbolic
from hidet.ir.compute import compute
from hidet.ir.expr import Binary, Cast, Constant, Expr, SymbolVar, simplify_dim
from hidet.ir.task import Task


class ReshapeOp(Operator):
    """A copy of ``x`` with a new shape of the same number of elements (row-major order kept).

    The output of a contiguous tensor could share the input's memory (a zero-copy view); for now it
    is a kernel like any other operator, which is simpler and always correct."""

    def __init__(self, x: Tensor, shape: Sequence[int]):
        a = input_node('x', x)
        shape = tuple(shape)
        segments = _reshape_segments(a.shape, shape)

        def element(*idx):
            in_idx: List[Expr] = []
            for i0, i1, j0, j1 in segments:
                in_dims, out_dims = a.shape[i0:i1], shape[j0:j1]
                if len(in_dims) == 1 and len(out_dims) == 1:
                    in_idx.append(idx[j0])
                else:
                    in_idx.extend(unflatten_index(flatten_index(idx[j0:j1], out_dims), in_dims))
            return a[tuple(in_idx)]

        out = compute('y', shape, element)
        super().__init__([x], {'shape': list(shape)}, Task('reshape', [a], [out]))


def _reshape_segments(src: Sequence[int], dst: Sequence[int]) -> List[Tuple[int, int, int, int]]:
    """Split two shapes of equal element counts into runs of dimensions with equal products, so a
    reshape only re-indexes within each run: [(src_begin, src_end, dst_begin, dst_end), ...]."""
    if any(not isinstance(d, int) for d in list(src) + list(dst)):
        return _symbolic_segments(src, dst)
    if 0 in src or 0 in dst:
        return [(0, len(src), 0, len(dst))]
    segments = []
    i = j = i0 = j0 = 0
    pa = pb = 1
    while i < len(src) or j < len(dst):
        if j == len(dst) or (i < len(src) and pa <= pb):
            pa *= src[i]
            i += 1
        else:
            pb *= dst[j]
            j += 1
        if pa == pb:
            segments.append((i0, i, j0, j))
            i0, j0 = i, j
    return segments


class _Monomial:
    """A product of symbolic dimensions and an integer, ``coeff * prod(factor ** power)``: what reshapes of
    symbolic shapes compare (``[batch, seq, 768]`` has as many elements as ``[batch, seq, 12, 64]``). A factor
    is a symbol, or any other integer expression taken whole (``seq + 1``, compared by how it is written)."""

    def __init__(self, coeff: int = 1, powers: Optional[Dict[str, int]] = None, factors: Optional[Dict] = None):
        self.coeff, self.powers = coeff, {k: v for k, v in (powers or {}).items() if v}
        self.factors = {k: e for k, e in (factors or {}).items() if k in self.powers}  # key → expression

    @staticmethod
    def of(dim) -> Optional['_Monomial']:
        """The monomial of a dimension (an int, a symbol, a product of them, or another integer expression
        as one factor); None for what is not an integer."""
        if isinstance(dim, int):
            return _Monomial(dim)
        if isinstance(dim, SymbolVar):
            return _Monomial(1, {dim.name: 1}, {dim.name: dim})
        if isinstance(dim, Constant) and dim.dtype.is_integer():
            return _Monomial(int(dim.value))
        if isinstance(dim, Cast):
            return _Monomial.of(dim.a)
        if isinstance(dim, Binary) and dim.op == '*':
            a, b = _Monomial.of(dim.a), _Monomial.of(dim.b)
            return None if a is None or b is None else a * b
        if isinstance(dim, Expr) and dim.dtype.is_integer():
            dim = simplify_dim(dim)
            if not isinstance(dim, Expr) or isinstance(dim, Binary) and dim.op == '*':
                return _Monomial.of(dim)
            key = f'({dim!r})'
            return _Monomial(1, {key: 1}, {key: dim})
        return None

    def __mul__(self, other: '_Monomial') -> '_Monomial':
        powers = dict(self.powers)
        for k, v in other.powers.items():
            powers[k] = powers.get(k, 0) + v
        return _Monomial(self.coeff * other.coeff, powers, {**self.factors, **other.factors})

    def divide(self, other: '_Monomial') -> Optional['_Monomial']:
        """self / other when it is a monomial (integer coefficient, no negative power), else None."""
        if other.coeff == 0 or self.coeff % other.coeff:
            return None
        powers = dict(self.powers)
        for k, v in other.powers.items():
            powers[k] = powers.get(k, 0) - v
            if powers[k] < 0:
                return None
        return _Monomial(self.coeff // other.coeff, powers, self.factors)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Monomial) and (self.coeff, self.powers) == (other.coeff, other.powers)

    def dim(self):
        """As a dimension: an int, or an expression of the factors."""
        out = self.coeff
        for key in sorted(self.powers):
            for _ in range(self.powers[key]):
                out = self.factors[key] if isinstance(out, int) and out == 1 else out * self.factors[key]
        return out


def _monomial_product(op: str, dims) -> '_Monomial':
    out = _Monomial()
    for d in dims:
        m = _Monomial.of(d)
        if m is None:
            raise TypeError(f'{op}: dimension {d!r} is not an integer')
        out = out * m
    return out


def _infer_symbolic_shape(op: str, x: Tensor, shape: Sequence) -> Tuple:
    """_infer_shape where ``x`` or ``shape`` has symbolic dimensions: element counts compared as monomials."""
    shape = [s if isinstance(s, Expr) else as_int(s) for s in shape]
    unknown = [d for d, s in enumerate(shape) if isinstance(s, int) and s == -1]
    if len(unknown) > 1:
        raise ValueError(f'{op}: shape {tuple(shape)} has more than one -1; only one dimension can be inferred')
    numel = _monomial_product(op, x.shape)
    known = _monomial_product(op, [s for s in shape if not (isinstance(s, int) and s == -1)])
    if unknown:
        rest = numel.divide(known)
        if rest is None:
            raise ValueError(f'{op}: cannot reshape {x.shape} into {tuple(shape)}: the other dimensions do not '
                             'divide the element count')
        shape[unknown[0]] = rest.dim()
    elif known != numel:
        raise ValueError(f'{op}: cannot reshape {x.shape} into {tuple(shape)}: the element counts differ')
    return tuple(shape)


def _symbolic_segments(src, dst) -> List[Tuple[int, int, int, int]]:
    """_reshape_segments with symbolic dimensions: the side whose running product divides the other's
    advances; where neither does (or a symbol may be 0), one run of everything."""
    segments = []
    i = j = i0 = j0 = 0
    pa = pb = _Monomial()
    while i < len(src) or j < len(dst):
        if j == len(dst) or (i < len(src) and pb.divide(pa) is not None):
            pa = pa * _Monomial.of(src[i])
            i += 1
        elif i == len(src) or pa.divide(pb) is not None:
            pb = pb * _Monomial.of(dst[j])
            j += 1
        else:
            return [(0, len(src), 0, len(dst))]
        if pa == pb:
            segments.append((i0, i, j0, j))
            i0, j0 = i, j
    if i0 != len(src) or j0 != len(dst):
        return [(0, len(src), 0, len(dst))]
    return segments


def _infer_shape(op: str, x: Tensor, shape: Sequence[int]) -> Tuple[int, ...]:
    if any(isinstance(s, Expr) for s in list(x.shape) + list(shape if isinstance(shape, (list, tuple)) else [])):
        return _infer_symbolic_shape(op, x, shape)
    shape = as_ints(op, 'the shape', shape)
    unknown = [d for d, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise ValueError(f'{op}: shape {tuple(shape)} has more than one -1; only one dimension can be inferred')
    if any(s < -1 for s in shape):
        raise ValueError(f'{op}: shape {tuple(shape)} has a negative dimension other than -1')
    numel = x.numel()
    if unknown:
        known = _prod(s for s in shape if s != -1)
        if known == 0 or numel % known != 0:
            raise ValueError(f'{op}: cannot reshape {x.shape} ({numel} elements) into {tuple(shape)}: the other '
                             f'dimensions ({known} elements) do not divide the element count')
        shape[unknown[0]] = numel // known
    if _prod(shape) != numel:
        raise ValueError(f'{op}: cannot reshape {x.shape} ({numel} elements) into {tuple(shape)} '
                         f'({_prod(shape)} elements)')
    return tuple(shape)


def reshape(x: Tensor, shape: Sequence[int]) -> Tensor:
    """``x`` with ``shape`` (one dimension may be -1: inferred from the element count), as torch.reshape."""
    return ReshapeOp(x, _infer_shape('reshape', x, shape)).get_output(0)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Dimensions ``start_dim`` … ``end_dim`` (inclusive) merged into one, as torch.flatten."""
    if x.ndim == 0:
        return reshape(x, [1])
    start, end = normalize_axis('flatten', start_dim, x.ndim), normalize_axis('flatten', end_dim, x.ndim)
    if start > end:
        raise ValueError(f'flatten: start_dim {start_dim} comes after end_dim {end_dim} for a tensor of shape '
                         f'{x.shape}')
    shape = list(x.shape[:start]) + [_prod(x.shape[start:end + 1])] + list(x.shape[end + 1:])
    return reshape(x, shape)


def squeeze(x: Tensor, dims: Optional[Ints] = None) -> Tensor:
    """``x`` without its size-1 dimensions (all, or those of ``dims``; a named dimension whose size is
    not 1 is kept, as in torch)."""
    if dims is None:
        dims = [d for d in range(x.ndim) if x.shape[d] == 1]
    else:
        dims = [normalize_axis('squeeze', d, x.ndim) for d in as_ints('squeeze', 'dims', dims)]
        dims = [d for d in dims if x.ndim > 0 and x.shape[d] == 1]
    return reshape(x, [s for d, s in enumerate(x.shape) if d not in dims])


def unsqueeze(x: Tensor, dims: Ints) -> Tensor:
    """``x`` with new size-1 dimensions at positions ``dims`` of the result (as torch.unsqueeze for one
    dimension; several as ONNX Unsqueeze)."""
    dims = as_ints('unsqueeze', 'dims', dims)
    ndim = x.ndim + len(dims)
    axes = [normalize_axis('unsqueeze', d, ndim) for d in dims]
    if len(set(axes)) != len(axes):
        raise ValueError(f'unsqueeze: dims {dims} name a dimension twice (result has {ndim} dimensions)')
    rest = iter(x.shape)
    return reshape(x, [1 if d in axes else next(rest) for d in range(ndim)])
