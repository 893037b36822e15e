"""Shape and data-movement operators with torch's semantics: reshape, flatten, squeeze, unsqueeze,
transpose, permute, broadcast (expand), concat/cat, split, stack, strided_slice, gather,
index_select, take, embedding, pad, flip, tile/repeat, tril and triu.

Each is one injective compute definition (an output element reads input elements at computed
indices); the auto-scheduler turns it into a kernel for the CPU or CUDA. Shapes are checked when
the operator is built, with errors that name the operator, the shapes and the rule broken.

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

from typing import Dict, List, Optional, Sequence, Tuple, Union

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import input_node, normalize_axis
from hidet.graph.tensor import Tensor, _numel as _prod  # product of dimensions, ints or symbolic
from hidet.ir.compute import compute
from hidet.ir.dtypes import int64
from hidet.ir.expr import Expr, binary, cast, convert, logical_and, maximum, minimum, promote, select, simplify_dim
from hidet.ir.task import Task

Ints = Union[int, Sequence[int]]


# ---------------------------------------------------------------- helpers

def _ints(op: str, what: str, value) -> List[int]:
    """``value`` (an int or a sequence of ints) as a list of Python ints."""
    if isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    try:
        return [_int(v) for v in items]
    except TypeError:
        raise TypeError(f'{op}: {what} must be an int or a sequence of ints, got {value!r}') from None


def _dims(op: str, what: str, value) -> list:
    """As ``_ints``, where symbolic dimensions (hidet expressions) may stand for ints."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return [v if isinstance(v, Expr) else _ints(op, what, v)[0] for v in items]


def _int(v) -> int:
    if isinstance(v, bool) or not hasattr(v, '__index__'):
        raise TypeError(f'not an int: {v!r}')
    return v.__index__()


def _flatten_index(indices: Sequence[Expr], shape: Sequence[int]) -> Expr:
    """The row-major flat index of ``indices`` in a tensor of ``shape``."""
    flat: Expr = convert(0)
    first = True
    for idx, extent in zip(indices, shape):
        if extent == 1:
            continue  # its index is 0
        flat = idx if first else flat * extent + idx
        first = False
    return flat


def _unflatten_index(flat: Expr, shape: Sequence[int]) -> List[Expr]:
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


def _check_index_range(op: str, index: Tensor, extent: int, axis: int) -> None:
    """Raise IndexError for an index outside ``[-extent, extent)`` where that is cheap to find out: for
    any index into an empty dimension, and for the values of index tensors in host memory."""
    if index.numel() == 0:
        return
    if extent == 0:
        raise IndexError(f'{op}: cannot index dimension {axis} of size 0 (every index is out of range)')
    if index.is_symbolic() or not index.device.is_cpu():
        return  # on the GPU the kernel clamps instead (see the module's docstring)
    import numpy as np

    values = np.asarray(index.numpy())
    lo, hi = values.min(), values.max()
    if lo < -extent or hi >= extent:
        bad = int(lo) if lo < -extent else int(hi)
        raise IndexError(f'{op}: index {bad} is out of range for dimension {axis} with size {extent} '
                         f'(valid indices: {-extent} to {extent - 1})')


# ---------------------------------------------------------------- reshape family
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
                    in_idx.extend(_unflatten_index(_flatten_index(idx[j0:j1], out_dims), in_dims))
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
        from hidet.ir.expr import Binary, Cast, Constant, Expr, SymbolVar

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
    from hidet.ir.expr import Expr

    shape = [s if isinstance(s, Expr) else _int(s) for s in shape]
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
    from hidet.ir.expr import Expr

    if any(isinstance(s, Expr) for s in list(x.shape) + list(shape if isinstance(shape, (list, tuple)) else [])):
        return _infer_symbolic_shape(op, x, shape)
    shape = _ints(op, 'the shape', shape)
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
        dims = [normalize_axis('squeeze', d, x.ndim) for d in _ints('squeeze', 'dims', dims)]
        dims = [d for d in dims if x.ndim > 0 and x.shape[d] == 1]
    return reshape(x, [s for d, s in enumerate(x.shape) if d not in dims])


