"""Reductions over any axes, with keepdim: sum, mean, max, min, prod, any, all; argmax/argmin,
var/std, logsumexp, nansum/nanmean, count_nonzero, cumsum and cumprod."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from hidet.graph.operator import Operator
from hidet.graph.ops import arithmetic as ew
from hidet.graph.ops.reshape import reshape, squeeze
from hidet.graph.ops.utils import input_node, normalize_axes, normalize_axis
from hidet.graph.tensor import Tensor, _numel
from hidet.ir.compute import compute, default_acc_dtype, reduce
from hidet.ir.expr import binary, call, cast, logical_and, logical_or, select
from hidet.ir.task import Task

FLOAT64_SUM_MIN_EXTENT = 4096  # float32 sums of at least this many elements accumulate in float64 (ReduceOp)

Axes = Optional[Union[int, Sequence[int]]]


class ReduceOp(Operator):
    def __init__(self, x: Tensor, axes: Axes, keepdim: bool, kind: str):
        a = input_node('x', x)
        dims = normalize_axes(f'reduce_{kind}', axes, len(a.shape))
        kept = [d for d in range(len(a.shape)) if d not in dims]
        out_shape = [1 if d in dims else a.shape[d] for d in range(len(a.shape))] if keepdim \
            else [a.shape[d] for d in kept]

        def element(*out_idx):
            kept_idx = [out_idx[d] for d in kept] if keepdim else list(out_idx)

            def value(*r):
                idx, ki, ri = [], iter(kept_idx), iter(r)
                for d in range(len(a.shape)):
                    idx.append(next(ri) if d in dims else next(ki))
                return a[tuple(idx)]

            # float32 sums of many elements accumulate in float64: as accurate as torch's cascaded sums,
            # whatever the order the schedule adds in (memory-bound, so the wider accumulator costs nothing);
            # shorter ones (a norm's row) in float32, as torch's, without float64 shuffles in their latency
            extent = _numel([a.shape[d] for d in dims])
            wide = kind in ('sum', 'mean') and a.dtype.name == 'float32' and not (
                isinstance(extent, int) and extent < FLOAT64_SUM_MIN_EXTENT)
            return reduce([a.shape[d] for d in dims], value, kind, acc_dtype='float64' if wide else None)

        out = compute('y', out_shape, element)
        super().__init__([x], {'axes': dims, 'keepdim': keepdim, 'kind': kind}, Task(f'reduce_{kind}', [a], [out]))


def _reduce(x: Tensor, axes: Axes, keepdim: bool, kind: str) -> Tensor:
    return ReduceOp(x, axes, keepdim, kind).get_output(0)


def _reduction(kind: str, doc: str):
    """The public ``kind`` reduction: torch's spelling (``dims``, ``keepdim``) and the original Hidet's beside it
    (``keep_dim=``, ``dim=`` / ``axis=``), kept for code written against it (docs/graph.md)."""
    def fn(x: Tensor, dims: Axes = None, keepdim: bool = False, *, keep_dim: Optional[bool] = None,
           dim: Axes = None, axis: Axes = None) -> Tensor:
        named = [d for d in (dim, axis) if d is not None]
        if named and dims is not None or len(named) > 1:
            raise TypeError(f'{kind}: give the axes once (dims, dim or axis)')
        dims = named[0] if named else dims
        keepdim = keepdim if keep_dim is None else keep_dim
        if kind == 'mean' and not x.dtype.is_float():
            raise TypeError(f'mean needs a floating-point tensor, got {x.dtype}; cast it first')
        return _reduce(x, dims, keepdim, kind)

    fn.__name__ = fn.__qualname__ = kind
    fn.__doc__ = doc
    return fn


sum = _reduction('sum', 'The sum over ``dims`` (all when None).')  # noqa: A001
mean = _reduction('mean', 'The mean over ``dims`` (all when None), of a floating-point tensor.')
max = _reduction('max', 'The maximum over ``dims`` (all when None).')  # noqa: A001
min = _reduction('min', 'The minimum over ``dims`` (all when None).')  # noqa: A001
prod = _reduction('prod', 'The product over ``dims`` (all when None).')
any = _reduction('any', 'Whether any element over ``dims`` is true.')  # noqa: A001
all = _reduction('all', 'Whether every element over ``dims`` is true.')  # noqa: A001


class ArgReduceOp(Operator):
    """argmax/argmin along one axis, given the max/min (``extreme``, keepdim) computed before: the
    first index holding it (NaN counts as the extreme, as in torch)."""

    def __init__(self, x: Tensor, extreme: Tensor, axis: int, keepdim: bool, kind: str):
        a, m = input_node('x', x), input_node('m', extreme)
        n = a.shape[axis]
        out_shape = [1 if d == axis else s for d, s in enumerate(a.shape) if keepdim or d != axis]

        def element(*idx):
            full = list(idx) if keepdim else list(idx[:axis]) + [0] + list(idx[axis:])

            def candidate(k):
                v = a[tuple(full[:axis] + [k] + full[axis + 1:])]
                mv = m[tuple(full[:axis] + [0] + full[axis + 1:])]
                hit = binary('==', v, mv)
                if v.dtype.is_float():
                    hit = logical_or(hit, logical_and(call('isnan', v, dtype='bool'), call('isnan', mv, dtype='bool')))
                return select(hit, k, n)

            return reduce([n], candidate, 'min')

        out = compute('y', out_shape, element)
        super().__init__([x, extreme], {'axis': axis, 'keepdim': keepdim}, Task(f'arg{kind}', [a, m], [out]))


def _arg(x: Tensor, axis: Optional[int], keepdim: bool, kind: str) -> Tensor:
    if axis is not None and x.ndim == 0:  # dimension 0 (or -1) of a 0-d tensor: index 0, as torch
        normalize_axis(f'arg{kind}', axis, 0)
        axis = None
    if axis is None:
        x, axis, keepdim = reshape(x, [-1]), 0, False
    axis = normalize_axis(f'arg{kind}', axis, x.ndim)
    extreme = _reduce(x, axis, True, kind)
    return ArgReduceOp(x, extreme, axis, keepdim, kind).get_output(0)


def argmax(x: Tensor, axis: Optional[int] = None, keepdim: bool = False) -> Tensor:
    return _arg(x, axis, keepdim, 'max')


def argmin(x: Tensor, axis: Optional[int] = None, keepdim: bool = False) -> Tensor:
    return _arg(x, axis, keepdim, 'min')


def var(x: Tensor, dims: Axes = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """Variance with Bessel's ``correction`` (torch.var's default 1)."""
    if not x.dtype.is_float():
        raise TypeError(f'var needs a floating-point tensor, got {x.dtype}; cast it first')
    axes = normalize_axes('var', dims, x.ndim)
    count = 1
    for d in axes:
        count *= x.shape[d]
    xf = ew.cast_(x, 'float32') if x.dtype.name in ('float16', 'bfloat16') else x
    centered = ew.subtract(xf, _reduce(xf, axes, True, 'mean'))
    total = _reduce(ew.multiply(centered, centered), axes, keepdim, 'sum')
    divisor = count - correction if count > correction else 0  # (this module's max is the reduction)
    return ew.cast_(ew.divide(total, float(divisor)), x.dtype)


def std(x: Tensor, dims: Axes = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    return ew.sqrt(var(x, dims, keepdim, correction))


def logsumexp(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over ``dims``, shifted by the maximum so nothing overflows (an all -inf slice gives
    -inf, a +inf gives +inf, as torch)."""
    if not x.dtype.is_float():
        x = ew.cast_(x, 'float32')
    xf = ew.cast_(x, 'float32') if x.dtype.name in ('float16', 'bfloat16') else x
    m = _reduce(xf, dims, True, 'max')
    shift = ew.where(ew.isinf(m), 0.0, m)  # (-inf - -inf and inf - inf would be NaN)
    total = ew.log(_reduce(ew.exp(ew.subtract(xf, shift)), dims, True, 'sum'))
    out = ew.add(total, shift)
    if not keepdim:
        out = squeeze(out, normalize_axes('logsumexp', dims, x.ndim))
    return ew.cast_(out, x.dtype)


