"""The depthwise convolution template (hidet/kernels/depthwise/): which tasks it takes, its search
spaces, its CUDA sources compiled with nvcc (no GPU needed), and its CPU twin (the same Hidet Script) against
torch on random data, fused epilogues and prologues included: CI's check of the kernel's tiling and index
arithmetic. On the GPU (`cuda` marker): every level-2 candidate against torch, and whole blocks compiled."""
from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

import hidet
from hidet import ops
from hidet.graph.transforms.pass_context import PassContext
from hidet.kernels.depthwise import template as dw
from hidet.kernels.depthwise.template import (DepthwiseConfig, DepthwiseSpec, DepthwiseTemplate, explain,
                                                 find_depthwise_template)
from hidet.ir.compute import compute, reduce, tensor_input
from hidet.ir.expr import binary, logical_and, select
from hidet.ir.task import Task


def conv_task(xs, ws, stride=1, padding=0, dilation=1, groups=None, dtype='float16'):
    x, w = hidet.symbol(list(xs), dtype, 'cuda'), hidet.symbol(list(ws), dtype, 'cuda')
    return ops.conv2d(x, w, stride=stride, padding=padding, dilation=dilation,
                      groups=xs[1] if groups is None else groups).trace[0].task


def fused_task(fn, *specs):
    """The depthwise task of the optimized (fused) graph of ``fn`` over symbols (shape, dtype), and for each of
    its inputs the position of the symbol it reads."""
    syms = [hidet.symbol(list(s), d, 'cuda') for s, d in specs]
    with PassContext() as ctx:  # (on: float16 convolutions become channels-last ones, which this template is not)
        ctx.set_channels_last(False)
        graph = hidet.graph.optimize(hidet.trace_from(fn(*syms), syms))
    nodes = [node for node in graph.nodes if explain(node.task).startswith('depthwise')]
    assert len(nodes) == 1, [explain(node.task) for node in graph.nodes]
    return nodes[0].task, [next(i for i, s in enumerate(syms) if s is t) for t in nodes[0].inputs]


def manual_task(other=0.0, bounds=('h>=', 'h<', 'w>=', 'w<'), acc='float32', dtype='float32', transpose=False):
    """A 3x3 depthwise convolution with padding 1 written by hand, with one detail changed at a time."""
    x, w = tensor_input('x', dtype, [1, 4, 6, 6]), tensor_input('w', dtype, [4, 1, 3, 3])

    def element(n, c, i, j):
        def term(cc, kh, kw):
            h, v = i - 1 + kh, j - 1 + kw
            tests = {'h>=': binary('>=', h, 0), 'h<': binary('<', h, 6), 'w>=': binary('>=', v, 0),
                     'w<': binary('<', v, 6)}
            read = x[n, c + cc, v, h] if transpose else x[n, c + cc, h, v]
            return select(logical_and(*[tests[b] for b in bounds]), read, other) * w[c, cc, kh, kw]

        return reduce([1, 3, 3], term, 'sum', acc_dtype=acc)

    return Task('conv2d', [x, w], [compute('y', [1, 4, 6, 6], element)])


def bias_relu(x, w, b):
    return ops.relu(ops.conv2d(x, w, b, padding=1, groups=x.shape[1]))


# ---------------------------------------------------------------------------------------------- which tasks
def test_finds_depthwise_tasks_on_cuda():
    for dtype in ('float16', 'bfloat16', 'float32'):
        task = conv_task([2, 6, 9, 11], [6, 1, 3, 3], stride=2, padding=1, dtype=dtype)
        template = find_depthwise_template(task, 'cuda')
        assert template is not None and template.title == f'depthwise conv2d [2, 6, 9, 11] 3x3 s2x2 p1x1 {dtype}'
        assert find_depthwise_template(task, 'cpu') is None  # the CPU keeps the auto-scheduler
    spec = DepthwiseSpec(conv_task([1, 4, 12, 10], [8, 1, 5, 3], stride=(2, 1), padding=(2, 0), dilation=(1, 2)))
    assert (spec.stride, spec.padding, spec.dilation, spec.mult) == ([2, 1], [2, 0], [1, 2], 2)
    assert (spec.oh, spec.ow) == (6, 6)
    assert hidet.kernels.find(conv_task([8, 96, 56, 56], [96, 1, 3, 3], padding=1), 'cuda') is not None


