"""Every candidate config of the tensor-core matmul template compiled, run and checked against torch on
the GPU (`cuda` marker): GEMMs, computed and transposed operands, convolutions (cp.async gathers and TMA
im2col copies), tuning with candidates compiled together, fused graphs."""
from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

import hidet
from hidet import ops
from hidet.kernels.matmul import MmaConfig, explain, find_matmul_template, match_gemm
from hidet.kernels.matmul.config import check_config

from .matmul_cases import fused_tasks, gated_reference, gated_task, matmul_task

def _torch_dtype(dtype):
    return getattr(torch, dtype)


def _check_candidates(task, make_inputs, reference, configs=None, level=2):
    """Build every candidate (in parallel), run each on the inputs and compare with ``reference``."""
    from hidet.backend.cache import build_libraries
    from hidet.runtime.compiled_module import CompiledModule

    template = find_matmul_template(task, 'cuda')
    assert template is not None, explain(task)
    configs = configs or template.space(level)
    paths = build_libraries([(template.source(c, fallback=False), 'cuda', task.name) for c in configs])
    inputs = make_inputs()
    expected = reference(*inputs)
    bad = []
    for c, path in zip(configs, paths):
        out = torch.full(expected.shape, float('nan'), dtype=expected.dtype, device='cuda')
        CompiledModule(path)['launch'](*inputs, out)
        torch.cuda.synchronize()
        if not torch.allclose(out.float(), expected.float(), rtol=2e-2, atol=2e-2):
            err = (out.float() - expected.float()).abs().max().item()
            bad.append(f'{c.name()}: max error {err}')
    assert not bad, f'{template.title}: ' + '; '.join(bad)
    return configs


def _rand(shape, dtype, scale=1.0):
    return (torch.randn(shape, device='cuda') * scale).to(_torch_dtype(dtype))


CANDIDATE_SHAPES = [  # every shape class: GEMV-like, small M, split-k, ragged edges, large tiles
    (1, 512, 1024), (13, 200, 264), (64, 512, 2048), (77, 300, 136), (200, 328, 520), (520, 264, 96)]


@pytest.mark.cuda
@pytest.mark.parametrize('mnk', CANDIDATE_SHAPES, ids=str)
@pytest.mark.parametrize('dtype,level', [('float16', 2), ('bfloat16', 1)])
def test_every_candidate(mnk, dtype, level):
    """Every config that tuning can select for these shapes (float16: level 2, a superset of levels 0 and 1;
    bfloat16, the same kernels with another mma instruction: level 1)."""
    m, n, k = mnk
    task = matmul_task([m, k], [k, n], dtype)
    a, b = _rand([m, k], dtype), _rand([k, n], dtype, 1 / math.sqrt(k))
    _check_candidates(task, lambda: (a, b), lambda x, y: (x.float() @ y.float()).to(x.dtype), level=level)


@pytest.mark.cuda
@pytest.mark.parametrize('mhk', [(1, 256, 512), (77, 192, 136), (200, 320, 264), (128, 512, 256)], ids=str)
def test_paired_epilogue_every_candidate(mhk):
    """silu(gate) * up in the epilogue of the interleaved gate / up GEMM: every level-2 candidate (wgmma and
    mma.sync tiles, split-k through the workspace, skinny tiles whose half-width output leaves threads idle) and
    the wgmma shapes by name, each against torch's float32."""
    from hidet.kernels.matmul.space import WG_SHAPES

    m, h, k = mhk
    task = gated_task(m, h, k)
    template = find_matmul_template(task, 'cuda')
    assert template is not None and template.spec.pair, explain(task)
    named = [MmaConfig(bm, bn, 64, 64, wn, 4, s, True, tma) for bm, bn, wn in WG_SHAPES for s in (1, 2)
             for tma in (False, True)] if template.wgmma else []
    configs = list(dict.fromkeys(template.space(2) + [c for c in named if not check_config(template.spec, c)]))
    x, w = _rand([m, k], 'float16'), _rand([k, 2 * h], 'float16', 1 / math.sqrt(k))
    _check_candidates(task, lambda: (x, w), lambda a, b: gated_reference(a, b).half(), configs)


