"""N-d resizing with ONNX Resize's full coordinate rules: nearest (four rounding modes), multilinear
and cubic interpolation over any set of axes, with the coordinate transformations half_pixel,
half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric and tf_crop_and_resize.
(``resize2d`` in resize.py is torch.nn.functional.interpolate's 2-D subset.)"""
from __future__ import annotations

import itertools
from typing import List, Optional, Sequence

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute
from hidet.ir.dtypes import float32, int64
from hidet.ir.expr import Expr, binary, call, cast, convert, logical_and, logical_or, maximum, minimum, select
from hidet.ir.task import Task

COORDINATE_MODES = ('half_pixel', 'half_pixel_symmetric', 'pytorch_half_pixel', 'align_corners', 'asymmetric',
                    'tf_crop_and_resize')
NEAREST_MODES = ('round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil')
MODES = ('nearest', 'linear', 'cubic')


def _source_coordinate(x: Expr, mode: str, n_in: int, n_out: int, scale: float, roi: Sequence[float]) -> Expr:
    """The input coordinate (float32) that output index ``x`` samples. As ONNX's reference, the output
    length in the formulas is ``scale * n_in`` (a float), not the rounded ``n_out``."""
    xf = cast(x, float32)
    width = scale * n_in
    if mode == 'half_pixel':
        return (xf + 0.5) / scale - 0.5
    if mode == 'half_pixel_symmetric':
        center = n_in / 2.0 * (1.0 - n_out / width)
        return (xf + 0.5) / scale - 0.5 + center
    if mode == 'pytorch_half_pixel':
        return (xf + 0.5) / scale - 0.5 if width != 1 else convert(-0.5, float32)
    if mode == 'align_corners':
        return xf * ((n_in - 1) / (width - 1)) if width != 1 else convert(0.0, float32)
    if mode == 'asymmetric':
        return xf / scale
    start, end = roi
    if width != 1:
        return start * (n_in - 1) + xf * ((end - start) * (n_in - 1) / (width - 1))
    return convert((end - start) * (n_in - 1) / 2 + start * (n_in - 1), float32)


def _nearest(c: Expr, mode: str) -> Expr:
    if mode == 'floor':
        r = call('floor', c)
    elif mode == 'ceil':
        r = call('ceil', c)
    elif mode == 'round_prefer_floor':
        r = select(binary('==', c - call('floor', c), 0.5), call('floor', c), call('floor', c + 0.5))
    else:  # round_prefer_ceil
        r = call('floor', c + 0.5)
    return cast(r, int64)


def _cubic_weights(t: Expr, a: float) -> List[Expr]:
    """The weights of the neighbours at offsets -1, 0, 1, 2 for fraction ``t`` (Keys' cubic with ``a``)."""

    def near(d):  # |d| <= 1
        return ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