def nansum(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:
    """sum, NaNs counted as zero."""
    return sum(ew.where(ew.isnan(x), 0, x) if x.dtype.is_float() else x, dims, keepdim)


def nanmean(x: Tensor, dims: Axes = None, keepdim: bool = False) -> Tensor:
    """mean of the elements that are not NaN (NaN where there are none, as torch)."""
    if not x.dtype.is_float():
        raise TypeError(f'nanmean needs a floating-point tensor, got {x.dtype}')
    seen = ew.logical_not_(ew.isnan(x))
    count = sum(ew.cast_(seen, 'float32'), dims, keepdim)
    return ew.cast_(ew.divide(nansum(ew.cast_(x, 'float32'), dims, keepdim), count), x.dtype)


def count_nonzero(x: Tensor, dims: Axes = None) -> Tensor:
    """How many elements are not zero, as int64."""
    return sum(ew.cast_(ew.not_equal(x, 0), 'int64'), dims, False)


class CumulativeOp(Operator):
    """Prefix sums or products along ``axis``: element i combines elements 0..i (``exclusive``: 0..i-1;
    ``reverse``: from the end, i..n-1 or i+1..n-1). Integers accumulate in int64, as torch."""

    def __init__(self, x: Tensor, axis: int, kind: str, exclusive: bool = False, reverse: bool = False):
        a = input_node('x', x)
        acc = default_acc_dtype(kind, a.dtype)
        out_dtype = acc if not a.dtype.is_float() else a.dtype
        taken = {(False, False): '<=', (True, False): '<', (False, True): '>=', (True, True): '>'}[exclusive, reverse]
        identity = 0 if kind == 'sum' else 1

        def element(*idx):
            def term(k):
                xi = tuple(list(idx[:axis]) + [k] + list(idx[axis + 1:]))
                return select(binary(taken, k, idx[axis]), cast(a[xi], acc), cast(identity, acc))

            return reduce([a.shape[axis]], term, kind, acc_dtype=acc, dtype=out_dtype)

        out = compute('y', a.shape, element)
        attrs = {'axis': axis, 'exclusive': exclusive, 'reverse': reverse}
        super().__init__([x], attrs, Task(f'cum{kind}', [a], [out]))


def cumsum(x: Tensor, axis: int, exclusive: bool = False, reverse: bool = False) -> Tensor:
    """Inclusive (or ``exclusive``) prefix sums along ``axis``, from the start (or the end, ``reverse``);
    integers accumulate in int64, as torch."""
    return CumulativeOp(x, normalize_axis('cumsum', axis, x.ndim), 'sum', exclusive, reverse).get_output(0)


def cumprod(x: Tensor, axis: int, exclusive: bool = False, reverse: bool = False) -> Tensor:
    """Inclusive (or ``exclusive``) prefix products along ``axis``, as cumsum."""
    return CumulativeOp(x, normalize_axis('cumprod', axis, x.ndim), 'prod', exclusive, reverse).get_output(0)