@pytest.mark.cuda
def test_every_tile_shape_with_computed_and_transposed_operands():
    """Odd K (computed loads), A transposed (m-contiguous), B transposed (k-contiguous), batched; on sm_90 the
    wgmma tiles too, copied by cp.async and (aligned operands: TMA boxes of 3-D tensor maps here) by TMA from a
    producer warp."""
    from hidet.kernels.matmul.space import LARGE_SHAPES, SMALL_SHAPES, WG_SHAPES

    def cfgs(spec_task):
        spec = match_gemm(spec_task)
        out = [MmaConfig(bm, bn, 64 if bm <= 32 else 32, wm, wn, 3, s) for bm, bn, wm, wn in SMALL_SHAPES + LARGE_SHAPES
               for s in (1, 2)]
        if find_matmul_template(spec_task, 'cuda').wgmma:
            out += [MmaConfig(bm, bn, 64, 64, wn, st, s, True, tma) for bm, bn, wn in WG_SHAPES
                    for st, s in ((3, 1), (4, 2)) for tma in (False, True)]
        return [c for c in out if not check_config(spec, c)]

    task = matmul_task([100, 30], [30, 70])
    a, b = _rand([100, 30], 'float16'), _rand([30, 70], 'float16', 0.2)
    _check_candidates(task, lambda: (a, b), lambda x, y: (x.float() @ y.float()).half(), cfgs(task))
    (task,) = fused_tasks(lambda x, w: ops.matmul(ops.transpose(x, 1, 2), ops.transpose(w, 1, 2)),
                          ([3, 96, 136], 'float16'), ([3, 72, 96], 'float16'))
    x, w = _rand([3, 96, 136], 'float16'), _rand([3, 72, 96], 'float16', 0.1)
    _check_candidates(task, lambda: (x, w), lambda p, q: (p.float().transpose(1, 2) @ q.float().transpose(1, 2)).half(),
                      cfgs(task))


@pytest.mark.cuda
@pytest.mark.parametrize('x_shape,w_shape,stride,padding,dilation', [
    ([3, 9, 11, 64], [72, 3, 3, 64], 1, 1, 1), ([2, 14, 13, 32], [64, 3, 3, 32], 2, 1, 1),
    ([2, 12, 12, 48], [40, 3, 3, 48], 1, 2, 2), ([4, 8, 8, 64], [128, 1, 1, 64], 2, 0, 1)], ids=str)
def test_every_convolution_candidate(x_shape, w_shape, stride, padding, dilation):
    """Channels-last convolutions (gathered operand: row parts kept per chunk row, k parts per k-tile; ragged m
    and n, strides, dilation, a strided 1x1): every level-2 candidate against torch."""
    xs, ws = hidet.symbol(x_shape, 'float16', 'cuda'), hidet.symbol(w_shape, 'float16', 'cuda')
    task = ops.conv2d_channels_last(xs, ws, stride=stride, padding=padding, dilation=dilation).trace[0].task
    assert match_gemm(task, fold_k=True).a.gather is not None
    x, w = _rand(x_shape, 'float16'), _rand(w_shape, 'float16', 1 / math.sqrt(w_shape[1] * w_shape[2] * w_shape[3]))

    def reference(x, w):
        y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(0, 3, 1, 2).float(), None, stride,
                                       padding, dilation)
        return y.permute(0, 2, 3, 1).half().contiguous()

    _check_candidates(task, lambda: (x, w), reference)


@pytest.mark.cuda
@pytest.mark.parametrize('x_shape,w_shape,stride,padding,dilation', [
    ([3, 9, 11, 64], [72, 3, 3, 64], 1, 1, 1), ([2, 14, 13, 64], [64, 3, 3, 64], 2, 1, 1),
    ([2, 9, 11, 64], [40, 3, 3, 64], (2, 1), (1, 2), (1, 2)), ([2, 12, 12, 128], [40, 3, 3, 128], 1, 2, 2),
    ([4, 8, 8, 64], [128, 1, 1, 64], 2, 0, 1), ([4, 7, 7, 512], [512, 3, 3, 512], 1, 1, 1)], ids=str)
