"""Channels-last convolutions: the conv2d_channels_last operator against torch, the channels_last pass
(layout carried through elementwise ops, permutes only where an NCHW reader remains), and on CUDA the
tensor-core template reading the input 8 channels at a time (gathered operand)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hidet
from hidet import ops
from hidet.graph.ops.conv import ConvChannelsLastOp
from hidet.graph.ops.pool import AdaptivePool2dOp, Pool2dOp
from hidet.graph.ops.transform import PermuteOp
from hidet.kernels.matmul import operand_modes
from hidet.graph.transforms import ChannelsLast, FoldConstants, FoldConvBatchNorm, PassContext, SimplifyTransforms


def _tol(dtype):
    return 1e-4 if dtype == torch.float32 else 2e-2


@pytest.mark.parametrize('n,c,h,w,o,k,stride,padding,dilation', [
    (1, 8, 9, 9, 16, 3, 1, 1, 1),
    (2, 16, 12, 10, 24, 3, 2, 1, 1),
    (1, 24, 7, 7, 8, 1, 1, 0, 1),
    (2, 8, 11, 11, 16, 5, 2, 2, 1),
    (1, 16, 10, 10, 32, 3, 1, 2, 2),
    (1, 3, 15, 15, 8, 7, 2, 3, 1),  # a stem's 3 channels (the operator takes any count; the pass pads to 8)
])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
def test_conv2d_channels_last_matches_torch(device, dtype, n, c, h, w, o, k, stride, padding, dilation):
    if device == 'cpu' and dtype == torch.float16 and (n, c) != (1, 8):
        pytest.skip('one float16 case on the CPU (slow without vector float16)')
    g = torch.Generator().manual_seed(n * 100 + c + k)
    x = torch.randn(n, c, h, w, generator=g).to(device, dtype)
    wt = (torch.randn(o, c, k, k, generator=g) / (c * k * k) ** 0.5).to(device, dtype)
    b = torch.randn(o, generator=g).to(device, dtype)
    # the reference in float64 on the CPU (torch's CUDA float32 convolutions may use TF32)
    expected = F.conv2d(x.double().cpu(), wt.double().cpu(), b.double().cpu(), stride, padding, dilation).to(dtype)
    y = ops.conv2d_channels_last(hidet.from_torch(x.permute(0, 2, 3, 1).contiguous()),
                                 hidet.from_torch(wt.permute(0, 2, 3, 1).contiguous()), hidet.from_torch(b),
                                 stride=stride, padding=padding, dilation=dilation)
    actual = y.torch().permute(0, 3, 1, 2).cpu()
    tol = _tol(dtype)
    torch.testing.assert_close(actual.float(), expected.float(), rtol=tol, atol=tol)


def test_conv2d_channels_last_errors():
    x = hidet.randn([1, 5, 5, 8])
    with pytest.raises(ValueError, match='has 4 input channels .* has 8'):
        ops.conv2d_channels_last(x, hidet.randn([2, 3, 3, 4]))
    with pytest.raises(ValueError, match='too small'):
        ops.conv2d_channels_last(x, hidet.randn([2, 7, 7, 8]))
    with pytest.raises(ValueError, match='4-D'):
        ops.conv2d_channels_last(hidet.randn([5, 5, 8]), hidet.randn([2, 3, 3, 8]))


@pytest.mark.parametrize('n,c,h,w,k,stride,padding,dilation', [
    (1, 16, 9, 9, 3, 1, 1, 1), (2, 24, 12, 10, 3, 2, 1, 1), (1, 8, 11, 11, 5, 2, 2, 1), (1, 40, 10, 10, 3, 1, 2, 2),
    (1, 32, 14, 14, 7, 1, 3, 1)])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
def test_depthwise_conv2d_channels_last_matches_torch(device, dtype, n, c, h, w, k, stride, padding, dilation):
    if device == 'cpu' and dtype == torch.float16 and c != 16:
        pytest.skip('one float16 case on the CPU (slow without vector float16)')
    g = torch.Generator().manual_seed(n * 100 + c + k)
    x = torch.randn(n, c, h, w, generator=g).to(device, dtype)
    wt = (torch.randn(c, 1, k, k, generator=g) / k).to(device, dtype)
    expected = F.conv2d(x.double().cpu(), wt.double().cpu(), None, stride, padding, dilation, groups=c).to(dtype)
    y = ops.depthwise_conv2d_channels_last(hidet.from_torch(x.permute(0, 2, 3, 1).contiguous()),
                                           hidet.from_torch(wt[:, 0].permute(1, 2, 0).contiguous()),
                                           stride=stride, padding=padding, dilation=dilation)
    tol = _tol(dtype)
    torch.testing.assert_close(y.torch().permute(0, 3, 1, 2).cpu().float(), expected.float(), rtol=tol, atol=tol)


def test_depthwise_conv2d_channels_last_errors():
    x = hidet.randn([1, 5, 5, 8])
    with pytest.raises(ValueError, match='has 4 channels .* has 8'):
        ops.depthwise_conv2d_channels_last(x, hidet.randn([3, 3, 4]))
    with pytest.raises(ValueError, match='3-D weight'):
        ops.depthwise_conv2d_channels_last(x, hidet.randn([8, 1, 3, 3]))


def _inverted_residual(x, p, conv, silu, sigmoid, pool):
    """A mobile network's block: 1x1 expansion, 3x3 depthwise, squeeze-excitation, 1x1 projection, residual
    (``conv``, ``silu``, ``sigmoid`` and ``pool`` torch's or hidet's)."""
    y = silu(conv(x, p['expand'], p['b_expand']))
    y = silu(conv(y, p['dw'], p['b_dw'], padding=1, groups=p['dw'].shape[0]))
    s = silu(conv(pool(y), p['squeeze'], p['b_squeeze']))
    y = y * sigmoid(conv(s, p['excite'], p['b_excite']))
    return conv(y, p['project'], p['b_project']) + x


def test_depthwise_convolutions_keep_the_channels_last_layout(device):
    """An inverted-residual block (efficientnet's): its depthwise convolution runs channels-last, so nothing
    between the expansion and the projection changes the layout (the only permutes are the block's input and
    output), and the block matches torch."""
    dtype = torch.float16 if device == 'cuda' else torch.float32
    g = torch.Generator().manual_seed(1)

    def r(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(device, dtype)

    p = {'expand': r(96, 16, 1, 1, scale=0.25), 'b_expand': r(96), 'dw': r(96, 1, 3, 3, scale=0.3), 'b_dw': r(96),
         'squeeze': r(4, 96, 1, 1, scale=0.1), 'b_squeeze': r(4), 'excite': r(96, 4, 1, 1, scale=0.5),
         'b_excite': r(96), 'project': r(16, 96, 1, 1, scale=0.1), 'b_project': r(16)}
    x = r(2, 16, 10, 10)
    expected = _inverted_residual(x.float(), {k: v.float() for k, v in p.items()}, F.conv2d, F.silu, torch.sigmoid,
                                  lambda t: F.adaptive_avg_pool2d(t, 1))
    xs = hidet.symbol([2, 16, 10, 10], dtype=str(dtype).split('.')[1], device=device)
    hp = {k: hidet.from_torch(v) for k, v in p.items()}
    y = _inverted_residual(xs, hp, ops.conv2d, ops.silu, ops.sigmoid, lambda t: ops.adaptive_avg_pool2d(t, 1))
    with PassContext() as ctx:
        ctx.set_channels_last(True)
        opt = hidet.graph.optimize(hidet.trace_from(y, [xs]))
    names = [n.task.name for n in opt.nodes]
    assert sum('depthwise_conv2d_channels_last' in name for name in names) == 1, names
    permutes = [n for n in opt.nodes for op in n.task.name.split('_') if op == 'permute']
    assert len(permutes) <= 2, names  # the input's to channels-last and the output's back
    tol = _tol(dtype)
    torch.testing.assert_close(opt(hidet.from_torch(x)).torch().float(), expected, rtol=tol, atol=tol)


def test_large_depthwise_windows_stay_nchw():
    """A 7x7 depthwise convolution (convnext's) between channels-last ones stays NCHW, for the depthwise
    template: the channels-last kernel computes each output's 49 products by itself."""
    x = hidet.symbol([1, 16, 14, 14])
    w1, w2 = hidet.randn([16, 16, 1, 1]), hidet.randn([16, 1, 7, 7])
    y = ops.conv2d(ops.conv2d(ops.conv2d(x, w1), w2, padding=3, groups=16), w1)
    with PassContext() as ctx:
        ctx.set_channels_last(True)
        graph = ChannelsLast()(hidet.trace_from(y, [x]), ctx)
    kinds = [type(n).__name__ for n in graph.nodes]
    assert kinds.count('ConvChannelsLastOp') == 2 and kinds.count('ConvOp') == 1, kinds


def _weights(device, dtype, c=16, seed=0):
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(device, dtype)

    return {'w1': r(c, c, 3, 3, scale=(9 * c) ** -0.5), 'b1': r(c), 'scale': r(c, 1, 1).abs() + 0.5,
            'w2': r(c, c, 3, 3, scale=(9 * c) ** -0.5), 'w3': r(2 * c, c, 1, 1, scale=c ** -0.5), 'b3': r(2 * c)}


def _block_torch(x, p):
    y = F.relu(F.conv2d(x, p['w1'], p['b1'], padding=1) * p['scale'])
    y = F.relu(F.conv2d(y, p['w2'], padding=1) + x)  # residual
    y = F.conv2d(y, p['w3'], p['b3'], stride=2)
    return F.max_pool2d(y, 2), y.sum()


def _block_hidet(x, p):
    h = {k: hidet.from_torch(v) for k, v in p.items()}
    y = ops.relu(ops.conv2d(x, h['w1'], h['b1'], padding=1) * h['scale'])
    y = ops.relu(ops.conv2d(y, h['w2'], padding=1) + x)
    y = ops.conv2d(y, h['w3'], h['b3'], stride=2)
    return ops.max_pool2d(y, 2), ops.sum(y)


def test_pass_keeps_the_layout_between_convolutions():
    x = hidet.symbol([2, 16, 8, 8])
    graph = hidet.trace_from(list(_block_hidet(x, _weights('cpu', torch.float32))), [x])
    with PassContext() as ctx:
        ctx.set_channels_last(True)
        for p in (FoldConvBatchNorm(), ChannelsLast(), FoldConstants(), SimplifyTransforms()):
            graph = p(graph, ctx)
    kinds = [type(n).__name__ for n in graph.nodes]
    assert kinds.count('ConvChannelsLastOp') == 3 and 'ConvOp' not in kinds
    permutes = [n for n in graph.nodes if isinstance(n, PermuteOp)]
    # into the first convolution; the pool runs channels-last, and permutes back are left for the NCHW reader
    # (the sum) and the graph's output (the pool's)
    assert [n.attrs['dims'] for n in permutes].count([0, 2, 3, 1]) == 1, kinds
    assert len(permutes) == 3, kinds
    (pool,) = [n for n in graph.nodes if isinstance(n, Pool2dOp)]
    assert pool.attrs['channels_last'] and pool.inputs[0].shape == (2, 4, 4, 32)
    # the residual add and the activations run in channels-last
    adds = [n.outputs[0].shape for n in graph.nodes if type(n).__name__ == 'BinaryElementwiseOp' and n.attrs['op'] == 'add']
    assert adds == [(2, 8, 8, 16), (2, 8, 8, 16), (2, 4, 4, 32)], adds


@pytest.mark.parametrize('flag', [True, False, None])
def test_optimized_block_matches_torch(device, flag):
    dtype = torch.float16 if device == 'cuda' else torch.float32
    p = _weights(device, dtype)
    x = torch.randn(2, 16, 8, 8, device=device, dtype=dtype)
    expected = _block_torch(x.float(), {k: v.float() for k, v in p.items()})
    xs = hidet.symbol([2, 16, 8, 8], dtype=str(dtype).split('.')[1], device=device)
    graph = hidet.trace_from(list(_block_hidet(xs, p)), [xs])
    with PassContext() as ctx:
        ctx.set_channels_last(flag)
        opt = hidet.graph.optimize(graph)
    convs = [n for n in opt.nodes if 'conv2d_channels_last' in n.task.name]
    applied = flag is True or (flag is None and device == 'cuda')
    assert bool(convs) == applied, [n.task.name for n in opt.nodes]
    outs = opt(hidet.from_torch(x))
    tol = _tol(dtype)
    for a, e in zip(outs, expected):
        scale = max(1.0, e.abs().max().item())
        torch.testing.assert_close(a.torch().float(), e.float(), rtol=tol, atol=tol * scale)


@pytest.mark.cuda
def test_tensor_core_template_gathers_the_input():
    from hidet.kernels.matmul import find_matmul_template

    x = hidet.randn([2, 14, 14, 64], dtype='float16', device='cuda')
    w = hidet.randn([32, 3, 3, 64], dtype='float16', device='cuda')
    template = find_matmul_template(ConvChannelsLastOp(x, w, [1, 1], [1, 1], [1, 1]).task, 'cuda')
    assert template is not None and template.spec.a.mode == 'gather' and template.spec.b.mode == 'direct'
    nchw = ops.conv2d.__module__  # the NCHW convolution runs on the template too, its input computed
    from hidet.graph.ops.conv import ConvOp
    t = ConvOp(hidet.randn([2, 64, 14, 14], dtype='float16', device='cuda'),
               hidet.randn([32, 64, 3, 3], dtype='float16', device='cuda'), [1, 1], [1, 1], [1, 1], 1).task
    assert nchw and find_matmul_template(t, 'cuda').spec.a.mode == 'computed'


def _stem_torch(x, w):
    y = F.max_pool2d(F.relu(F.conv2d(x, w, stride=2, padding=3)), 3, 2, 1)
    return F.adaptive_avg_pool2d(F.avg_pool2d(y, 2, ceil_mode=True), 1).flatten(1)


def _stem_hidet(x, w):
    y = ops.max_pool2d(ops.relu(ops.conv2d(x, w, stride=2, padding=3)), 3, 2, 1)
    return ops.reshape(ops.adaptive_avg_pool2d(ops.avg_pool2d(y, 2, ceil_mode=True), 1), [x.shape[0], -1])


def test_rgb_stem_is_blocked_and_pooling_runs_channels_last():
    """An RGB stem (7x7, stride 2): the kernel that permutes the NCHW input also cuts it into 2 x 2 pixel blocks of
    12 channels, padded to 16 (not inside the convolution, whose input would then be computed element by
    element), so the convolution reduces 4 x 4 x 16 values an output, not 7 x 7 x 8; the pools after it in NHWC."""
    w = hidet.symbol([16, 3, 7, 7], 'float16', 'cuda')
    x = hidet.symbol([2, 3, 40, 40], 'float16', 'cuda')
    graph = hidet.trace_from(_stem_hidet(x, w), [x, w])
    with hidet.option.context(cuda_arch='sm_90'):  # (the CUDA graph is built and fused, not run)
        opt = hidet.graph.optimize(graph)
    conv = next(n for n in opt.nodes if 'conv2d_channels_last' in n.task.name)
    assert [t.shape for t in conv.inputs] == [(2, 23, 23, 16), (16, 4, 4, 16)]  # (20 x 20 outputs: stride 1)
    assert operand_modes(conv.task) == ('gather', 'direct')
    (blocking,) = [n for n in opt.nodes if n.outputs[0] is conv.inputs[0]]
    assert blocking.inputs[0] is opt.inputs[0]  # one kernel from the network's NCHW input
    pools = [n for n in opt.nodes if 'pool2d' in n.task.name]
    assert len(pools) == 3 and all(n.inputs[0].shape[-1] == 16 for n in pools), [n.task.name for n in opt.nodes]


@pytest.mark.parametrize('batch', [1, 3])
def test_padded_stem_and_channels_last_pools_match_torch(batch):
    g = torch.Generator().manual_seed(batch)
    w = torch.randn(16, 3, 7, 7, generator=g) * 0.1
    x = torch.randn(batch, 3, 37, 41, generator=g)
    xs = hidet.symbol([batch, 3, 37, 41])
    graph = hidet.trace_from(_stem_hidet(xs, hidet.from_torch(w)), [xs])
    with PassContext() as ctx:
        ctx.set_channels_last(True)
        opt = hidet.graph.optimize(graph)
    pools = [n for n in opt.nodes if isinstance(n, (Pool2dOp, AdaptivePool2dOp))] or \
        [n for n in opt.nodes if 'pool2d' in n.task.name]
    assert pools and all(n.inputs[0].shape[-1] == 16 for n in pools), [n.task.name for n in opt.nodes]
    torch.testing.assert_close(opt(hidet.from_torch(x)).torch(), _stem_torch(x, w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('channels,kernel,stride,padding,size', [
    (3, 7, 2, 3, (37, 41)),  # resnet's stem
    (3, 3, 2, 1, (33, 30)),  # mobilenet's, efficientnet's
    (3, 4, 4, 0, (35, 32)),  # convnext's patches (35: the last 3 rows are read by no window)
    (3, 8, 8, 0, (32, 24)),  # vit's patches (16 x 16 there): a 1x1 convolution of 192 channels
    (3, (3, 5), (2, 1), (1, 2), (21, 18)),  # a stride along one dimension
    (4, 5, 3, 2, (26, 25)),  # blocks of 3 x 3 pixels
])
def test_strided_convolutions_of_few_channels_run_on_pixel_blocks(channels, kernel, stride, padding, size):
    """A strided convolution of fewer than 8 channels becomes a stride-1 convolution of stride x stride pixel
    blocks (space to depth), with its bias and ReLU, and matches torch (float32 on any device)."""
    g = torch.Generator().manual_seed(channels + sum(size))
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    w, b = torch.randn(16, channels, kh, kw, generator=g) * 0.1, torch.randn(16, generator=g)
    x = torch.randn(2, channels, *size, generator=g)
    xs = hidet.symbol([2, channels, *size])
    y = ops.relu(ops.conv2d(xs, hidet.from_torch(w), stride=stride, padding=padding) +
                 ops.reshape(hidet.from_torch(b), [1, 16, 1, 1]))
    with PassContext() as ctx:
        ctx.set_channels_last(True)
        opt = hidet.graph.optimize(hidet.trace_from(y, [xs]))
    (conv,) = [n for n in opt.nodes if 'conv2d_channels_last' in n.task.name]
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    blocks = (-(-kh // sh), -(-kw // sw))
    assert conv.inputs[1].shape[1:] == blocks + (sh * sw * channels + -(sh * sw * channels) % 8,)
    expected = F.relu(F.conv2d(x, w, b, stride=stride, padding=padding))
    torch.testing.assert_close(opt(hidet.from_torch(x)).torch(), expected, rtol=1e-4, atol=1e-4)


def test_pooled_inputs_are_not_padded():
    """Squeeze-excitation (efficientnet): the pooled input of its second 1x1 convolution has 20 channels, one
    pixel; its channels are not padded to 24 (a pad kernel for a matrix-vector product), and the block matches
    torch."""
    g = torch.Generator().manual_seed(0)
    w1, b1 = torch.randn(20, 80, 1, 1, generator=g) * 0.1, torch.randn(20, generator=g) * 0.1
    w2, b2 = torch.randn(80, 20, 1, 1, generator=g) * 0.1, torch.randn(80, generator=g) * 0.1
    x = torch.randn(2, 80, 7, 7, generator=g)

    def se_torch(t):
        s = F.silu(F.conv2d(F.adaptive_avg_pool2d(t, 1), w1, b1))
        return t * torch.sigmoid(F.conv2d(s, w2, b2))

    xs = hidet.symbol([2, 80, 7, 7])
    c = hidet.from_torch
    s = ops.silu(ops.conv2d(ops.adaptive_avg_pool2d(xs, 1), c(w1)) + ops.reshape(c(b1), [1, 20, 1, 1]))
    y = xs * ops.sigmoid(ops.conv2d(s, c(w2)) + ops.reshape(c(b2), [1, 80, 1, 1]))
    with PassContext() as ctx:
        ctx.set_channels_last(True)
        opt = hidet.graph.optimize(hidet.trace_from(y, [xs]))
    convs = [n for n in opt.nodes if 'conv2d_channels_last' in n.task.name]
    assert len(convs) == 2 and not [n for n in opt.nodes if 'pad' in n.task.name], [n.task.name for n in opt.nodes]
    torch.testing.assert_close(opt(c(x)).torch(), se_torch(x), rtol=1e-4, atol=1e-4)
