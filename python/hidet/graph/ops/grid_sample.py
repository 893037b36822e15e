"""grid_sample and affine_grid (torch.nn.functional's, ONNX GridSample / AffineGrid) in 2-D.

Each output pixel reads the input at the grid's (x, y) in [-1, 1], unnormalized with or without
``align_corners``, sampled 'bilinear' (four taps) or 'nearest' (half to even, as torch); taps outside the
input read 'zeros', the 'border' pixel, or the 'reflection' of the coordinate. Coordinates are computed in
float32, as torch computes them.
"""
from __future__ import annotations

from hidet.graph.creation import asarray
from hidet.graph.operator import Operator
from hidet.graph.ops.matmul import matmul
from hidet.graph.ops.reshape import reshape
from hidet.graph.ops.transform import transpose
from hidet.graph.ops.utils import input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute
from hidet.ir.dtypes import float32, int64
from hidet.ir.expr import Expr, binary, call, cast, convert, logical_and, maximum, minimum, select
from hidet.ir.task import Task

MODES = ('bilinear', 'nearest')
PADDINGS = ('zeros', 'border', 'reflection')


def _reflect(x: Expr, twice_low: int, twice_high: int) -> Expr:
    """x reflected into [twice_low / 2, twice_high / 2] (torch's reflect_coordinates)."""
    if twice_low == twice_high:
        return convert(0.0, float32)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    d = call('abs', x - low)
    extra = call('fmod', d, convert(span, float32))
    flips = cast(call('floor', d / span), int64)
    even = binary('==', binary('%', flips, convert(2, int64)), convert(0, int64))
    return select(even, extra + low, span - extra + low)


def _source(coord: Expr, size: int, padding: str, align_corners: bool) -> Expr:
    """A normalized grid coordinate as a (float) pixel coordinate of a dimension of ``size``."""
    x = (coord + 1.0) / 2.0 * (size - 1) if align_corners else ((coord + 1.0) * size - 1.0) / 2.0
    if padding == 'reflection':
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
    if padding in ('border', 'reflection'):
        x = minimum(maximum(x, convert(0.0, float32)), convert(float(size - 1), float32))
    return x


class GridSampleOp(Operator):
    def __init__(self, x: Tensor, grid: Tensor, mode: str, padding: str, align_corners: bool):
        a, g = input_node('x', x), input_node('grid', grid)
        n, c, h, w = a.shape

        def tap(nn, cc, yi: Expr, xi: Expr) -> Expr:
            """input[nn, cc, yi, xi] as float32, 0 outside (indices clamped for the read itself)."""
            inside = logical_and(logical_and(binary('>=', yi, convert(0, int64)), binary('<', yi, convert(h, int64))),
                                 logical_and(binary('>=', xi, convert(0, int64)), binary('<', xi, convert(w, int64))))
            yc = minimum(maximum(yi, convert(0, int64)), convert(h - 1, int64))
            xc = minimum(maximum(xi, convert(0, int64)), convert(w - 1, int64))
            return select(inside, cast(a[nn, cc, yc, xc], float32), convert(0.0, float32))

        def element(nn, cc, i, j):
            fx = _source(cast(g[nn, i, j, 0], float32), w, padding, align_corners)
            fy = _source(cast(g[nn, i, j, 1], float32), h, padding, align_corners)
            if mode == 'nearest':
                return cast(tap(nn, cc, cast(call('round', fy), int64), cast(call('round', fx), int64)), a.dtype)
            x0f, y0f = call('floor', fx), call('floor', fy)
            x0, y0 = cast(x0f, int64), cast(y0f, int64)
            dx, dy = fx - x0f, fy - y0f
            one = convert(1, int64)
            value = (tap(nn, cc, y0, x0) * (1.0 - dx) * (1.0 - dy) + tap(nn, cc, y0, x0 + one) * dx * (1.0 - dy) +
                     tap(nn, cc, y0 + one, x0) * (1.0 - dx) * dy + tap(nn, cc, y0 + one, x0 + one) * dx * dy)
            return cast(value, a.dtype)

        out = compute('y', [n, c, g.shape[1], g.shape[2]], element)
        super().__init__([x, grid], {'mode': mode, 'padding': padding, 'align_corners': align_corners},
                         Task('grid_sample', [a, g], [out]))


def grid_sample(x: Tensor, grid: Tensor, mode: str = 'bilinear', padding_mode: str = 'zeros',
                align_corners: bool = False) -> Tensor:
    """x [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, y in [-1, 1]): [N, C, Ho, Wo]."""
    if mode not in MODES:
        raise NotImplementedError(f"grid_sample: mode {mode!r} is not supported ({', '.join(MODES)} are)")
    if padding_mode not in PADDINGS:
        raise ValueError(f"grid_sample: padding_mode must be one of {PADDINGS}, got {padding_mode!r}")
    if x.ndim == 5:
        raise NotImplementedError('grid_sample: volumetric (5-D) sampling is not supported; 2-D is')
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0]:
        raise ValueError(f'grid_sample: expected x [N, C, H, W] and grid [N, Ho, Wo, 2] (2-D sampling), got '
                         f'{x.shape} and {grid.shape}')
    return GridSampleOp(x, grid, mode, padding_mode, bool(align_corners)).get_output(0)


def affine_grid(theta: Tensor, size, align_corners: bool = False) -> Tensor:
    """The sampling grid [N, H, W, 2] of the affine maps theta [N, 2, 3] over an output of ``size``
    (N, C, H, W): grid[n, i, j] = theta[n] @ (x_j, y_i, 1), the base coordinates in [-1, 1]."""
    import numpy as np

    n, _, h, w = (int(s) for s in size)
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3) or theta.shape[0] != n:
        raise ValueError(f'affine_grid: expected theta [{n}, 2, 3] for a 2-D size {tuple(size)}, got {theta.shape}')

    def steps(k: int) -> np.ndarray:
        if k == 1:
            return np.zeros(1, np.float32)
        base = np.linspace(-1.0, 1.0, k, dtype=np.float32)
        return base if align_corners else base * (k - 1) / k

    xs, ys = np.meshgrid(steps(w), steps(h))
    base = np.stack([xs, ys, np.ones_like(xs)], -1).reshape(1, h * w, 3).astype(np.float32)
    grid = matmul(asarray(base, device=theta.device).to(theta.dtype), transpose(theta, 1, 2))  # [N, H·W, 2]
    return reshape(grid, [n, h, w, 2])
