"""Convolutions (1-D and 2-D, stride/padding/dilation/groups, depthwise included), 2-D convolution in
channels-last layout (ungrouped and depthwise), and 2-D transposed convolution, as reductions. The matmul
templates run ungrouped convolutions as implicit GEMMs (the CPU template; on CUDA the tensor-core template for
float16/bfloat16); NCHW depthwise 2-D convolutions have their own template on CUDA (hidet/kernels/depthwise/);
the auto-scheduler runs the rest (channels-last depthwise ones included: a thread per output, consecutive
threads on consecutive channels, so its reads coalesce)."""
from __future__ import annotations

from typing import List, Optional, Sequence, Union

from hidet.graph.operator import Operator
from hidet.graph.ops import arithmetic as ew
from hidet.graph.ops.reshape import reshape
from hidet.graph.ops.utils import input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute, default_acc_dtype, reduce
from hidet.ir.expr import binary, cast, convert, logical_and, select
from hidet.ir.task import Task


IntOrSeq = Union[int, Sequence[int]]


def _tuple(op: str, name: str, value: IntOrSeq, n: int) -> List[int]:
    values = [value] * n if isinstance(value, int) else list(value)
    if len(values) != n:
        raise ValueError(f'{op}: {name} must be an int or {n} ints, got {value!r}')
    return [int(v) for v in values]


def _in_range(index, extent: int):
    return logical_and(binary('>=', index, 0), binary('<', index, extent))


def _padded(value, pos, spatial, padding):
    """``value`` (the input read at window positions ``pos``), zero where ``pos`` lies in the padding; an
    unpadded dimension needs no check (the output size keeps its windows inside): a 1x1 convolution reads
    its input plainly."""
    conds = [_in_range(pos[i], spatial[i]) for i in range(len(pos)) if padding[i] > 0]
    return select(logical_and(*conds), value, convert(0, value.dtype)) if conds else value