def test_im2col_tma_convolution_configs(x_shape, w_shape, stride, padding, dilation):
    """sm_90: TMA configs of convolutions (A copied by im2col columns, B by boxes) of every wgmma tile shape,
    3 stages alone or 4 split in 2 along k (ragged m and n, strides, asymmetric padding and dilation, a strided
    1x1, tiles spanning images) against torch."""
    from hidet.kernels.matmul.space import WG_SHAPES

    xs, ws = hidet.symbol(x_shape, 'float16', 'cuda'), hidet.symbol(w_shape, 'float16', 'cuda')
    task = ops.conv2d_channels_last(xs, ws, stride=stride, padding=padding, dilation=dilation).trace[0].task
    template = find_matmul_template(task, 'cuda')
    if template is None or not template.wgmma:
        pytest.skip('TMA configs need an sm_90 GPU')
    configs = [MmaConfig(bm, bn, 64, 64, wn, st, sk, True, True) for bm, bn, wn in WG_SHAPES
               for st, sk in ((3, 1), (4, 2))]
    configs = [c for c in configs if not template.check(c)]
    assert len(configs) >= 7
    x, w = _rand(x_shape, 'float16'), _rand(w_shape, 'float16', 1 / math.sqrt(w_shape[1] * w_shape[2] * w_shape[3]))

    def reference(x, w):
        y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(0, 3, 1, 2).float(), None, stride,
                                       padding, dilation)
        return y.permute(0, 2, 3, 1).half().contiguous()

    _check_candidates(task, lambda: (x, w), reference, configs)


@pytest.mark.cuda
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_tuning_runs_candidates_compiled_together(dtype, tmp_path):
    """Level 2 with 2 build workers: the candidates compile 4 to a library, each runs through its own entry
    and agrees with the default (every one timed, none dropped), and the winner computes the product."""
    from hidet.drivers.tuning import bundle_size, choose_configs, tuning_key

    a, b = _rand([200, 328], dtype), _rand([328, 520], dtype, 0.1)
    task = matmul_task([200, 328], [328, 520], dtype)
    template = find_matmul_template(task, 'cuda')
    with hidet.option.context(cache_dir=str(tmp_path), num_build_workers=2) as opts:
        assert bundle_size(len(template.space(2)), opts) == 4
        with warnings.catch_warnings():
            warnings.simplefilter('error')  # (a candidate dropped for its results would warn)
            (config,) = choose_configs([(task, 'cuda', template)], 2)
        from hidet.backend import cache

        record = json.loads(open(cache.tuning_path(tuning_key(task, 'cuda', template, 2, opts), opts)).read())
    assert all(c['latency_ms'] is not None for c in record['candidates'])
    _check_candidates(task, lambda: (a, b), lambda x, y: (x.float() @ y.float()).to(x.dtype), [config])