def test_fused_epilogue_and_prologue():
    task, order = fused_task(bias_relu, ([2, 6, 9, 9], 'float16'), ([6, 1, 3, 3], 'float16'), ([6], 'float16'))
    assert task.name.startswith('fused_') and sorted(order) == [0, 1, 2]
    assert find_depthwise_template(task, 'cuda') is not None
    task, _ = fused_task(lambda x, w: ops.conv2d(ops.cast(ops.relu(x), 'float16'), w, padding=1, groups=6),
                         ([1, 6, 7, 7], 'float32'), ([6, 1, 3, 3], 'float16'))
    assert len(task.inputs) == 2 and find_depthwise_template(task, 'cuda') is not None  # relu + cast inside


def test_other_tasks_are_not_taken():
    not_taken = {
        'ungrouped': conv_task([1, 4, 8, 8], [6, 4, 3, 3], padding=1, groups=1),
        'two channels per group': conv_task([1, 4, 8, 8], [4, 2, 3, 3], padding=1, groups=2),
        'conv1d': ops.conv1d(hidet.symbol([1, 4, 9], 'float16', 'cuda'), hidet.symbol([4, 1, 3], 'float16', 'cuda'),
                             groups=4).trace[0].task,
        'transposed': ops.conv_transpose2d(hidet.symbol([1, 4, 5, 5], 'float16', 'cuda'),
                                           hidet.symbol([4, 1, 3, 3], 'float16', 'cuda'), groups=4).trace[0].task,
        'matmul': ops.matmul(hidet.symbol([8, 9], 'float16', 'cuda'), hidet.symbol([9, 3], 'float16', 'cuda')
                             ).trace[0].task,
        'pool': ops.avg_pool2d(hidet.symbol([1, 4, 8, 8], 'float16', 'cuda'), 3, 1, 1).trace[0].task,
        'relu': ops.relu(hidet.symbol([1, 4, 8, 8], 'float16', 'cuda')).trace[0].task,
        'symbolic batch': ops.conv2d(hidet.symbol(['n', 4, 8, 8], 'float16', 'cuda'),
                                     hidet.symbol([4, 1, 3, 3], 'float16', 'cuda'), groups=4).trace[0].task,
        'int8': conv_task([1, 4, 8, 8], [4, 1, 3, 3], dtype='int8'),
    }
    for what, task in not_taken.items():
        assert find_depthwise_template(task, 'cuda') is None, what


def test_the_window_must_be_exactly_a_padded_convolution():
    assert find_depthwise_template(manual_task(), 'cuda') is not None
    assert 'other than zero' in explain(manual_task(other=1.0))
    assert 'without a zero padding' in explain(manual_task(bounds=('h>=', 'h<', 'w>=')))
    assert 'not read at o * stride' in explain(manual_task(transpose=True))  # x[n, c, w, h]
    assert 'accumulates in float16' in explain(manual_task(acc='float16', dtype='float16'))


# ---------------------------------------------------------------------------------------------- search spaces
SHAPES = [  # (input, kernel, stride, padding): MobileNetV2 / ConvNeXt-like and ragged ones
    ([8, 96, 56, 56], 3, 1, 1), ([8, 144, 56, 56], 3, 2, 1), ([8, 384, 14, 14], 7, 1, 3), ([3, 37, 23, 29], 5, 1, 2),
    ([2, 5, 5, 5], 3, 1, 0), ([1, 32, 112, 112], 3, 1, 1), ([4, 768, 7, 7], 7, 1, 3)]


@pytest.mark.parametrize('shape', SHAPES, ids=str)
def test_spaces(shape):
    xs, k, s, p = shape
    template = find_depthwise_template(conv_task(xs, [xs[1], 1, k, k], s, p), 'cuda')
    spaces = [template.space(level) for level in (0, 1, 2)]
    assert len(spaces[0]) == 1 and 1 < len(spaces[1]) <= 8 and len(spaces[1]) <= len(spaces[2]) <= 32
    assert spaces[1] == spaces[2][:len(spaces[1])] and spaces[0][0] == spaces[2][0] == template.default()
    assert len(set(spaces[2])) == len(spaces[2]) and not any(template.check(c) for c in spaces[2])
    assert any(c.staged for c in spaces[2]) and any(not c.staged for c in spaces[2])
    for cfg in spaces[2]:
        assert cfg.threads <= 1024 and cfg.tw % cfg.vw == 0
        assert template.config_from_json(template.config_to_json(cfg)) == cfg