def unsqueeze(x: Tensor, dims: Ints) -> Tensor:
    """``x`` with new size-1 dimensions at positions ``dims`` of the result (as torch.unsqueeze for one
    dimension; several as ONNX Unsqueeze)."""
    dims = _ints('unsqueeze', 'dims', dims)
    ndim = x.ndim + len(dims)
    axes = [normalize_axis('unsqueeze', d, ndim) for d in dims]
    if len(set(axes)) != len(axes):
        raise ValueError(f'unsqueeze: dims {dims} name a dimension twice (result has {ndim} dimensions)')
    rest = iter(x.shape)
    return reshape(x, [1 if d in axes else next(rest) for d in range(ndim)])


# ---------------------------------------------------------------- permutations and broadcast
class PermuteOp(Operator):
    def __init__(self, x: Tensor, dims: Sequence[int]):
        a = input_node('x', x)
        dims = list(dims)
        shape = [a.shape[d] for d in dims]

        def element(*idx):
            in_idx: List[Expr] = [convert(0)] * a.ndim
            for out_d, in_d in enumerate(dims):
                in_idx[in_d] = idx[out_d]
            return a[tuple(in_idx)]

        super().__init__([x], {'dims': dims}, Task('permute', [a], [compute('y', shape, element)]))


def permute(x: Tensor, dims: Sequence[int]) -> Tensor:
    """``x`` with its dimensions reordered: result dimension i is input dimension ``dims[i]``."""
    dims = _ints('permute', 'dims', dims)
    if len(dims) != x.ndim:
        raise ValueError(f'permute: dims {tuple(dims)} must name each of the {x.ndim} dimensions of {x.shape} once')
    norm = [normalize_axis('permute', d, x.ndim) for d in dims]
    if sorted(norm) != list(range(x.ndim)):
        raise ValueError(f'permute: dims {tuple(dims)} is not a permutation of the {x.ndim} dimensions of {x.shape}')
    return PermuteOp(x, norm).get_output(0)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """``x`` with dimensions ``dim0`` and ``dim1`` swapped, as torch.transpose."""
    if x.ndim == 0:
        normalize_axis('transpose', dim0, 0)
        normalize_axis('transpose', dim1, 0)
        return reshape(x, [])
    d0, d1 = normalize_axis('transpose', dim0, x.ndim), normalize_axis('transpose', dim1, x.ndim)
    dims = list(range(x.ndim))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return PermuteOp(x, dims).get_output(0)


class BroadcastOp(Operator):
    def __init__(self, x: Tensor, shape: Sequence[int]):
        a = input_node('x', x)
        shape = tuple(shape)
        offset = len(shape) - a.ndim

        def element(*idx):
            return a[tuple(convert(0) if a.shape[d] == 1 else idx[offset + d] for d in range(a.ndim))]

        super().__init__([x], {'shape': list(shape)}, Task('broadcast', [a], [compute('y', shape, element)]))


def broadcast(x: Tensor, shape: Sequence[int]) -> Tensor:
    """``x`` repeated along its size-1 dimensions (and new leading ones) to ``shape``, as torch.expand
    (-1 keeps a dimension's size)."""
    shape = _dims('broadcast', 'the shape', shape)
    if len(shape) < x.ndim:
        raise ValueError(f'broadcast: cannot broadcast {x.shape} to {tuple(shape)}: the target has fewer '
                         f'dimensions ({len(shape)}) than the tensor ({x.ndim})')
    offset = len(shape) - x.ndim
    out = []
    for d, s in enumerate(shape):
        static = isinstance(s, int)
        if d < offset:
            if static and s < 0:
                raise ValueError(f'broadcast: cannot broadcast {x.shape} to {tuple(shape)}: a new leading '
                                 f'dimension cannot be {s}')
            out.append(s)
            continue
        n = x.shape[d - offset]
        if static and s == -1:
            out.append(n)
        elif s is n or static and isinstance(n, int) and s == n or (isinstance(n, int) and n == 1 and
                                                                    (not static or s >= 0)):
            out.append(s)
        else:
            raise ValueError(f'broadcast: cannot broadcast {x.shape} to {tuple(shape)}: dimension {d} has size '
                             f'{n}, which must equal {s} or be 1')
    return BroadcastOp(x, out).get_output(0)


# ---------------------------------------------------------------- concat, stack, split
def _common_dtype(tensors: Sequence[Tensor]):
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = promote(dtype, t.dtype)
    return dtype