@pytest.mark.cuda
@pytest.mark.parametrize('shapes', [([4, 3, 50, 64], [64, 40]), ([2, 1, 33, 72], [3, 72, 24]), ([96], [96, 80]),
                                    ([3, 5, 96], [96]), ([7, 40], [40, 9]), ([16, 16], [16, 16])], ids=str)
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_ops_matmul_uses_the_template(shapes, dtype):
    a, b = _rand(shapes[0], dtype), _rand(shapes[1], dtype, 0.2)
    task = matmul_task(shapes[0], shapes[1], dtype)
    assert find_matmul_template(task, 'cuda') is not None, explain(task)
    actual = ops.matmul(hidet.from_torch(a), hidet.from_torch(b)).torch()
    expected = torch.matmul(a.float(), b.float()).to(a.dtype)
    torch.testing.assert_close(actual.float(), expected.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
@pytest.mark.parametrize('space_level', [0, 1])
def test_fused_graph_scale_prologue_bias_gelu_residual(space_level, tmp_path):
    x = torch.randn(2, 70, 96, device='cuda', dtype=torch.float16)
    w = _rand([96, 136], 'float16', 0.1)
    bias = _rand([136], 'float16')
    res = _rand([2, 70, 136], 'float16')

    def model(xs, ws, bs, rs):
        return ops.gelu(ops.matmul(xs * 0.5 + 1.0, ws) + bs) + rs

    syms = [hidet.symbol(list(t.shape), str(t.dtype).split('.')[-1], 'cuda') for t in (x, w, bias, res)]
    graph = hidet.graph.optimize(hidet.trace_from(model(*syms), syms))
    (node,) = graph.nodes
    assert explain(node.task).startswith('gemm 140x136x96 a:computed')
    with hidet.option.context(cache_dir=str(tmp_path)):
        compiled = graph.build(space=space_level)
        actual = compiled(x, w, bias, res)
    actual = actual.torch() if hasattr(actual, 'torch') else actual
    expected = torch.nn.functional.gelu((x * 0.5 + 1.0).float() @ w.float() + bias.float()) + res.float()
    torch.testing.assert_close(actual.float(), expected, rtol=2e-2, atol=2e-2)
    if space_level:
        from hidet.backend import cache

        with hidet.option.context(cache_dir=str(tmp_path)):
            assert cache.status('tuning')['entries'] == 1


@pytest.mark.cuda
def test_misaligned_buffers_fall_back():
    from hidet.backend.cache import build_library
    from hidet.runtime.compiled_module import CompiledModule

    task = matmul_task([64, 128], [128, 64])
    template = find_matmul_template(task, 'cuda')
    module = CompiledModule(build_library(template.source(template.default()), 'cuda', 'misaligned'))
    a = _rand([64 * 128 + 1], 'float16')[1:].view(64, 128)  # 2 bytes past an aligned address
    b = _rand([128, 64], 'float16', 0.1)
    out = torch.empty(64, 64, dtype=torch.float16, device='cuda')
    module['launch'](a, b, out)
    torch.testing.assert_close(out.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
def test_second_build_tunes_nothing(tmp_path, monkeypatch):
    import hidet.drivers.tuning as tuning

    a = hidet.symbol([48, 64], 'float16', 'cuda')
    b = hidet.symbol([64, 40], 'float16', 'cuda')
    graph = hidet.trace_from(ops.matmul(a, b), [a, b])
    with hidet.option.context(cache_dir=str(tmp_path)):
        graph.build(space=1)
        from hidet.drivers.build_task import _LoadedModules

        _LoadedModules.modules.clear()

        def no_benchmark(*args):
            raise AssertionError('tuned twice')

        monkeypatch.setattr(tuning, 'benchmark_library', no_benchmark)
        graph.build(space=1)


@pytest.mark.cuda
def test_transposed_outputs_every_candidate():
    """Outputs whose m is contiguous (the epilogue's threads walk m, spec.out_m_contiguous): a GEMM written
    transposed, and a channels-last convolution with its bias and SiLU written back NCHW across two images, every
    level-2 candidate against torch."""
    (task,) = fused_tasks(lambda a, b: ops.transpose(ops.matmul(a, b), 0, 1), ([200, 96], 'float16'),
                          ([96, 72], 'float16'))
    assert match_gemm(task).out_m_contiguous
    a, b = _rand([200, 96], 'float16'), _rand([96, 72], 'float16', 0.1)
    _check_candidates(task, lambda: (a, b), lambda x, y: (x.float() @ y.float()).t().contiguous().half())
    (task,) = fused_tasks(lambda x, w, s: ops.permute(ops.silu(ops.conv2d_channels_last(x, w) + s), [0, 3, 1, 2]),
                          ([2, 9, 11, 64], 'float16'), ([40, 1, 1, 64], 'float16'), ([40], 'float16'))
    assert match_gemm(task, fold_k=True).out_m_contiguous
    x, w, s = _rand([2, 9, 11, 64], 'float16'), _rand([40, 1, 1, 64], 'float16', 0.1), _rand([40], 'float16')

    def reference(x, w, s):
        y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(0, 3, 1, 2).float())
        return torch.nn.functional.silu(y + s.float()[:, None, None]).half()

    _check_candidates(task, lambda: (x, w, s), reference)