class ResizeOp(Operator):
    def __init__(self, x: Tensor, sizes: Sequence[int], scales: Sequence[float], mode: str,
                 coordinate_transformation_mode: str, nearest_mode: str, cubic_coeff_a: float,
                 exclude_outside: bool, extrapolation_value: float, roi: Optional[Sequence[float]]):
        a = input_node('x', x)
        nd = a.ndim
        coord_mode = coordinate_transformation_mode
        roi = list(roi) if roi else [0.0] * nd + [1.0] * nd
        # axes that really resize (an axis kept at scale 1 reads its own index)
        axes = [d for d in range(nd) if not (sizes[d] == a.shape[d] and scales[d] == 1.0
                                             and coord_mode != 'tf_crop_and_resize')]

        def element(*idx):
            coords = {d: _source_coordinate(idx[d], coord_mode, a.shape[d], sizes[d], scales[d],
                                            (roi[d], roi[d + nd])) for d in axes}
            outside = None
            if coord_mode == 'tf_crop_and_resize' and axes:
                outside = logical_or(*[logical_or(binary('<', coords[d], 0.0), binary('>', coords[d], a.shape[d] - 1.0))
                                       for d in axes])
            value = self._sample(a, idx, axes, coords, mode, nearest_mode, cubic_coeff_a, exclude_outside)
            if outside is not None:
                value = select(outside, convert(extrapolation_value, value.dtype), value)
            return cast(value, a.dtype)

        out = compute('y', list(sizes), element)
        attrs = {'sizes': list(sizes), 'scales': list(scales), 'mode': mode, 'coordinate_transformation_mode': coord_mode,
                 'nearest_mode': nearest_mode, 'cubic_coeff_a': cubic_coeff_a, 'exclude_outside': exclude_outside,
                 'extrapolation_value': extrapolation_value, 'roi': roi}
        super().__init__([x], attrs, Task(f'resize_{mode}', [a], [out]))

    @staticmethod
    def _sample(a, idx, axes, coords, mode, nearest_mode, cubic_a, exclude_outside) -> Expr:
        def clamp(i, n):
            return minimum(maximum(i, 0), n - 1)

        if mode == 'nearest':
            full = list(idx)
            for d in axes:
                full[d] = clamp(_nearest(coords[d], nearest_mode), a.shape[d])
            return a[tuple(full)]
        taps = {}  # axis → [(index, weight)]
        for d in axes:
            c = coords[d]
            if mode == 'linear':
                c = minimum(maximum(c, 0.0), a.shape[d] - 1.0)
            base = call('floor', c)
            t = c - base
            i0 = cast(base, int64)
            if mode == 'linear':
                taps[d] = [(clamp(i0, a.shape[d]), 1.0 - t), (clamp(i0 + 1, a.shape[d]), t)]
                continue
            ws = _cubic_weights(t, cubic_a)
            offsets = [-1, 0, 1, 2]
            if exclude_outside:
                inside = [logical_and(binary('>=', i0 + o, 0), binary('<', i0 + o, a.shape[d])) for o in offsets]
                ws = [select(ok, w, 0.0) for ok, w in zip(inside, ws)]
                total = ws[0] + ws[1] + ws[2] + ws[3]
                ws = [w / total for w in ws]
            taps[d] = [(clamp(i0 + o, a.shape[d]), w) for o, w in zip(offsets, ws)]
        acc = None
        for combo in itertools.product(*[taps[d] for d in axes]):
            full = list(idx)
            weight = None
            for d, (i, w) in zip(axes, combo):
                full[d] = i
                weight = w if weight is None else weight * w
            term = cast(a[tuple(full)], float32) * weight if weight is not None else cast(a[tuple(full)], float32)
            acc = term if acc is None else acc + term
        return acc if acc is not None else cast(a[tuple(idx)], float32)


def resize(x: Tensor, sizes: Sequence[int], scales: Optional[Sequence[float]] = None, mode: str = 'nearest',
           coordinate_transformation_mode: str = 'half_pixel', nearest_mode: str = 'round_prefer_floor',
           cubic_coeff_a: float = -0.75, exclude_outside: bool = False, extrapolation_value: float = 0.0,
           roi: Optional[Sequence[float]] = None) -> Tensor:
    """``x`` resized to ``sizes`` (one per dimension) with ONNX Resize's rules. ``scales`` (one per
    dimension) enter the coordinate transformation; they default to ``sizes / x.shape``."""
    sizes = [int(s) for s in sizes]
    if len(sizes) != x.ndim:
        raise ValueError(f'resize: sizes {sizes} must have one entry per dimension of {x.shape}')
    if mode not in MODES:
        raise NotImplementedError(f'resize: mode {mode!r} is not supported; use one of {MODES}')
    if coordinate_transformation_mode not in COORDINATE_MODES:
        raise NotImplementedError(f'resize: coordinate_transformation_mode {coordinate_transformation_mode!r} is '
                                  f'not supported; use one of {COORDINATE_MODES}')
    if nearest_mode not in NEAREST_MODES:
        raise NotImplementedError(f'resize: nearest_mode {nearest_mode!r} is not supported; use one of '
                                  f'{NEAREST_MODES}')
    if scales is None:
        scales = [s / n if n else 1.0 for s, n in zip(sizes, x.shape)]
    scales = [float(s) for s in scales]
    if any(s <= 0 for s in scales) or any(s <= 0 for s in sizes):
        raise ValueError(f'resize: sizes {sizes} and scales {scales} must be positive')
    if (mode != 'nearest') and not x.dtype.is_float():
        raise TypeError(f'resize: {mode} interpolation needs a floating-point tensor, got {x.dtype}')
    return ResizeOp(x, sizes, scales, mode, coordinate_transformation_mode, nearest_mode, float(cubic_coeff_a),
                    bool(exclude_outside), float(extrapolation_value), roi).get_output(0)

