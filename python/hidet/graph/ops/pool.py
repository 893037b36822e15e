"""2-D pooling: max and average windows (padding, dilation for max, ceil_mode, count_include_pad)
and adaptive pooling, with torch's window arithmetic; the indices of max pooling (1-, 2- and 3-D windows,
as torch's ``return_indices=True``)."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from hidet.graph.operator import Operator
from hidet.graph.ops.conv import IntOrSeq, _in_range, _tuple
from hidet.graph.ops.utils import input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute, reduce
from hidet.ir.dtypes import float32, int64
from hidet.ir.expr import binary, call, cast, convert, logical_and, logical_or, maximum, minimum, select
from hidet.ir.task import Task


def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:  # the last window must start inside the input or left padding
        out -= 1
    return out


def _layout(channels_last: bool):
    """(the (n, c, h, w) sizes of a 4-D shape, the element of a tensor at (n, c, h, w), the output shape) in
    NCHW or, ``channels_last``, NHWC: the channels-last pass runs a network's pooling in its convolutions'
    layout, each thread's neighbours reading the next channels."""
    if channels_last:
        return (lambda s: (s[0], s[3], s[1], s[2]), lambda t, n, c, i, j: t[n, i, j, c],
                lambda n, c, h, w: [n, h, w, c])
    return (lambda s: tuple(s), lambda t, n, c, i, j: t[n, c, i, j], lambda n, c, h, w: [n, c, h, w])


def _output(shape, element, channels_last: bool):
    """The pool's output tensor, ``element(n, c, i, j)`` at each position, in the layout of its input."""
    if channels_last:
        return compute('y', shape, lambda nn, i, j, cc: element(nn, cc, i, j))
    return compute('y', shape, element)


class Pool2dOp(Operator):
    def __init__(self, x: Tensor, kind: str, kernel, stride, padding, dilation, ceil_mode: bool,
                 count_include_pad: bool, channels_last: bool = False):
        op = f'{kind}_pool2d'
        a = input_node('x', x)
        sizes, at, out_shape = _layout(channels_last)
        n, c, h, w = sizes(a.shape)
        for i, size in enumerate((h, w)):
            if padding[i] * 2 > kernel[i]:
                raise ValueError(f'{op}: padding {padding} must be at most half the kernel {kernel}')
        oh, ow = (_pool_out(size, kernel[i], stride[i], padding[i], dilation[i], ceil_mode)
                  for i, size in enumerate((h, w)))
        if oh <= 0 or ow <= 0:
            raise ValueError(f'{op}: input {x.shape} is too small for kernel {kernel}: the output would be '
                             f'({oh}, {ow})')

        def element(nn, cc, i, j):
            starts = [i * stride[0] - padding[0], j * stride[1] - padding[1]]

            def term(k0, k1):
                pos = [starts[0] + k0 * dilation[0], starts[1] + k1 * dilation[1]]
                valid = logical_and(_in_range(pos[0], h), _in_range(pos[1], w))
                fill = call('hidet_lowest', dtype=a.dtype) if kind == 'max' else convert(0, a.dtype)
                return select(valid, at(a, nn, cc, pos[0], pos[1]), fill)

            if kind == 'max':
                return reduce(kernel, term, 'max')
            total = reduce(kernel, term, 'sum', dtype=float32)  # the sum can pass the dtype's range
            if count_include_pad:  # windows clipped to the padded input
                ends = [minimum(starts[d] + kernel[d], (h, w)[d] + padding[d]) for d in range(2)]
                count = (ends[0] - starts[0]) * (ends[1] - starts[1])
            else:  # windows clipped to the input
                ends = [minimum(starts[d] + kernel[d], (h, w)[d]) for d in range(2)]
                begins = [maximum(starts[d], 0) for d in range(2)]
                count = (ends[0] - begins[0]) * (ends[1] - begins[1])
            return cast(total / cast(count, float32), a.dtype)

        out = _output(out_shape(n, c, oh, ow), element, channels_last)
        attrs = {'kernel': kernel, 'stride': stride, 'padding': padding, 'dilation': dilation,
                 'ceil_mode': ceil_mode, 'count_include_pad': count_include_pad, 'channels_last': channels_last}
        super().__init__([x], attrs, Task(op, [a], [out]))

    def channels_last_twin(self, x: Tensor) -> 'Pool2dOp':
        """This pooling of ``x``, the channels-last (NHWC) form of this operator's input."""
        a = self.attrs
        kind = self.task.name.split('_')[0]  # (max_pool2d, avg_pool2d)
        return Pool2dOp(x, kind, a['kernel'], a['stride'], a['padding'], a['dilation'], a['ceil_mode'],
                        a['count_include_pad'], channels_last=True)