class ConcatOp(Operator):
    def __init__(self, tensors: Sequence[Tensor], axis: int):
        nodes = [input_node(f'x{i}', t) for i, t in enumerate(tensors)]
        dtype = _common_dtype(tensors)
        offsets = [0]  # ints, or expressions of symbolic dimensions
        for n in nodes:
            offsets.append(n.shape[axis] if _is_zero(offsets[-1]) else offsets[-1] + n.shape[axis])
        shape = list(nodes[0].shape)
        shape[axis] = offsets[-1]

        def element(*idx):
            k = idx[axis]

            def read(i):
                local = list(idx)
                local[axis] = k if _is_zero(offsets[i]) else k - offsets[i]
                return cast(nodes[i][tuple(local)], dtype)

            value = read(len(nodes) - 1)
            for i in reversed(range(len(nodes) - 1)):
                value = select(binary('<', k, offsets[i + 1]), read(i), value)
            return value

        out = compute('y', shape, element)
        super().__init__(tensors, {'axis': axis}, Task('concat', nodes, [out]))


def _is_zero(d) -> bool:
    return isinstance(d, int) and d == 0


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors joined along ``axis``, as torch.cat (dtypes promoted; empty 1-D tensors are skipped)."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError('concat: expected at least one tensor')
    ndim = max(t.ndim for t in tensors)
    if ndim == 0:
        raise ValueError('concat: zero-dimensional tensors cannot be concatenated; unsqueeze them or use stack')
    # torch skips legacy empty 1-D tensors of shape (0,) beside tensors of more dimensions
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0 and ndim > 1)] or tensors[:1]
    ax = normalize_axis('concat', axis, ndim)
    first = kept[0]
    for t in kept[1:]:
        if t.ndim != first.ndim or any(t.shape[d] != first.shape[d] for d in range(ndim) if d != ax):
            shapes = ', '.join(str(s.shape) for s in tensors)
            raise ValueError(f'concat: shapes {shapes} do not match: all dimensions except {ax} must be equal')
    return ConcatOp(kept, ax).get_output(0)


cat = concat


class StackOp(Operator):
    def __init__(self, tensors: Sequence[Tensor], axis: int):
        nodes = [input_node(f'x{i}', t) for i, t in enumerate(tensors)]
        dtype = _common_dtype(tensors)
        shape = list(nodes[0].shape)
        shape.insert(axis, len(nodes))

        def element(*idx):
            k = idx[axis]
            local = tuple(idx[:axis] + idx[axis + 1:])
            value = cast(nodes[-1][local], dtype)
            for i in reversed(range(len(nodes) - 1)):
                value = select(binary('==', k, i), cast(nodes[i][local], dtype), value)
            return value

        out = compute('y', shape, element)
        super().__init__(tensors, {'axis': axis}, Task('stack', nodes, [out]))


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new dimension ``axis``, as torch.stack."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError('stack: expected at least one tensor')
    shapes = {t.shape for t in tensors}
    if len(shapes) > 1:
        raise ValueError(f'stack: shapes {", ".join(str(t.shape) for t in tensors)} do not match: all tensors must '
                         'have the same shape')
    ax = normalize_axis('stack', axis, tensors[0].ndim + 1)
    return StackOp(tensors, ax).get_output(0)


class SplitOp(Operator):
    """The pieces of ``x`` along ``axis`` starting at ``offsets`` with ``sizes``: one output each (one
    kernel library for all)."""

    def __init__(self, x: Tensor, axis: int, offsets: Sequence[int], sizes: Sequence[int]):
        a = input_node('x', x)
        outs = []
        for i, (off, size) in enumerate(zip(offsets, sizes)):
            shape = list(a.shape)
            shape[axis] = size

            def element(*idx, off=off):
                return a[tuple(idx[d] + off if d == axis and off else idx[d] for d in range(a.ndim))]

            outs.append(compute(f'y{i}', shape, element))
        super().__init__([x], {'axis': axis, 'offsets': list(offsets), 'sizes': list(sizes)},
                         Task('split', [a], outs))