# the H100's level-2 winners (float16, against cuDNN) of the shapes above: level 1 must keep them
WINNERS = {0: '14x56v4', 1: '14x28v2', 2: '14x16v8', 5: '16x16v4'}


def test_defaults_and_winners():
    names = {}
    for i, (xs, k, s, p) in enumerate(SHAPES):
        template = find_depthwise_template(conv_task(xs, [xs[1], 1, k, k], s, p), 'cuda')
        names[i] = [c.name() for c in template.space(1)]
        if i in WINNERS:
            assert WINNERS[i] in names[i], (xs, names[i])
    # level 0: unstaged; as wide as the row up to 64 (VW 8 for 7x7); on wider rows 16 x 112 with columns of 8
    # outputs per thread (the level-2 winner at 32x32x112x112); direct for stride 2
    assert [names[i][0] for i in (0, 1, 2, 5)] == ['14x56v4', '14x28v1h2d', '14x16v8', '16x112v1h8']
    task, _ = fused_task(EPILOGUES['silu+residual'][0], *[(s, 'float16') for s in EPILOGUE_SHAPES['silu+residual']])
    assert DepthwiseSpec(task).reads_residual and find_depthwise_template(task, 'cuda').default().staged
    task, _ = fused_task(bias_relu, ([2, 6, 9, 9], 'float16'), ([6, 1, 3, 3], 'float16'), ([6], 'float16'))
    assert not DepthwiseSpec(task).reads_residual and not find_depthwise_template(task, 'cuda').default().staged


@pytest.mark.parametrize('xs, k, s, per_thread', [
    # efficientnet_b0's 5x5 windows at batch 1 (the level-2 winners' outputs per thread on the H100), and the
    # batch-8 7x7 layer whose winner kept 8
    ([1, 240, 28, 28], 5, 1, 4), ([1, 672, 14, 14], 5, 1, 4), ([1, 480, 14, 14], 5, 1, 2),
    ([1, 1152, 7, 7], 5, 1, 2), ([1, 672, 14, 14], 5, 2, 1), ([1, 144, 56, 56], 5, 2, 4), ([8, 384, 14, 14], 7, 1, 8)])