def _pool(kind, x, kernel_size, stride, padding, dilation, ceil_mode, count_include_pad) -> Tensor:
    op = f'{kind}_pool2d'
    if x.ndim != 4:
        raise ValueError(f'{op}: expected a 4-D (N, C, H, W) input, got {x.shape}')
    kernel = _tuple(op, 'kernel_size', kernel_size, 2)
    stride = kernel if stride is None or stride == [] else _tuple(op, 'stride', stride, 2)
    return Pool2dOp(x, kind, kernel, stride, _tuple(op, 'padding', padding, 2), _tuple(op, 'dilation', dilation, 2),
                    bool(ceil_mode), bool(count_include_pad)).get_output(0)


def max_pool2d(x: Tensor, kernel_size: Optional[IntOrSeq] = None, stride: Optional[IntOrSeq] = None,
               padding: IntOrSeq = 0, dilation: IntOrSeq = 1, ceil_mode: bool = False, *,
               kernel: Optional[IntOrSeq] = None) -> Tensor:
    """torch's max_pool2d; ``kernel=`` is the original Hidet's name for ``kernel_size``."""
    return _pool('max', x, _kernel('max_pool2d', kernel_size, kernel), stride, padding, dilation, ceil_mode, True)


def avg_pool2d(x: Tensor, kernel_size: Optional[IntOrSeq] = None, stride: Optional[IntOrSeq] = None,
               padding: IntOrSeq = 0, ceil_mode: bool = False, count_include_pad: bool = True, *,
               kernel: Optional[IntOrSeq] = None) -> Tensor:
    """torch's avg_pool2d; ``kernel=`` is the original Hidet's name for ``kernel_size``."""
    return _pool('avg', x, _kernel('avg_pool2d', kernel_size, kernel), stride, padding, 1, ceil_mode,
                 count_include_pad)


def _kernel(op: str, kernel_size, kernel):
    if (kernel_size is None) == (kernel is None):
        raise TypeError(f'{op}: give the window size once, as kernel_size (or kernel)')
    return kernel_size if kernel is None else kernel