def split(x: Tensor, split_size_or_sections: Ints, axis: int = 0) -> List[Tensor]:
    """``x`` cut along ``axis`` into pieces of ``split_size_or_sections`` elements (an int: equal pieces,
    the last one smaller; a list: those sizes, summing to the dimension), as torch.split."""
    if x.ndim == 0:
        raise ValueError('split: a zero-dimensional tensor cannot be split')
    ax = normalize_axis('split', axis, x.ndim)
    n = x.shape[ax]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = _ints('split', 'the sections', split_size_or_sections)
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(f'split: sections {tuple(sizes)} must be non-negative and sum to the size of dimension '
                             f'{axis} of {x.shape} ({n}), they sum to {sum(sizes)}')
    else:
        size = _ints('split', 'the split size', split_size_or_sections)[0]
        if size <= 0 and not (size == 0 and n == 0):
            raise ValueError(f'split: the split size must be positive, got {size}')
        sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    rest = _prod(x.shape[:ax] + x.shape[ax + 1:])
    full = [i for i, s in enumerate(sizes) if s > 0 and (not isinstance(rest, int) or rest > 0)]  # symbolic: some
    results: List[Optional[Tensor]] = [None] * len(sizes)
    if full:
        pieces = SplitOp(x, ax, [offsets[i] for i in full], [sizes[i] for i in full]).get_outputs()
        for i, piece in zip(full, pieces):
            results[i] = piece
    for i, r in enumerate(results):
        if r is None:  # an empty piece: no kernel runs
            results[i] = StridedSliceOp(x, starts=[offsets[i]], axes=[ax], steps=[1], lengths=[sizes[i]]).get_output(0)
    return results


# ---------------------------------------------------------------- slicing
class StridedSliceOp(Operator):
    """Elements ``start + i * step`` (i < length) along each sliced axis; starts, steps and lengths
    are already normalized."""

    def __init__(self, x: Tensor, starts: Sequence[int], axes: Sequence[int], steps: Sequence[int],
                 lengths: Sequence[int]):
        a = input_node('x', x)
        spec = {ax: (st, sp) for ax, st, sp in zip(axes, starts, steps)}
        shape = list(a.shape)
        for ax, length in zip(axes, lengths):
            shape[ax] = length

        def element(*idx):
            in_idx = []
            for d in range(a.ndim):
                i = idx[d]
                if d in spec:
                    st, sp = spec[d]
                    i = i * sp if sp != 1 else i
                    i = i + st if not (isinstance(st, int) and st == 0) else i
                in_idx.append(i)
            return a[tuple(in_idx)]

        attrs = {'starts': list(starts), 'axes': list(axes), 'steps': list(steps), 'lengths': list(lengths)}
        super().__init__([x], attrs, Task('strided_slice', [a], [compute('y', shape, element)]))


def strided_slice(x: Tensor, starts: Sequence[int], ends: Sequence[int], axes: Optional[Sequence[int]] = None,
                  strides: Optional[Sequence[int]] = None) -> Tensor:
    """``x[starts[0]:ends[0]:strides[0], ...]`` along ``axes`` (default: the first len(starts) axes),
    with Python's rules: negative indices count from the end and out-of-range ones are clamped. Strides
    may be negative (walking backwards), not zero."""
    starts, ends = _dims('strided_slice', 'starts', starts), _dims('strided_slice', 'ends', ends)
    axes = list(range(len(starts))) if axes is None else _ints('strided_slice', 'axes', axes)
    strides = [1] * len(starts) if strides is None else _ints('strided_slice', 'strides', strides)
    if not len(starts) == len(ends) == len(axes) == len(strides):
        raise ValueError(f'strided_slice: starts {starts}, ends {ends}, axes {axes} and strides {strides} must '
                         'have the same length')
    norm_axes = [normalize_axis('strided_slice', ax, x.ndim) for ax in axes]
    if len(set(norm_axes)) != len(norm_axes):
        raise ValueError(f'strided_slice: axes {axes} name a dimension twice')
    out_starts, out_lengths = [], []
    for ax, st, en, sp in zip(norm_axes, starts, ends, strides):
        if sp == 0:
            raise ValueError(f'strided_slice: the stride of axis {ax} is 0; strides must be nonzero')
        n = x.shape[ax]
        if any(isinstance(v, Expr) for v in (st, en, n)):
            st, length = _symbolic_range(ax, st, en, sp, n)
            out_starts.append(st)
            out_lengths.append(length)
            continue
        r = range(*slice(st, en, sp).indices(n))
        out_starts.append(r.start if len(r) else 0)
        out_lengths.append(len(r))
    return StridedSliceOp(x, out_starts, norm_axes, strides, out_lengths).get_output(0)


