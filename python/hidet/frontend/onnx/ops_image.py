"""Image ONNX operators: Resize (through hidet.ops.resize, ONNX's coordinate rules on any axes), GridSample and
AffineGrid (2-D)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from hidet.graph import ops
from hidet.frontend.onnx.registry import register
from hidet.frontend.onnx.utils import OnnxConversionError
from hidet.graph.ops.interpolate import COORDINATE_MODES, MODES, NEAREST_MODES


def _resize_check(a) -> Optional[str]:
    if a['antialias']:
        return 'antialias=1'
    for key, allowed in (('mode', MODES), ('coordinate_transformation_mode', COORDINATE_MODES),
                         ('nearest_mode', NEAREST_MODES),
                         ('keep_aspect_ratio_policy', ('stretch', 'not_larger', 'not_smaller'))):
        if a[key] not in allowed:
            return f'{key}={a[key]!r}'
    return None


@register('Resize', attrs={'antialias': 0, 'axes': None, 'coordinate_transformation_mode': 'half_pixel',
                           'cubic_coeff_a': -0.75, 'exclude_outside': 0, 'extrapolation_value': 0.0,
                           'keep_aspect_ratio_policy': 'stretch', 'mode': 'nearest',
                           'nearest_mode': 'round_prefer_floor'}, check=_resize_check)
def resize(ctx, x, roi=None, scales=None, sizes=None):
    x = ctx.tensor(x)
    a = ctx.attrs
    nd = x.ndim
    axes = [d % nd for d in a['axes']] if a['axes'] is not None else list(range(nd))
    roi_v = ctx.static(roi, 'roi')
    scales_v = ctx.static(scales, 'scales')
    sizes_v = ctx.static(sizes, 'sizes')
    if scales_v is not None and scales_v.size == 0:
        scales_v = None
    if sizes_v is not None and sizes_v.size == 0:
        sizes_v = None
    out_sizes, out_scales = list(x.shape), [1.0] * nd
    if sizes_v is not None:
        req = [int(s) for s in sizes_v.reshape(-1)]
        if len(req) != len(axes):
            raise OnnxConversionError(f'Resize: sizes {req} must have one entry per axis {axes}')
        policy = a['keep_aspect_ratio_policy']
        if policy != 'stretch':
            ratios = [req[i] / x.shape[d] for i, d in enumerate(axes)]
            r = min(ratios) if policy == 'not_larger' else max(ratios)
            for d in axes:
                out_scales[d] = r
                out_sizes[d] = int(np.floor(r * x.shape[d] + 0.5))
        else:
            for i, d in enumerate(axes):
                out_sizes[d] = req[i]
                out_scales[d] = req[i] / x.shape[d]
    elif scales_v is not None:
        sc = [float(s) for s in scales_v.reshape(-1)]
        if len(sc) != len(axes):
            raise OnnxConversionError(f'Resize: scales {sc} must have one entry per axis {axes}')
        for i, d in enumerate(axes):
            out_scales[d] = sc[i]
            out_sizes[d] = int(np.floor(x.shape[d] * sc[i]))
    else:
        raise OnnxConversionError('Resize: give scales or sizes')
    full_roi = None
    if a['coordinate_transformation_mode'] == 'tf_crop_and_resize':
        if roi_v is None:
            raise OnnxConversionError('Resize: tf_crop_and_resize needs a roi')
        r = [float(v) for v in roi_v.reshape(-1)]
        full_roi = [0.0] * nd + [1.0] * nd
        k = len(axes)
        for i, d in enumerate(axes):
            full_roi[d], full_roi[d + nd] = r[i], r[i + k]
    return ops.resize(x, out_sizes, out_scales, a['mode'], a['coordinate_transformation_mode'], a['nearest_mode'],
                      a['cubic_coeff_a'], bool(a['exclude_outside']), a['extrapolation_value'], full_roi)


_SAMPLING = {'bilinear': 'bilinear', 'linear': 'bilinear', 'nearest': 'nearest'}


def _check_grid_sample(a):
    if a['mode'] not in _SAMPLING:
        return f"mode={a['mode']!r}"
    return None if a['padding_mode'] in ('zeros', 'border', 'reflection') else f"padding_mode={a['padding_mode']!r}"


@register('GridSample', since=16, attrs={'align_corners': 0, 'mode': 'bilinear', 'padding_mode': 'zeros'},
          check=_check_grid_sample)
def grid_sample(ctx, x, grid):
    """2-D GridSample (opset 16's bilinear, opset 20's linear, nearest)."""
    return ops.grid_sample(ctx.tensor(x), ctx.tensor(grid), _SAMPLING[ctx.attrs['mode']], ctx.attrs['padding_mode'],
                           bool(ctx.attrs['align_corners']))


@register('AffineGrid', since=20, attrs={'align_corners': 0})
def affine_grid(ctx, theta, size):
    shape = ctx.static_ints(size, 'size')
    if len(shape) != 4:
        raise NotImplementedError(f'AffineGrid: only 2-D grids (size [N, C, H, W]) are supported, got {shape}')
    return ops.affine_grid(ctx.tensor(theta), shape, bool(ctx.attrs['align_corners']))
