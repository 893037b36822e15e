"""2-D resizing (torch.nn.functional.interpolate on N, C, H, W): 'nearest', 'bilinear' and 'bicubic'
(align_corners either way), computing source coordinates in float32 as torch does: an output index maps
back through 1 / scale_factor where the caller gave one (a fractional factor such as 1.3 is not the ratio of
the rounded sizes), else through input size / output size."""
from __future__ import annotations

from typing import List, Optional, Sequence, Union

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute
from hidet.ir.dtypes import float32, int64
from hidet.ir.expr import Expr, call, cast, maximum, minimum
from hidet.ir.task import Task


class Resize2dOp(Operator):
    def __init__(self, x: Tensor, size: Sequence[int], mode: str, align_corners: bool,
                 scale_factors: Optional[Sequence[float]] = None):
        a = input_node('x', x)
        n, c, h, w = a.shape
        oh, ow = size
        ins, outs = (h, w), (oh, ow)

        def scale(d: int) -> float:
            if mode != 'nearest' and align_corners:
                return (ins[d] - 1) / (outs[d] - 1) if outs[d] > 1 else 0.0
            if scale_factors is not None and scale_factors[d] > 0:
                return 1.0 / scale_factors[d]
            return ins[d] / outs[d]

        def element(nn, cc, i, j):
            dst = (i, j)
            if mode == 'nearest':
                src = [minimum(cast(call('floor', cast(dst[d], float32) * scale(d)), int64), ins[d] - 1)
                       for d in range(2)]
                return a[nn, cc, src[0], src[1]]
            if mode == 'bicubic':
                return cast(_bicubic(a, nn, cc, dst, scale, ins, align_corners), a.dtype)
            coords = []
            for d in range(2):
                f = cast(dst[d], float32) * scale(d) if align_corners else \
                    maximum((cast(dst[d], float32) + 0.5) * scale(d) - 0.5, 0.0)
                i0 = cast(f, int64)  # f >= 0: truncation is floor
                i1 = minimum(i0 + 1, ins[d] - 1)
                coords.append((i0, i1, f - cast(i0, float32)))
            (y0, y1, ly), (x0, x1, lx) = coords

            def v(yy, xx):
                return cast(a[nn, cc, yy, xx], float32)

            top = v(y0, x0) * (1.0 - lx) + v(y0, x1) * lx
            bottom = v(y1, x0) * (1.0 - lx) + v(y1, x1) * lx
            return cast(top * (1.0 - ly) + bottom * ly, a.dtype)

        out = compute('y', [n, c, oh, ow], element)
        attrs = {'size': list(size), 'mode': mode, 'align_corners': align_corners,
                 'scale_factors': None if scale_factors is None else [float(f) for f in scale_factors]}
        super().__init__([x], attrs, Task(f'resize_{mode}', [a], [out]))


CUBIC_A = -0.75  # torch's (and OpenCV's) cubic convolution coefficient


def _cubic_weights(t: Expr) -> List[Expr]:
    """The weights of the 4 neighbours at offsets -1, 0, 1, 2 of a point ``t`` in [0, 1) past the first."""
    a = CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _bicubic(a, nn, cc, dst, scale, ins, align_corners: bool) -> Expr:
    """torch's bicubic value at output (dst[0], dst[1]): 16 neighbours, indices clamped to the input, source
    coordinates not clamped below 0 (as torch's cubic path)."""
    axes = []
    for d in range(2):
        f = cast(dst[d], float32) * scale(d) if align_corners else (cast(dst[d], float32) + 0.5) * scale(d) - 0.5
        base = call('floor', f)
        first = cast(base, int64) - 1
        idx = [maximum(minimum(first + k, ins[d] - 1), 0) for k in range(4)]
        axes.append((idx, _cubic_weights(f - base)))
    (ys, wy), (xs, wx) = axes
    total = None
    for i in range(4):
        row = None
        for j in range(4):
            term = cast(a[nn, cc, ys[i], xs[j]], float32) * wx[j]
            row = term if row is None else row + term
        total = row * wy[i] if total is None else total + row * wy[i]
    return total


def resize2d(x: Tensor, size: Optional[Union[int, Sequence[int]]] = None, scale_factor=None, mode: str = 'nearest',
             align_corners: Optional[bool] = None, recompute_scale_factor: Optional[bool] = None) -> Tensor:
    """torch.nn.functional.interpolate of a 4-D input; ``recompute_scale_factor`` as torch's (True: the
    coordinates follow the rounded output size instead of ``scale_factor``)."""
    if x.ndim != 4:
        raise ValueError(f'resize2d: expected a 4-D (N, C, H, W) input, got {x.shape}')
    if mode not in ('nearest', 'bilinear', 'bicubic'):
        raise NotImplementedError(f"resize2d: mode {mode!r} is not supported; use 'nearest', 'bilinear' or "
                                  "'bicubic'")
    if mode == 'nearest' and align_corners:
        raise ValueError('resize2d: align_corners only applies to bilinear and bicubic resizing')
    if (size is None) == (scale_factor is None):
        raise ValueError('resize2d: give exactly one of size and scale_factor')
    factors = None
    if size is None:
        factors = [float(scale_factor)] * 2 if isinstance(scale_factor, (int, float)) else \
            [float(f) for f in scale_factor]
        size = [int(x.shape[2 + d] * factors[d]) for d in range(2)]
        if recompute_scale_factor:
            factors = None
    size = [size] * 2 if isinstance(size, int) else [int(s) for s in size]
    return Resize2dOp(x, size, mode, bool(align_corners), factors).get_output(0)