def _symbolic_range(axis: int, start, end, step: int, n):
    """(start, length) of ``start:end`` (step 1) along a dimension of size ``n`` where some are symbolic:
    negative ints count from the end, ends past a symbolic size are not clamped (the bounds are taken to be
    in range, as a model's slices of its own sizes are)."""
    if step != 1:
        raise NotImplementedError(f'strided_slice: axis {axis} has a symbolic size or bound ({start}:{end} of {n}); '
                                  f'such slices take step 1, got {step}')
    start = n + start if isinstance(start, int) and start < 0 else start
    end = n + end if isinstance(end, int) and end < 0 else n if isinstance(end, int) and end >= _FAR else end
    if isinstance(start, int) and isinstance(end, int):
        return start, max(end - start, 0)
    return simplify_dim(start), simplify_dim(end - start)


_FAR = 1 << 62  # an end this large means "to the end" (torch's and _getitem's spelling of an open slice)


class FlipOp(Operator):
    def __init__(self, x: Tensor, dims: Sequence[int]):
        a = input_node('x', x)

        def element(*idx):
            return a[tuple((a.shape[d] - 1) - idx[d] if d in dims and a.shape[d] > 1 else idx[d]
                           for d in range(a.ndim))]

        super().__init__([x], {'dims': list(dims)}, Task('flip', [a], [compute('y', a.shape, element)]))


def flip(x: Tensor, dims: Ints) -> Tensor:
    """``x`` with the order of elements reversed along ``dims``, as torch.flip."""
    dims = [normalize_axis('flip', d, x.ndim) for d in _ints('flip', 'dims', dims)]
    if len(set(dims)) != len(dims):
        raise ValueError(f'flip: dims {dims} name a dimension twice')
    return FlipOp(x, sorted(dims)).get_output(0)


# ---------------------------------------------------------------- indexing by tensors
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


# ---------------------------------------------------------------- pad, tile, triangles
class PadOp(Operator):
    """``x`` with ``before[d]`` / ``after[d]`` elements added (negative: removed) at each end of
    dimension d, filled by ``mode``."""

    def __init__(self, x: Tensor, before: Sequence[int], after: Sequence[int], mode: str, value):
        a = input_node('x', x)
        shape = [n + lo + hi for n, lo, hi in zip(a.shape, before, after)]
        fill = convert(value, a.dtype)

        def element(*idx):
            in_idx, inside = [], []
            for d in range(a.ndim):
                n, lo, hi = a.shape[d], before[d], after[d]
                i = idx[d] - lo if lo else idx[d]
                if lo == 0 and hi == 0:
                    pass
                elif mode == 'constant':
                    if lo > 0:
                        inside.append(binary('>=', i, 0))
                    if hi > 0:
                        inside.append(binary('<', i, n))
                elif mode == 'reflect':
                    i = select(binary('<', i, 0), -i, i) if lo > 0 else i
                    i = select(binary('>=', i, n), 2 * (n - 1) - i, i) if hi > 0 else i
                else:  # replicate
                    i = maximum(i, 0) if lo > 0 else i
                    i = minimum(i, n - 1) if hi > 0 else i
                in_idx.append(i)
            value_ = a[tuple(in_idx)]
            return select(logical_and(*inside), value_, fill) if inside else value_

        attrs = {'before': list(before), 'after': list(after), 'mode': mode, 'value': value}
        super().__init__([x], attrs, Task(f'pad_{mode}', [a], [compute('y', shape, element)]))