def _output_spatial(op: str, x_shape, kernel, spatial, stride, padding, dilation) -> List[int]:
    nd = len(spatial)
    out = [(spatial[i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    if any(s <= 0 for s in out):
        raise ValueError(f'{op}: input {x_shape} is too small for kernel {tuple(kernel)} with padding {padding}, '
                         f'dilation {dilation}: the output would be {tuple(out)}')
    return out


class ConvOp(Operator):
    def __init__(self, x: Tensor, w: Tensor, stride, padding, dilation, groups: int):
        nd = x.ndim - 2
        op = f'conv{nd}d'
        a, b = input_node('x', x), input_node('w', w)
        n, c, spatial = a.shape[0], a.shape[1], a.shape[2:]
        o, cg, kernel = b.shape[0], b.shape[1], b.shape[2:]
        if c % groups or o % groups or cg * groups != c:
            raise ValueError(f'{op}: input {x.shape} and weight {w.shape} do not fit groups={groups}: the input '
                             f'channels ({c}) must equal weight.shape[1] × groups ({cg} × {groups}), and the output '
                             f'channels ({o}) must be divisible by groups')
        out_spatial = _output_spatial(op, x.shape, kernel, spatial, stride, padding, dilation)
        og = o // groups

        def element(nn, oo, *opos):
            def term(cc, *k):
                pos = [opos[i] * stride[i] - padding[i] + k[i] * dilation[i] for i in range(nd)]
                channel = cc if groups == 1 else (oo / og) * cg + cc  # groups == 1: no dependence on oo
                return _padded(a[(nn, channel, *pos)], pos, spatial, padding) * b[(oo, cc, *k)]

            return reduce([cg] + list(kernel), term, 'sum')

        out = compute('y', [n, o] + out_spatial, element)
        attrs = {'stride': stride, 'padding': padding, 'dilation': dilation, 'groups': groups}
        super().__init__([x, w], attrs, Task(op, [a, b], [out]))


class ConvChannelsLastOp(Operator):
    """2-D convolution in channels-last layout (groups 1): x [n, h, w, c] and w [o, kh, kw, c] give
    y [n, oh, ow, o]. The reduction runs over (kh, kw, c), channels innermost, so the implicit GEMM's k
    walks contiguous memory of x: the tensor-core template copies 8 channels at a time (hidet/kernels/matmul/spec.py,
    gathered operands). The channels_last graph pass puts convolutional networks in this layout."""

    def __init__(self, x: Tensor, w: Tensor, stride, padding, dilation):
        op = 'conv2d_channels_last'
        a, b = input_node('x', x), input_node('w', w)
        if a.ndim != 4 or b.ndim != 4:
            raise ValueError(f'{op}: expected a 4-D input [n, h, w, c] and weight [o, kh, kw, c], got {x.shape} and '
                             f'{w.shape}')
        n, h, wd, c = a.shape
        o, kh, kw, cw = b.shape
        if cw != c:
            raise ValueError(f'{op}: the weight {w.shape} has {cw} input channels (its last dimension), the input '
                             f'{x.shape} has {c}')
        spatial, kernel = [h, wd], [kh, kw]
        out_spatial = _output_spatial(op, x.shape, kernel, spatial, stride, padding, dilation)

        def element(nn, oh, ow, oo):
            def term(k0, k1, cc):
                pos = [oh * stride[0] - padding[0] + k0 * dilation[0], ow * stride[1] - padding[1] + k1 * dilation[1]]
                return _padded(a[nn, pos[0], pos[1], cc], pos, spatial, padding) * b[oo, k0, k1, cc]

            return reduce([kh, kw, c], term, 'sum')

        out = compute('y', [n] + out_spatial + [o], element)
        attrs = {'stride': stride, 'padding': padding, 'dilation': dilation}
        super().__init__([x, w], attrs, Task(op, [a, b], [out]))


def conv2d_channels_last(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1,
                         padding: IntOrSeq = 0, dilation: IntOrSeq = 1) -> Tensor:
    """conv2d on channels-last tensors: x [n, h, w, c], weight [o, kh, kw, c] (torch's weight permuted by
    (0, 2, 3, 1)), bias [o]; the result is [n, oh, ow, o]."""
    op = 'conv2d_channels_last'
    y = ConvChannelsLastOp(x, weight, _tuple(op, 'stride', stride, 2), _tuple(op, 'padding', padding, 2),
                           _tuple(op, 'dilation', dilation, 2)).get_output(0)
    return y if bias is None else ew.add(y, bias)


class DepthwiseChannelsLastOp(Operator):
    """Depthwise 2-D convolution in channels-last layout (one filter per channel): x [n, h, w, c] and w
    [kh, kw, c] give y [n, oh, ow, c]. Consecutive channels are consecutive in memory for the input, the weight
    and the output, so a kernel reads and writes whole rows of channels, and the 1x1 convolutions around it (a
    mobile network's expansion and projection) keep their channels-last operands: no layout change between
    them. The channels_last graph pass puts depthwise convolutions in this layout."""

    def __init__(self, x: Tensor, w: Tensor, stride, padding, dilation):
        op = 'depthwise_conv2d_channels_last'
        a, b = input_node('x', x), input_node('w', w)
        if a.ndim != 4 or b.ndim != 3:
            raise ValueError(f'{op}: expected a 4-D input [n, h, w, c] and a 3-D weight [kh, kw, c], got {x.shape} '
                             f'and {w.shape}')
        n, h, wd, c = a.shape
        kh, kw, cw = b.shape
        if cw != c:
            raise ValueError(f'{op}: the weight {w.shape} has {cw} channels (its last dimension), the input '
                             f'{x.shape} has {c}')
        spatial = [h, wd]
        out_spatial = _output_spatial(op, x.shape, [kh, kw], spatial, stride, padding, dilation)

        def element(nn, oh, ow, cc):
            def term(k0, k1):
                pos = [oh * stride[0] - padding[0] + k0 * dilation[0], ow * stride[1] - padding[1] + k1 * dilation[1]]
                return _padded(a[nn, pos[0], pos[1], cc], pos, spatial, padding) * b[k0, k1, cc]

            return reduce([kh, kw], term, 'sum')

        out = compute('y', [n] + out_spatial + [c], element)
        attrs = {'stride': stride, 'padding': padding, 'dilation': dilation}
        super().__init__([x, w], attrs, Task(op, [a, b], [out]))


def depthwise_conv2d_channels_last(x: Tensor, weight: Tensor, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
                                   dilation: IntOrSeq = 1) -> Tensor:
    """Depthwise conv2d on channels-last tensors: x [n, h, w, c], weight [kh, kw, c] (torch's [c, 1, kh, kw]
    permuted by (2, 3, 1, 0) and reshaped); the result is [n, oh, ow, c]."""
    op = 'depthwise_conv2d_channels_last'
    return DepthwiseChannelsLastOp(x, weight, _tuple(op, 'stride', stride, 2), _tuple(op, 'padding', padding, 2),
                                   _tuple(op, 'dilation', dilation, 2)).get_output(0)


def _conv(nd: int, x: Tensor, weight: Tensor, bias: Optional[Tensor], stride, padding, dilation, groups) -> Tensor:
    op = f'conv{nd}d'
    if x.ndim != nd + 2 or weight.ndim != nd + 2:
        raise ValueError(f'{op}: expected a {nd + 2}-D input and weight, got {x.shape} and {weight.shape}')
    y = ConvOp(x, weight, _tuple(op, 'stride', stride, nd), _tuple(op, 'padding', padding, nd),
               _tuple(op, 'dilation', dilation, nd), int(groups)).get_output(0)
    if bias is not None:
        y = ew.add(y, reshape(bias, [bias.shape[0]] + [1] * nd))
    return y


def conv1d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
           dilation: IntOrSeq = 1, groups: int = 1) -> Tensor:
    return _conv(1, x, weight, bias, stride, padding, dilation, groups)


def conv2d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
           dilation: IntOrSeq = 1, groups: int = 1) -> Tensor:
    return _conv(2, x, weight, bias, stride, padding, dilation, groups)


class ConvTranspose2dOp(Operator):
    def __init__(self, x: Tensor, w: Tensor, stride, padding, output_padding, dilation, groups: int):
        a, b = input_node('x', x), input_node('w', w)
        n, c, h, wd = a.shape
        if b.shape[0] != c or c % groups:
            raise ValueError(f'conv_transpose2d: weight {w.shape} must have the input channels ({c}) first, '
                             f'divisible by groups={groups}')
        og, kh, kw = b.shape[1], b.shape[2], b.shape[3]
        o, cg = og * groups, c // groups
        spatial, kernel = (h, wd), (kh, kw)
        out_spatial = [(spatial[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1)
                       + output_padding[i] + 1 for i in range(2)]

        acc = default_acc_dtype('sum', a.dtype)

        def element(nn, oo, oh, ow):
            def term(cc, k0, k1):
                ic = (oo / og) * cg + cc
                nums = [oh + padding[0] - k0 * dilation[0], ow + padding[1] - k1 * dilation[1]]
                conds = []
                for i in range(2):
                    conds += [binary('>=', nums[i], 0), binary('==', nums[i] % stride[i], 0),
                              binary('<', nums[i] / stride[i], spatial[i])]
                xv = a[(nn, ic, nums[0] / stride[0], nums[1] / stride[1])]
                # each product in the accumulator's dtype, as cuDNN's (a float16 product loses bits: the
                # auto-scheduler, not a tensor-core template, runs this)
                xv = select(logical_and(*conds), xv, convert(0, a.dtype))
                return cast(xv, acc) * cast(b[(ic, oo % og, k0, k1)], acc)

            return reduce([cg, kh, kw], term, 'sum', dtype=a.dtype)

        out = compute('y', [n, o] + out_spatial, element)
        attrs = {'stride': stride, 'padding': padding, 'output_padding': output_padding, 'dilation': dilation,
                 'groups': groups}
        super().__init__([x, w], attrs, Task('conv_transpose2d', [a, b], [out]))


def conv_transpose2d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1,
                     padding: IntOrSeq = 0, output_padding: IntOrSeq = 0, groups: int = 1,
                     dilation: IntOrSeq = 1) -> Tensor:
    op = 'conv_transpose2d'
    if x.ndim != 4 or weight.ndim != 4:
        raise ValueError(f'{op}: expected a 4-D input and weight, got {x.shape} and {weight.shape}')
    y = ConvTranspose2dOp(x, weight, _tuple(op, 'stride', stride, 2), _tuple(op, 'padding', padding, 2),
                          _tuple(op, 'output_padding', output_padding, 2), _tuple(op, 'dilation', dilation, 2),
                          int(groups)).get_output(0)
    if bias is not None:
        y = ew.add(y, reshape(bias, [bias.shape[0], 1, 1]))
    return y