def test_default_outputs_per_thread_follow_the_layers_outputs(monkeypatch, xs, k, s, per_thread):
    monkeypatch.setattr(dw, 'sm_count', lambda: 132)
    cfg = find_depthwise_template(conv_task(xs, [xs[1], 1, k, k], s, k // 2), 'cuda').default()
    assert cfg.vw * cfg.vh == per_thread, cfg.name()
    # few SMs: as many outputs per thread as the row or column holds, up to 8 (4 at stride 2)
    monkeypatch.setattr(dw, 'sm_count', lambda: 8)
    cfg = find_depthwise_template(conv_task(xs, [xs[1], 1, k, k], s, k // 2), 'cuda').default()
    out = (xs[2] - 1) // s + 1
    assert cfg.vw * cfg.vh == dw._fit(4 if s > 1 else 8, out), cfg.name()


def test_pitch_spreads_a_warps_reads():
    """A warp of vertical configs (one output column per thread, rows of fewer than 32 threads) reads 32
    consecutive banks of the staged tile whatever the row pitch would have been."""
    spec = DepthwiseSpec(conv_task([1, 8, 64, 64], [8, 1, 3, 3], padding=1))
    for cfg in (DepthwiseConfig(16, 16, 1, vh=4), DepthwiseConfig(16, 8, 1, vh=2), DepthwiseConfig(32, 112, 1, vh=8)):
        t = dw._Tiling(spec, cfg)
        words = [(k // t.tpr) * cfg.vh * t.pitch + k % t.tpr for k in range(32)]
        assert t.pitch >= t.cols and len({w % 32 for w in words}) == 32, (cfg.name(), t.pitch)
    assert dw._Tiling(spec, DepthwiseConfig(16, 16, 1, vh=4, direct=True, staged=False)).floats == 0


def test_check_rejects_configs_that_cannot_run():
    template = find_depthwise_template(conv_task([1, 8, 64, 64], [8, 1, 3, 3], padding=1), 'cuda')
    assert 'multiple' in template.check(DepthwiseConfig(8, 30, 4))
    assert 'threads' in template.check(DepthwiseConfig(64, 64, 1))
    assert 'shared memory' in template.check(DepthwiseConfig(128, 128, 32))
    assert 'multiple of the outputs per thread vertically' in template.check(DepthwiseConfig(6, 32, 4, vh=4))
    assert not template.check(DepthwiseConfig(128, 128, 32, direct=True, staged=False))  # no input tile
    assert template.config_from_json({'th': 8, 'tw': 30, 'vw': 4}) is None
    assert template.config_from_json({'tile': 3}) is None
    with pytest.raises(ValueError, match='depthwise config 8x30v4s'):
        template.source(DepthwiseConfig(8, 30, 4))


# ---------------------------------------------------------------------------------------------- nvcc, no GPU
def test_cuda_sources_compile_with_nvcc():
    """Default (direct) and other configs (staged or not, several outputs per thread along rows or columns, direct
    reads or a staged tile) of a fused float16 stride-2 convolution, a bfloat16 7x7, a float32 5x5 with dilation
    and a channel multiplier, for sm_90 and sm_80."""
    from hidet.backend.cache import build_libraries
    from hidet.backend.compiler import CompilerNotFoundError, find_nvcc

    try:
        find_nvcc()
    except CompilerNotFoundError:
        pytest.skip('nvcc not found')
    fused, _ = fused_task(lambda x, w, b: ops.clamp(ops.conv2d(x, w, b, stride=2, padding=1, groups=24), 0.0, 6.0),
                          ([2, 24, 17, 19], 'float16'), ([24, 1, 3, 3], 'float16'), ([24], 'float16'))
    cases = [(fused, None), (fused, DepthwiseConfig(4, 10, 2)),
             (conv_task([2, 40, 14, 14], [40, 1, 7, 7], padding=3, dtype='bfloat16'),
              DepthwiseConfig(14, 14, 2, staged=False, vh=7)),
             (conv_task([1, 6, 20, 21], [12, 1, 5, 5], padding=4, dilation=2, dtype='float32'),
              DepthwiseConfig(6, 24, 8, vh=2, direct=True))]
    sources = []
    for task, cfg in cases:
        template = find_depthwise_template(task, 'cuda')
        cfg = cfg or template.default()
        assert not template.check(cfg), template.check(cfg)
        sources.append(template.source(cfg))
        assert 'HIDET_KERNEL_EXPORT int32_t launch(' in sources[-1]
    assert find_depthwise_template(fused, 'cuda').default().direct  # stride 2: no input tile, no barrier
    assert '__syncthreads();' not in sources[0] and 'hidet::max<float>' in sources[0]  # the relu6 epilogue
    assert sources[1].count('__syncthreads();') == 2 and sources[2].count('__syncthreads();') == 1  # staged or not
    assert sources[3].count('__syncthreads();') == 1  # direct, staged: the results' barrier alone
    with hidet.option.context(cuda_arch='sm_90'):
        paths = build_libraries([(s, 'cuda', 'depthwise-template-test') for s in sources])
    with hidet.option.context(cuda_arch='sm_80'):
        paths += build_libraries([(sources[0], 'cuda', 'depthwise-template-test')])
        template = find_depthwise_template(fused, 'cuda')  # tuning candidates together: launch_0, launch_1, ...
        bundle = template.candidates_source(template.space(1)[:3])
        assert all(f'int32_t launch_{i}(' in bundle for i in range(3)) and 'int32_t launch(' not in bundle
        paths += build_libraries([(bundle, 'cuda', 'depthwise-template-test')])
    assert all(os.path.exists(p) for p in paths)
    assert dw.DepthwiseTemplate(DepthwiseSpec(fused), 'cpu').candidates_source(template.space(1)[:2]) is None


# ---------------------------------------------------------------------------------------------- the CPU twin
def _torch(dtype: str):
    return getattr(torch, dtype)


def _rand(shape, dtype, device='cpu', scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(_torch(dtype)).to(device)


def run_configs(task, target, configs, inputs, out_like):
    """Each config's output (NaN where the kernel wrote nothing) for ``inputs``."""
    from hidet.backend.cache import build_libraries
    from hidet.runtime.compiled_module import CompiledModule

    template = DepthwiseTemplate(DepthwiseSpec(task), target)
    paths = build_libraries([(template.source(c), target, 'depthwise-template-test') for c in configs])
    outs = []
    for path in paths:
        out = torch.full(out_like.shape, float('nan'), dtype=out_like.dtype, device=out_like.device)
        CompiledModule(path)['launch'](*inputs, out)
        if target == 'cuda':
            torch.cuda.synchronize()
        outs.append(out)
    return outs


def check_all(task, target, configs, inputs, expected, tol):
    outs = run_configs(task, target, configs, inputs, expected)
    bad = [f'{c.name()}: max error {(o.double() - expected.double()).abs().nan_to_num(math.inf).max().item():.3g}'
           for c, o in zip(configs, outs)
           if not torch.allclose(o.double(), expected.double(), rtol=tol, atol=tol)]
    assert not bad, '; '.join(bad)


CPU_CASES = [  # (input, weight, stride, padding, dilation): odd sizes, no size a multiple of the tiles
    ([2, 5, 13, 11], [5, 1, 3, 3], 1, 1, 1),
    ([2, 6, 15, 17], [6, 1, 3, 3], 2, 1, 1),
    ([1, 3, 19, 9], [3, 1, 5, 5], 1, 2, 1),
    ([1, 4, 14, 14], [4, 1, 7, 7], 1, 3, 1),
    ([1, 4, 7, 7], [4, 1, 7, 7], 2, 3, 1),
    ([2, 3, 5, 5], [3, 1, 3, 3], 1, 0, 1),
    ([1, 3, 12, 11], [3, 1, 3, 3], 1, 2, 2),
    ([1, 2, 10, 8], [2, 1, 3, 5], (3, 1), (1, 2), 1),
    ([1, 3, 10, 9], [6, 1, 3, 3], 1, 1, 1),  # channel multiplier 2
    ([1, 3, 21, 18], [3, 1, 5, 5], 2, 2, 1),  # the CUDA default: direct, a column of 4 outputs per thread
]


@pytest.mark.parametrize('case', CPU_CASES, ids=str)
def test_cpu_twin_matches_torch(case):
    """Configs of the CPU's and CUDA's spaces (the CPU runs any config: the same script), and small tiles, several
    along each axis with ragged last ones, of other heights than widths, staged or not, outputs per thread along
    rows and columns, read from a staged tile or directly, float32."""
    xs, ws, s, p, d = case
    task = conv_task(xs, ws, s, p, d, groups=xs[1], dtype='float32')
    cpu_space = DepthwiseTemplate(DepthwiseSpec(task), 'cpu').space(2)
    cuda_space = DepthwiseTemplate(DepthwiseSpec(task), 'cuda').space(2)
    small = [DepthwiseConfig(3, 4, 2), DepthwiseConfig(4, 6, 3, staged=False, vh=2),
             DepthwiseConfig(6, 5, 1, staged=False, vh=3, direct=True), DepthwiseConfig(4, 4, 2, vh=2, direct=True)]
    configs = list(dict.fromkeys(cpu_space[:1] + cuda_space[:1] + cuda_space[-1:] + small))
    x, w = _rand(xs, 'float32'), _rand(ws, 'float32', seed=1)
    expected = F.conv2d(x.double(), w.double(), None, s, p, d, xs[1]).float()
    check_all(task, 'cpu', configs, [x, w], expected, 1e-4)


@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_cpu_twin_16bit(dtype):
    xs, ws = [2, 7, 12, 13], [7, 1, 3, 3]
    task = conv_task(xs, ws, 1, 1, dtype=dtype)
    x, w = _rand(xs, dtype), _rand(ws, dtype, scale=1 / 3, seed=1)
    expected = F.conv2d(x.double(), w.double(), None, 1, 1, 1, xs[1]).to(_torch(dtype))
    configs = [DepthwiseConfig(5, 8, 4), DepthwiseConfig(12, 13, 1, staged=False)]
    check_all(task, 'cpu', configs, [x, w], expected, 2e-2)


EPILOGUES = {
    'bias+relu': (bias_relu, lambda x, w, b: F.relu(F.conv2d(x, w, b, padding=1, groups=x.shape[1]))),
    'batch-norm+relu6': (
        lambda x, w, m, v, g, b: ops.clamp(ops.batch_norm(ops.conv2d(x, w, stride=2, padding=1, groups=x.shape[1]),
                                                          m, v, g, b), 0.0, 6.0),
        lambda x, w, m, v, g, b: F.relu6(F.batch_norm(F.conv2d(x, w, stride=2, padding=1, groups=x.shape[1]),
                                                      m, v, g, b))),
    'silu+residual': (lambda x, w, r: ops.silu(ops.conv2d(x, w, padding=2, groups=x.shape[1])) + r,
                      lambda x, w, r: F.silu(F.conv2d(x, w, padding=2, groups=x.shape[1])) + r),
    'prologue+cast': (
        lambda x, w: ops.cast(ops.conv2d(ops.relu(x) * 2.0, w, padding=1, groups=x.shape[1]), 'float16'),
        lambda x, w: F.conv2d(F.relu(x) * 2.0, w, padding=1, groups=x.shape[1]).half()),
}
EPILOGUE_SHAPES = {
    'bias+relu': [[2, 6, 11, 13], [6, 1, 3, 3], [6]],
    'batch-norm+relu6': [[2, 6, 11, 13], [6, 1, 3, 3], [6], [6], [6], [6]],
    'silu+residual': [[1, 5, 9, 10], [5, 1, 5, 5], [1, 5, 9, 10]],
    'prologue+cast': [[1, 4, 8, 9], [4, 1, 3, 3]],
}


@pytest.mark.parametrize('name', list(EPILOGUES))
def test_cpu_twin_fused(name):
    """A fused task from hidet.graph.optimize: its epilogue (bias, batch norm, activations, residual add, cast)
    and prologue run inside the template's kernel."""
    fn, ref = EPILOGUES[name]
    shapes = EPILOGUE_SHAPES[name]
    task, order = fused_task(fn, *[(s, 'float32') for s in shapes])
    args = [_rand(s, 'float32', seed=i) for i, s in enumerate(shapes)]
    if name == 'batch-norm+relu6':
        args[3] = args[3].abs() + 0.5  # a variance
    expected = ref(*args)
    configs = DepthwiseTemplate(DepthwiseSpec(task), 'cpu').space(2)
    check_all(task, 'cpu', [configs[0], configs[-1], DepthwiseConfig(4, 6, 2, staged=False, vh=2),
                            DepthwiseConfig(4, 5, 1, vh=2, direct=True, staged=name == 'silu+residual')],
              [args[i] for i in order], expected, 2e-3 if expected.dtype == torch.float16 else 1e-4)


def test_cpu_twin_writes_channels_last_through_a_permute():
    """An NCHW depthwise convolution read by a channels-last one (the channels_last pass off: with it on, the
    depthwise one is channels-last too): it writes NHWC through a fused permute epilogue."""
    g = torch.Generator().manual_seed(0)
    w1, w2, w3 = (torch.randn(*s, generator=g) * 0.3 for s in ([16, 8, 1, 1], [16, 1, 3, 3], [8, 16, 1, 1]))

    def block(x):
        y = ops.clamp(ops.conv2d(x, hidet.from_torch(w1)), 0.0, 6.0)
        y = ops.clamp(ops.conv2d(y, hidet.from_torch(w2), padding=1, stride=2, groups=16), 0.0, 6.0)
        return ops.conv2d_channels_last(ops.permute(y, [0, 2, 3, 1]), hidet.from_torch(w3.permute(0, 2, 3, 1)))

    x = hidet.symbol([2, 8, 9, 11])
    with PassContext() as ctx:
        ctx.set_channels_last(False)
        graph = hidet.graph.optimize(hidet.trace_from(block(x), [x]))
    (node,) = [n for n in graph.nodes if explain(n.task).startswith('depthwise')]
    assert node.task.outputs[0].shape == (2, 5, 6, 16)  # NHWC
    y = torch.randn(2, 16, 9, 11, generator=g)
    expected = F.conv2d(y, w2, stride=2, padding=1, groups=16).clamp(0, 6).permute(0, 2, 3, 1)
    configs = DepthwiseTemplate(DepthwiseSpec(node.task), 'cpu').space(2)
    check_all(node.task, 'cpu', [configs[0], replace(configs[0], staged=not configs[0].staged)],
              [y, node.inputs[1].torch()], expected, 1e-4)


def test_torch_compile_with_the_cpu_twin(monkeypatch):
    """A MobileNetV2-like block through torch.compile(backend='hidet') on the CPU with the finder serving the CPU
    too: fusion, the finder, the build and the runtime around the template."""
    from torch import nn

    monkeypatch.setattr(dw, 'TARGETS', ('cuda', 'cpu'))
    built = []
    source = DepthwiseTemplate.source
    monkeypatch.setattr(DepthwiseTemplate, 'source', lambda self, *a, **k: built.append(self.title) or source(
        self, *a, **k))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.expand = nn.Conv2d(6, 18, 1)
            self.dw = nn.Conv2d(18, 18, 3, padding=1, groups=18)
            self.bn = nn.BatchNorm2d(18)
            self.project = nn.Conv2d(18, 6, 1)

        def forward(self, x):
            return x + self.project(F.relu6(self.bn(self.dw(F.relu6(self.expand(x))))))

    torch.manual_seed(0)
    model = Block().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
        x = torch.randn(2, 6, 13, 15)
        expected = model(x)
        actual = torch.compile(model, backend='hidet')(x)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
    assert any(t.startswith('depthwise conv2d [2, 18, 13, 15] 3x3 p1x1') for t in built), built


# ---------------------------------------------------------------------------------------------- on the GPU
GPU_SHAPES = SHAPES[:5] + [([2, 24, 31, 33], 5, 2, 2)]


@pytest.mark.cuda
@pytest.mark.parametrize('shape', GPU_SHAPES, ids=str)
@pytest.mark.parametrize('dtype', ['float16', 'float32'])
def test_every_candidate_on_the_gpu(shape, dtype):
    xs, k, s, p = shape
    task = conv_task(xs, [xs[1], 1, k, k], s, p, dtype=dtype)
    template = find_depthwise_template(task, 'cuda')
    x, w = _rand(xs, dtype, 'cuda'), _rand([xs[1], 1, k, k], dtype, 'cuda', scale=1 / k, seed=1)
    expected = F.conv2d(x.double(), w.double(), None, s, p, 1, xs[1]).to(x.dtype)
    check_all(task, 'cuda', template.space(2), [x, w], expected, 1e-2 if dtype == 'float16' else 1e-4)


@pytest.mark.cuda
def test_fused_and_multiplier_candidates_on_the_gpu():
    shapes = EPILOGUE_SHAPES['batch-norm+relu6']
    fn, ref = EPILOGUES['batch-norm+relu6']
    task, order = fused_task(fn, *[(s, 'float16') for s in shapes])
    args = [_rand(s, 'float16', 'cuda', seed=i) for i, s in enumerate(shapes)]
    args[3] = args[3].abs() + 0.5
    expected = ref(*[a.float() for a in args]).half()
    check_all(task, 'cuda', find_depthwise_template(task, 'cuda').space(2), [args[i] for i in order], expected, 2e-2)
    task = conv_task([2, 8, 21, 19], [16, 1, 3, 3], 1, 2, 2, groups=8, dtype='float32')
    x, w = _rand([2, 8, 21, 19], 'float32', 'cuda'), _rand([16, 1, 3, 3], 'float32', 'cuda', seed=1)
    expected = F.conv2d(x, w, None, 1, 2, 2, 8)
    check_all(task, 'cuda', find_depthwise_template(task, 'cuda').space(2), [x, w], expected, 1e-4)


@pytest.mark.cuda
def test_torch_compile_on_the_gpu():
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(16, 48, 1), nn.BatchNorm2d(48), nn.ReLU6(),
                          nn.Conv2d(48, 48, 3, stride=2, padding=1, groups=48), nn.BatchNorm2d(48), nn.ReLU6(),
                          nn.Conv2d(48, 24, 1)).eval().half().cuda()
    x = torch.randn(4, 16, 29, 29, device='cuda', dtype=torch.float16)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend='hidet')(x), model(x), rtol=2e-2, atol=2e-2)
