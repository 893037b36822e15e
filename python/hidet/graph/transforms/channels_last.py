"""Channels-last convolutional networks: each ungrouped 2-D convolution becomes a channels-last one
(``conv2d_channels_last``, whose implicit GEMM the tensor-core template reads 8 channels at a time), each 3x3
depthwise one too (``depthwise_conv2d_channels_last``: a mobile network's expansion, depthwise and projection
convolutions then exchange channels-last tensors, with no transposing kernel or transposed GEMM operand between
them; larger windows stay with the NCHW template), and the layout is carried through the elementwise operators
after it (bias, batch-norm scale, activation, residual add), so the next convolution reads the previous one's
output as it is:

    conv(x) → add(·, b) → relu → conv        becomes
    permute(x) → conv_cl → add(·, bᵀ) → relu → conv_cl → … → permute back where an NCHW reader remains

Pooling (max, average, adaptive) runs in channels-last too. Operators that need NCHW (reshapes, anything
else) read a permute of the channels-last tensor; the fusion pass then folds such a permute into the reading
kernel. Weights are permuted under ``deferred_constants`` and folded by the ``fold_constants`` pass that
follows.

Input channels that are not a multiple of 8 (an RGB stem's 3) are zero-padded to one, in the kernel that
permutes the network's NCHW input, so that every convolution gathers 16-byte chunks of channels: no
convolution reads its input as a computed operand, element by element. Not a one-pixel input (a
squeeze-excitation block's pooled channels): that convolution is a matrix-vector product. A strided convolution
of such channels first becomes a stride-1 convolution of its input's stride x stride pixel blocks
(``_space_to_depth``, in the same kernel), where that shortens its reduction: most of 8 padded channels would be
zeros.

Applies (``PassContext.set_channels_last``): by default to float16/bfloat16 convolutions on CUDA (where the
tensor-core template gathers channels); ``True`` to every ungrouped or depthwise 2-D convolution (any device
and dtype: the CPU tests use it); ``False`` to none.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from hidet.graph import ops
from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator, deferred_constants
from hidet.graph.ops.arithmetic import BinaryElementwiseOp, UnaryElementwiseOp, WhereOp
from hidet.graph.ops.conv import ConvOp
from hidet.graph.ops.pool import AdaptivePool2dOp, Pool2dOp
from hidet.graph.tensor import Tensor
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext

TO_CL, TO_CF = [0, 2, 3, 1], [0, 3, 1, 2]  # NCHW → NHWC and back
CHANNEL_MULTIPLE = 8  # input channels are zero-padded to a multiple of this (an RGB stem's 3 become 8)
_ELEMENTWISE = (UnaryElementwiseOp, BinaryElementwiseOp, WhereOp)
_POOLS = (Pool2dOp, AdaptivePool2dOp)  # (run in channels-last where their input is)
CL_DEPTHWISE_WINDOW = 9  # depthwise windows (kh x kw) that run channels-last; larger ones stay NCHW (the template)
GLOBAL_POOL_SPLIT = 256  # pixels from which a channels-last global average pool reduces rows, then columns


def _pooled(x: Tensor) -> bool:
    """A channels-last input of one pixel (squeeze-excitation's pooled channels): its convolution is a
    matrix-vector product, so padding its channels buys no 16-byte copies and costs a kernel (efficientnet_b0: 11
    pads of 4-28 channels, 20 µs a call on the H100)."""
    return all(isinstance(d, int) and d == 1 for d in x.shape[1:3])


def _depthwise(node: ConvOp) -> bool:
    """A 2-D convolution with one filter per channel (groups == input channels == output channels) and a window
    of at most CL_DEPTHWISE_WINDOW values: the auto-scheduler's channels-last kernel (a thread per output) reads
    and multiplies each output's window by itself, which larger windows make slow. H100, batch 1: mobilenet_v2's
    17 depthwise 3x3 convolutions took 38.8 µs against the NCHW template's 87.2 (and the network's kernels 157.9
    against 245.0: no transposes around them); convnext_tiny's 18 7x7 ones took 280.6 µs (the network 601.9
    against 422.9 with the template)."""
    x, w = node.inputs
    return x.ndim == 4 and isinstance(x.shape[1], int) and node.attrs['groups'] == x.shape[1] == w.shape[0] \
        and w.shape[1] == 1 and w.shape[2] * w.shape[3] <= CL_DEPTHWISE_WINDOW


def _global_average(node: Operator) -> bool:
    """An NCHW average pool to one pixel of a large image (squeeze-excitation's, a classifier's)."""
    if not (isinstance(node, AdaptivePool2dOp) and node.task.name == 'adaptive_avg_pool2d'
            and node.attrs['output_size'] == [1, 1] and not node.attrs['channels_last']):
        return False
    h, w = node.inputs[0].shape[2:]
    return isinstance(h, int) and isinstance(w, int) and h * w >= GLOBAL_POOL_SPLIT


def _padded(channels: int) -> int:
    return channels + -channels % CHANNEL_MULTIPLE


def _space_to_depth(x: Tensor, w: Tensor, stride, padding, dilation) -> Optional[Tuple[Tensor, Tensor]]:
    """A strided convolution of few input channels (an RGB stem) as a stride-1 convolution of its padded input's
    stride-sized pixel blocks, each block's pixels and channels one pixel's channels, and of its weight cut the
    same way (zero-padded to whole blocks): ``(x', w')`` (channels-last, convolved with stride 1 and no padding),
    or None where that does not shorten the reduction. resnet's 7x7 stride-2 stem on 3 channels reduces 4 x 4
    blocks of 12 (padded to 16: 256 values an output) where it reduced 7 x 7 pixels of 3 padded to 8 (392: 5/8 of
    them zeros); vit's 16x16 stride-16 patches become a 1x1 convolution of 768 channels (where 16 x 16 pixels of
    8 made 2048), convnext's 4x4 stride-4 one of 48 (128)."""
    n, h, wd, c = x.shape
    k, kh, kw, _ = w.shape
    (sh, sw), (ph, pw) = stride, padding
    if not all(isinstance(d, int) for d in (n, h, wd, c)) or list(dilation) != [1, 1] or (sh, sw) == (1, 1) or \
            c % CHANNEL_MULTIPLE == 0:
        return None
    oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
    bh, bw = -(-kh // sh), -(-kw // sw)  # the window in blocks
    block = sh * sw * c  # the channels of a block
    if bh * bw * _padded(block) >= kh * kw * _padded(c):
        return None
    hp, wp = sh * (oh - 1 + bh), sw * (ow - 1 + bw)  # the padded input that the windows of blocks cover
    x = ops.pad(x, [0, 0, pw, wp - wd - pw, ph, hp - h - ph])  # (a negative pad crops pixels no window reads)
    x = ops.reshape(x, [n, hp // sh, sh, wp // sw, sw, c])
    x = ops.reshape(ops.permute(x, [0, 1, 3, 2, 4, 5]), [n, hp // sh, wp // sw, block])
    w = ops.pad(w, [0, 0, 0, bw * sw - kw, 0, bh * sh - kh])  # (zero weights for the blocks' extra pixels)
    w = ops.reshape(w, [k, bh, sh, bw, sw, c])
    w = ops.reshape(ops.permute(w, [0, 1, 3, 2, 4, 5]), [k, bh, bw, block])
    return x, w


def _applies(node: ConvOp, mode: Optional[bool]) -> bool:
    x = node.inputs[0]
    if mode is False or x.ndim != 4 or (node.attrs['groups'] != 1 and not _depthwise(node)):
        return False
    if mode is True:
        return True
    return x.device.is_cuda() and x.dtype.name in ('float16', 'bfloat16') and isinstance(x.shape[1], int)


class ChannelsLast(GraphPass):
    name = 'channels_last'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        mode = ctx.channels_last
        if mode is False or not any(isinstance(n, ConvOp) and _applies(n, mode) for n in graph.nodes):
            return graph
        cl: Dict[int, Tensor] = {}  # id(NCHW tensor of the new graph) → the channels-last tensor it permutes

        def as_cl(t: Tensor) -> Tensor:
            """``t`` in channels-last: the tensor a permute came from, else a permute (one per tensor)."""
            if id(t) not in cl:
                cl[id(t)] = ops.permute(t, TO_CL)
            return cl[id(t)]

        def operand_cl(t: Tensor) -> Tensor:
            """An elementwise operand in channels-last; a broadcast one ([c, 1, 1], [1, c, 1, 1]) is permuted
            as the 4-D tensor it broadcasts to, a single value stays as it is."""
            if id(t) in cl or t.ndim == 4:
                return as_cl(t)
            if t.numel() == 1:
                return t
            return ops.permute(ops.reshape(t, [1] * (4 - t.ndim) + list(t.shape)), TO_CL)

        def back(y_cl: Tensor) -> List[Tensor]:
            y = ops.permute(y_cl, TO_CF)
            cl[id(y)] = y_cl
            return [y]

        def rewrite(node: Operator, inputs: List[Tensor]):
            if isinstance(node, ConvOp) and _applies(node, mode) and _depthwise(node):
                a, w = node.attrs, inputs[1]  # [c, 1, kh, kw] → [kh, kw, c]
                w = ops.permute(ops.reshape(w, [w.shape[0]] + list(w.shape[2:])), [1, 2, 0])
                return back(ops.depthwise_conv2d_channels_last(as_cl(inputs[0]), w, stride=a['stride'],
                                                               padding=a['padding'], dilation=a['dilation']))
            if isinstance(node, ConvOp) and _applies(node, mode):
                a = node.attrs
                x, w = as_cl(inputs[0]), ops.permute(inputs[1], TO_CL)
                stride, padding, dilation = a['stride'], a['padding'], a['dilation']
                blocks = _space_to_depth(x, w, stride, padding, dilation)
                if blocks is not None:
                    (x, w), stride, padding = blocks, [1, 1], [0, 0]
                channels = x.shape[-1]
                extra = -channels % CHANNEL_MULTIPLE if isinstance(channels, int) else 0
                if extra and _pooled(x):  # (a matrix-vector product: no 16-byte chunks to read, the pad a launch)
                    extra = 0
                if extra:  # zero channels: the same sums, read 8 at a time (the weight's pad is folded)
                    x, w = ops.pad(x, [0, extra]), ops.pad(w, [0, extra])
                return back(ops.conv2d_channels_last(x, w, stride=stride, padding=padding, dilation=dilation))
            if isinstance(node, _ELEMENTWISE) and node.outputs[0].ndim == 4 and any(id(t) in cl for t in inputs):
                return back(node.reforward([operand_cl(t) for t in inputs]).outputs[0])
            if _global_average(node) and id(inputs[0]) in cl:
                # in two column reductions (over w, then h, an fp32 [n, h, 1, c] between them): one reduction of
                # h x w values per channel would have c / 16 blocks (squeeze-excitation's 96 channels: 6)
                x = as_cl(inputs[0])
                rows = ops.mean(ops.cast(x, 'float32'), dims=[2], keepdim=True)
                return back(ops.cast(ops.mean(rows, dims=[1], keepdim=True), x.dtype))
            if isinstance(node, _POOLS) and id(inputs[0]) in cl and not node.attrs['channels_last']:
                return back(node.channels_last_twin(as_cl(inputs[0])).outputs[0])
            return None

        with deferred_constants():  # weight permutes: traced, then folded together by fold_constants
            return rewrite_graph(graph, rewrite)

