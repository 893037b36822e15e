"""Shape and data-movement operators with torch's semantics: transpose, permute, broadcast (expand),
concat/cat, split, stack, strided_slice, flip, pad, tile/repeat, tril and triu (reshapes are in
reshape.py, indexing by tensors in indexing.py).

Each is one injective compute definition (an output element reads input elements at computed
indices); the auto-scheduler turns it into a kernel for the CPU or CUDA. Shapes are checked when
the operator is built, with errors that name the operator, the shapes and the rule broken.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from hidet.graph.operator import Operator
from hidet.graph.ops.reshape import reshape
from hidet.graph.ops.utils import Ints, as_dims, as_ints, input_node, normalize_axis
from hidet.graph.tensor import Tensor, _numel as _prod  # product of dimensions, ints or symbolic
from hidet.ir.compute import compute
from hidet.ir.expr import Expr, binary, cast, convert, logical_and, maximum, minimum, promote, select, simplify_dim
from hidet.ir.task import Task


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
    dims = as_ints('permute', 'dims', dims)
    if len(dims) != x.ndim:
        raise ValueError(f'permute: dims {tuple(dims)} must name each of the {x.ndim} dimensions of {x.shape} once')
    norm = [normalize_axis('permute', d, x.ndim) for d in dims]
    if sorted(norm) != list(range(x.ndim)):
        raise ValueError(f'permute: dims {tuple(dims)} is not a permutation of the {x.ndim} dimensions of {x.shape}')
    return PermuteOp(x, norm).get_output(0)


def transpose(x: Tensor, dim0, dim1: Optional[int] = None) -> Tensor:
    """``x`` with dimensions ``dim0`` and ``dim1`` swapped, as torch.transpose; ``transpose(x, perm)`` with a
    permutation (the original Hidet's spelling) is ``permute(x, perm)``."""
    if dim1 is None:
        if not isinstance(dim0, (list, tuple)):
            raise TypeError(f'transpose: give two dimensions to swap or one permutation list, got {dim0!r}')
        return permute(x, dim0)
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
    shape = as_dims('broadcast', 'the shape', shape)
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
        sizes = as_ints('split', 'the sections', split_size_or_sections)
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(f'split: sections {tuple(sizes)} must be non-negative and sum to the size of dimension '
                             f'{axis} of {x.shape} ({n}), they sum to {sum(sizes)}')
    else:
        size = as_ints('split', 'the split size', split_size_or_sections)[0]
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
    starts, ends = as_dims('strided_slice', 'starts', starts), as_dims('strided_slice', 'ends', ends)
    axes = list(range(len(starts))) if axes is None else as_ints('strided_slice', 'axes', axes)
    strides = [1] * len(starts) if strides is None else as_ints('strided_slice', 'strides', strides)
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
    dims = [normalize_axis('flip', d, x.ndim) for d in as_ints('flip', 'dims', dims)]
    if len(set(dims)) != len(dims):
        raise ValueError(f'flip: dims {dims} name a dimension twice')
    return FlipOp(x, sorted(dims)).get_output(0)



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
    it, …; mode 'constant' (fill with ``value``; negative pads crop), 'reflect' or 'replicate' (element
    ``clamp(i - before, 0, n - 1)`` as torch's, so negative pads crop there too)."""
    pads = as_ints('pad', 'pads', pads)
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
            if mode == 'reflect' and (lo < 0 or hi < 0):
                raise ValueError(f'pad: reflect padding cannot be negative, got pads {tuple(pads)}')
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
    repeats = as_ints('tile', 'repeats', repeats)
    if any(r < 0 for r in repeats):
        raise ValueError(f'tile: repeats {tuple(repeats)} cannot be negative')
    repeats = [1] * (x.ndim - len(repeats)) + repeats
    return TileOp(x, repeats).get_output(0)


def repeat(x: Tensor, repeats: Ints) -> Tensor:
    """torch.Tensor.repeat: as tile, but ``repeats`` must cover every dimension of ``x``."""
    repeats = as_ints('repeat', 'repeats', repeats)
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
    return TriangleOp(x, as_ints(name, 'diagonal', diagonal)[0], lower).get_output(0)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dimensions (``j - i <= diagonal``), the rest zero."""
    return _triangle(x, diagonal, True)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dimensions (``j - i >= diagonal``), the rest zero."""
    return _triangle(x, diagonal, False)