def pad(x: Tensor, pads: Sequence[int], mode: str = 'constant', value=0) -> Tensor:
    """torch.nn.functional.pad: ``pads`` = (before, after) of the last dimension, then of the one before
    it, …; mode 'constant' (fill with ``value``; negative pads crop), 'reflect' or 'replicate'."""
    pads = _ints('pad', 'pads', pads)
    if len(pads) % 2 or len(pads) // 2 > x.ndim:
        raise ValueError(f'pad: pads {tuple(pads)} must have an even length of at most 2 * {x.ndim} (two per '
                         f'dimension of {x.shape}, last dimension first)')
    if mode not in ('constant', 'reflect', 'replicate'):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; use 'constant', 'reflect' or 'replicate'")
    before, after = [0] * x.ndim, [0] * x.ndim
    for k in range(len(pads) // 2):
        before[x.ndim - 1 - k], after[x.ndim - 1 - k] = pads[2 * k], pads[2 * k + 1]
    for d in range(x.ndim):
        n, lo, hi = x.shape[d], before[d], after[d]
        if n + lo + hi < 0:
            raise ValueError(f'pad: pads {tuple(pads)} shrink dimension {d} of {x.shape} below zero ({n + lo + hi})')
        if mode != 'constant' and (lo or hi):
            if lo < 0 or hi < 0:
                raise ValueError(f'pad: {mode} padding cannot be negative, got pads {tuple(pads)}')
            if n == 0:
                raise ValueError(f'pad: {mode} padding of dimension {d} of {x.shape} needs a non-empty dimension')
            if mode == 'reflect' and (lo >= n or hi >= n):
                raise ValueError(f'pad: reflect padding ({lo}, {hi}) of dimension {d} of {x.shape} must be smaller '
                                 f'than the dimension ({n})')
    if mode != 'constant':
        value = 0
    return PadOp(x, before, after, mode, value).get_output(0)


class TileOp(Operator):
    def __init__(self, x: Tensor, repeats: Sequence[int]):
        a = input_node('x', x)
        offset = len(repeats) - a.ndim
        shape = [r * (a.shape[d - offset] if d >= offset else 1) for d, r in enumerate(repeats)]

        def element(*idx):
            in_idx = []
            for d in range(a.ndim):
                i, n = idx[offset + d], a.shape[d]
                in_idx.append(convert(0) if n == 1 else i % n if repeats[offset + d] != 1 else i)
            return a[tuple(in_idx)]

        super().__init__([x], {'repeats': list(repeats)}, Task('tile', [a], [compute('y', shape, element)]))


def tile(x: Tensor, repeats: Ints) -> Tensor:
    """``x`` repeated ``repeats[d]`` times along each dimension, as torch.tile (missing repeats are 1;
    extra ones add leading dimensions)."""
    repeats = _ints('tile', 'repeats', repeats)
    if any(r < 0 for r in repeats):
        raise ValueError(f'tile: repeats {tuple(repeats)} cannot be negative')
    repeats = [1] * (x.ndim - len(repeats)) + repeats
    return TileOp(x, repeats).get_output(0)


def repeat(x: Tensor, repeats: Ints) -> Tensor:
    """torch.Tensor.repeat: as tile, but ``repeats`` must cover every dimension of ``x``."""
    repeats = _ints('repeat', 'repeats', repeats)
    if len(repeats) < x.ndim:
        raise ValueError(f'repeat: repeats {tuple(repeats)} has fewer entries than the tensor {x.shape} has '
                         f'dimensions ({x.ndim})')
    return tile(x, repeats)


class TriangleOp(Operator):
    def __init__(self, x: Tensor, diagonal: int, lower: bool):
        a = input_node('x', x)

        def element(*idx):
            i, j = idx[-2], idx[-1]
            d = j - i
            keep = binary('<=', d, diagonal) if lower else binary('>=', d, diagonal)
            return select(keep, a[idx], convert(0, a.dtype))

        name = 'tril' if lower else 'triu'
        super().__init__([x], {'diagonal': diagonal}, Task(name, [a], [compute('y', a.shape, element)]))


def _triangle(x: Tensor, diagonal: int, lower: bool) -> Tensor:
    name = 'tril' if lower else 'triu'
    if x.ndim < 2:
        raise ValueError(f'{name}: the input must have at least 2 dimensions, got {x.shape}')
    return TriangleOp(x, _ints(name, 'diagonal', diagonal)[0], lower).get_output(0)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dimensions (``j - i <= diagonal``), the rest zero."""
    return _triangle(x, diagonal, True)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dimensions (``j - i >= diagonal``), the rest zero."""
    return _triangle(x, diagonal, False)