class AdaptivePool2dOp(Operator):
    def __init__(self, x: Tensor, kind: str, output_size: Sequence[int], channels_last: bool = False):
        a = input_node('x', x)
        sizes, at, out_shape = _layout(channels_last)
        n, c, h, w = sizes(a.shape)
        oh, ow = output_size
        # the largest window: ceil(size / out) + 1 covers every start/end rounding
        windows = [-(-h // oh) + 1, -(-w // ow) + 1]

        def element(nn, cc, i, j):
            starts = [(i * h) / oh, (j * w) / ow]
            ends = [((i + 1) * h + oh - 1) / oh, ((j + 1) * w + ow - 1) / ow]

            def term(k0, k1):
                valid = logical_and(binary('<', starts[0] + k0, ends[0]), binary('<', starts[1] + k1, ends[1]))
                fill = call('hidet_lowest', dtype=a.dtype) if kind == 'max' else convert(0, a.dtype)
                return select(valid, at(a, nn, cc, starts[0] + k0, starts[1] + k1), fill)

            if kind == 'max':
                return reduce(windows, term, 'max')
            count = (ends[0] - starts[0]) * (ends[1] - starts[1])
            return cast(reduce(windows, term, 'sum', dtype=float32) / cast(count, float32), a.dtype)

        out = _output(out_shape(n, c, oh, ow), element, channels_last)
        super().__init__([x], {'output_size': list(output_size), 'channels_last': channels_last},
                         Task(f'adaptive_{kind}_pool2d', [a], [out]))

    def channels_last_twin(self, x: Tensor) -> 'AdaptivePool2dOp':
        """This pooling of ``x``, the channels-last (NHWC) form of this operator's input."""
        kind = self.task.name.split('_')[1]  # (adaptive_max_pool2d, adaptive_avg_pool2d)
        return AdaptivePool2dOp(x, kind, self.attrs['output_size'], channels_last=True)


def _adaptive(kind: str, x: Tensor, output_size: Union[int, Sequence[Optional[int]]]) -> Tensor:
    op = f'adaptive_{kind}_pool2d'
    if x.ndim != 4:
        raise ValueError(f'{op}: expected a 4-D (N, C, H, W) input, got {x.shape}')
    size = [output_size] * 2 if isinstance(output_size, int) else list(output_size)
    size = [x.shape[2 + i] if s is None else int(s) for i, s in enumerate(size)]
    return AdaptivePool2dOp(x, kind, size).get_output(0)


def adaptive_avg_pool2d(x: Tensor, output_size) -> Tensor:
    return _adaptive('avg', x, output_size)


def adaptive_max_pool2d(x: Tensor, output_size) -> Tensor:
    return _adaptive('max', x, output_size)


# ---------------------------------------------------------------- indices of max pooling
class MaxPoolIndicesOp(Operator):
    """Where each window's maximum lies, as torch's ``return_indices=True``: given the input ``x`` [N, C, *S]
    (1 to 3 spatial dims) and its max pooling ``y`` [N, C, *O], the flat index into the spatial plane S (int64)
    of the first element in the window's scan order that holds the maximum (NaN counts as the maximum).
    ``window(d, o)`` gives the start, the step and the number of positions of dimension d's window at output
    index o; positions outside [0, S[d]) are padding."""

    def __init__(self, x: Tensor, y: Tensor, name: str, extents: Sequence[int], window, attrs: dict):
        a, m = input_node('x', x), input_node('y', y)
        n, c, *spatial = a.shape
        plane = 1
        for size in spatial:
            plane *= size

        def element(nn, cc, *out):
            steps = [window(d, o) for d, o in enumerate(out)]

            def term(*k):
                pos = [start + kk * step for (start, step, _), kk in zip(steps, k)]
                valid = None
                for d, (p, (_, _, count)) in enumerate(zip(pos, steps)):
                    inside = _in_range(p, spatial[d]) if count is None else logical_and(_in_range(p, spatial[d]),
                                                                                        binary('<', k[d], count))
                    valid = inside if valid is None else logical_and(valid, inside)
                safe = [select(binary('<', p, 0), 0, select(binary('<', p, spatial[d]), p, spatial[d] - 1))
                        for d, p in enumerate(pos)]
                v, mv = a[(nn, cc, *safe)], m[(nn, cc, *out)]
                hit = binary('==', v, mv)
                if v.dtype.is_float():
                    hit = logical_or(hit, logical_and(call('isnan', v, dtype='bool'), call('isnan', mv, dtype='bool')))
                flat = cast(safe[0], int64)
                for d in range(1, len(safe)):
                    flat = flat * spatial[d] + cast(safe[d], int64)
                return select(logical_and(valid, hit), flat, convert(plane, int64))

            return reduce(list(extents), term, 'min')

        out = compute('indices', [n, c, *m.shape[2:]], element)
        super().__init__([x, y], attrs, Task(name, [a, m], [out]))


def max_pool_indices(x: Tensor, y: Tensor, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int]) -> Tensor:
    """The indices of ``y = max_pool{1,2,3}d(x, kernel, stride, padding, dilation)`` (x: [N, C, *S])."""
    nd = x.ndim - 2
    if not 1 <= nd <= 3 or y.ndim != x.ndim or not len(kernel) == len(stride) == len(padding) == len(dilation) == nd:
        raise ValueError(f'max_pool_indices: expected [N, C, *S] with 1 to 3 spatial dims and a window per dim, got '
                         f'x {list(x.shape)}, y {list(y.shape)}, kernel {list(kernel)}')
    attrs = {'kernel': list(kernel), 'stride': list(stride), 'padding': list(padding), 'dilation': list(dilation)}
    return MaxPoolIndicesOp(x, y, f'max_pool{nd}d_indices', kernel,
                            lambda d, o: (o * stride[d] - padding[d], dilation[d], None), attrs).get_output(0)


def adaptive_max_pool_indices(x: Tensor, y: Tensor) -> Tensor:
    """The indices of ``y = adaptive_max_pool{1,2,3}d(x, y.shape[2:])``."""
    spatial, out = list(x.shape[2:]), list(y.shape[2:])
    windows = [-(-s // o) + 1 for s, o in zip(spatial, out)]

    def window(d, o):
        start = (o * spatial[d]) / out[d]
        end = ((o + 1) * spatial[d] + out[d] - 1) / out[d]
        return start, 1, end - start

    return MaxPoolIndicesOp(x, y, f'adaptive_max_pool{len(out)}d_indices', windows, window,
                            {'output_size': out}).get_output(0)
