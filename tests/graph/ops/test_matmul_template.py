"""The tensor-core matmul template (hidet/kernels/matmul): splitting tasks into prologue →
matmul → epilogue, template selection, search spaces, the tuning cache and nvcc builds, on the CPU (every
candidate run on the GPU: test_matmul_template_gpu.py; the CPU template: test_matmul_cpu_template.py)."""
from __future__ import annotations

import json
from dataclasses import replace
import math
import os
import re

import numpy
import pytest
import torch

import hidet
from hidet import ops
from hidet.backend.codegen import declare_kernel
from hidet.kernels.matmul import MmaConfig, NotGemm, explain, find_matmul_template, match_gemm, operand_modes
from hidet.kernels.matmul.config import check_config
from hidet.kernels.matmul.space import default_config, space
from hidet.kernels import Template
from hidet.ir.compute import compute, reduce, tensor_input
from hidet.ir.task import Task

from .matmul_cases import conv_spec, fused_tasks, matmul_task


def scaled_bias_gelu(x, w, b):
    return ops.gelu(ops.matmul(x * 2.0 + 1.0, w) + b)


# ---------------------------------------------------------------------------------------------- task splitting
def test_plain_matmul_is_a_gemm_with_direct_operands():
    spec = match_gemm(matmul_task([256, 512], [512, 384]))
    assert (spec.m, spec.n, spec.k, spec.batch) == (256, 384, 512, 1)
    assert spec.a.vector_ok and spec.a.k_major and spec.b.vector_ok and not spec.b.k_major
    assert spec.out_n_contiguous and spec.mma_dtype == 'float16'


def test_fused_scale_prologue_and_bias_gelu_epilogue():
    (task,) = fused_tasks(scaled_bias_gelu, ([64, 96], 'float16'), ([96, 80], 'float16'), ([80], 'float16'))
    spec = match_gemm(task)
    assert (spec.m, spec.n, spec.k) == (64, 80, 96)
    assert spec.a.mode == 'computed' and spec.b.mode == 'direct'  # the scale runs inside the template
    text = repr(spec.epilogue)
    assert 'erf' in text and 'in2[' in text  # gelu of (acc + bias), the bias read from an input
    assert explain(task) == 'gemm 64x80x96 a:computed b:direct'


def test_epilogue_computes_in_float32_and_rounds_once():
    """gelu(x @ w + bias) + residual in float16: from the float32 accumulator on the epilogue computes in float32
    (the bias and the residual widened as read) and rounds once, to the output's float16."""
    from hidet.ir.expr import Cast, Expr, TensorElement
    from hidet.ir.functors import collect

    (task,) = fused_tasks(lambda x, w, b, r: ops.gelu(ops.matmul(x, w) + b) + r, ([64, 96], 'float16'),
                          ([96, 80], 'float16'), ([80], 'float16'), ([64, 80], 'float16'))
    spec = match_gemm(task)
    top = spec.epilogue
    assert isinstance(top, Cast) and top.dtype == 'float16' and top.a.dtype == 'float32'
    reads = {id(e) for e in collect(top, TensorElement)}
    narrow = [e for e in collect(top.a, Expr) if e.dtype == 'float16' and id(e) not in reads]
    assert not narrow, narrow  # no float16 arithmetic, constant or rounding inside
    assert len(reads) == 2


def test_batch_only_a_has_folds_into_m():
    (task,) = fused_tasks(lambda x, w, r: ops.matmul(x, w) + r, ([2, 3, 64, 96], 'float16'), ([96, 80], 'float16'),
                          ([2, 3, 64, 80], 'float16'))
    spec = match_gemm(task)
    assert (spec.batch, spec.m, spec.n, spec.k) == (1, 384, 80, 96)
    assert spec.a.vector_ok  # the folded rows are still one stride apart


def test_batched_and_transposed_operands():
    (task,) = fused_tasks(lambda q, k: ops.matmul(q, ops.transpose(k, 1, 2)), ([4, 64, 96], 'float16'),
                          ([4, 80, 96], 'float16'))
    spec = match_gemm(task)
    assert (spec.batch, spec.m, spec.n, spec.k) == (4, 64, 80, 96)
    assert spec.b.vector_ok and spec.b.k_major  # W[j, k]: k contiguous → ldmatrix without .trans
    (task,) = fused_tasks(lambda x, w: ops.matmul(ops.transpose(x, 0, 1), w), ([96, 64], 'float16'),
                          ([96, 80], 'float16'))
    spec = match_gemm(task)
    assert spec.a.vector_ok and not spec.a.k_major


def test_vectors_and_reshape_epilogue():
    assert explain(matmul_task([96], [96, 80])) == 'gemm 1x80x96 a:direct b:direct'
    assert explain(matmul_task([3, 5, 96], [96])) == 'gemm 15x1x96 a:direct b:direct'
    (task,) = fused_tasks(lambda x, w: ops.reshape(ops.matmul(x, w), [64, 8, 10]) * 2.0, ([64, 96], 'float16'),
                          ([96, 80], 'float16'))
    spec = match_gemm(task)
    assert spec.out_n_contiguous


def test_epilogue_reads_are_vector_loads():
    """A residual and a bias contiguous along n are read a vector at a time (as the output is stored), a bias
    independent of n once per vector, a residual read across n (transposed) one element per lane; the launch
    runs the template only where the vector-read buffers are aligned for it."""
    (task,) = fused_tasks(lambda x, w, r, b, s: ops.relu(ops.matmul(x, w) + b + r) * s,
                          ([128, 64], 'float16'), ([64, 96], 'float16'), ([128, 96], 'float16'), ([96], 'float16'),
                          ([128, 1], 'float16'))
    (transposed,) = fused_tasks(lambda x, w, r: ops.matmul(x, w) + ops.transpose(r, 0, 1),
                                ([128, 64], 'float16'), ([64, 96], 'float16'), ([96, 128], 'float16'))
    with hidet.option.context(cuda_arch='sm_90'):
        template = find_matmul_template(task, 'cuda')
        source = template.source(template.default())
        t_template = find_matmul_template(transposed, 'cuda')
        t_source = t_template.source(t_template.default())
    shapes = [list(t.shape) for t in task.inputs]
    r, b, s = shapes.index([128, 96]), shapes.index([96]), shapes.index([128, 1])
    assert 'hidet::copy_vector<16>(x0_vec' in source and 'hidet::copy_vector<16>(x1_vec' in source
    assert f'hidet::is_aligned(buffers[{r}], 16)' in source and f'hidet::is_aligned(buffers[{b}], 16)' in source
    assert f'hidet::is_aligned(buffers[{s}]' not in source  # (one element per vector)
    assert f'hidet::is_aligned(buffers[{len(shapes)}], 16)' in source  # the output's vector store
    assert 'copy_vector<16>(x0_vec' not in t_source and 'hidet::copy_vector<16>(out' in t_source


def test_unaligned_operands_are_computed():
    spec = match_gemm(matmul_task([33, 30], [30, 17]))  # K % 8 != 0: rows are not 16-byte aligned
    assert spec.a.mode == 'computed' and spec.b.mode == 'computed'


def test_what_stays_with_the_auto_scheduler():
    assert 'float32' in explain(matmul_task([64, 96], [96, 80], 'float32'))  # full fp32 by default
    assert explain(matmul_task([3, 0], [0, 4])) == 'the reduction is empty'
    # a reduction in the prologue (not elementwise)
    a, b = tensor_input('a', 'float16', [16, 32]), tensor_input('b', 'float16', [32, 8])
    norm = compute('n', [16, 32], lambda i, k: a[i, k] * reduce([32], lambda j: a[i, j], 'max'))
    c = compute('c', [16, 8], lambda i, j: reduce([32], lambda k: norm[i, k] * b[k, j], 'sum'))
    with pytest.raises(NotGemm, match='2 reductions'):
        match_gemm(Task('t', [a, b], [c]))
    # an epilogue broadcasting the matmul (each element computed twice)
    c = compute('c', [16, 8], lambda i, j: reduce([32], lambda k: a[i, k] * b[k, j], 'sum'))
    d = compute('d', [2, 16, 8], lambda z, i, j: c[i, j] * 2.0)
    with pytest.raises(NotGemm, match='broadcasts'):
        match_gemm(Task('t', [a, b], [d]))
    # a max-reduction is not a GEMM
    e = compute('e', [16, 8], lambda i, j: reduce([32], lambda k: a[i, k] * b[k, j], 'max'))
    with pytest.raises(NotGemm, match='max'):
        match_gemm(Task('t', [a, b], [e]))


def test_paired_epilogue_reads_two_interleaved_columns():
    """An output reading the matmul at columns 2P (j / P) + j % P and + P is a paired epilogue (pair P, n the
    matmul's width, the output half of it); the same blocks read 2P apart, or the halves (j and j + width), are
    not."""
    a, b = tensor_input('a', 'float16', [16, 64]), tensor_input('b', 'float16', [64, 128])
    c = compute('c', [16, 128], lambda i, n: reduce([64], lambda k: a[i, k] * b[k, n], 'sum'))

    def gated(first, second):
        return Task('t', [a, b], [compute('y', [16, 64], lambda i, j: c[i, first(j)] * c[i, second(j)])])

    spec = match_gemm(gated(lambda j: j / 32 * 64 + j % 32, lambda j: j / 32 * 64 + j % 32 + 32))
    assert (spec.m, spec.n, spec.k, spec.pair) == (16, 128, 64, 32) and spec.acc_pair is not None
    with pytest.raises(NotGemm, match='moved indices'):  # (2P apart: no pair, and a block index is no reshape)
        match_gemm(gated(lambda j: j / 32 * 64 + j % 32, lambda j: j / 32 * 64 + j % 32 + 64))
    with pytest.raises(NotGemm, match='moved indices'):  # the halves (j + width: moved)
        match_gemm(gated(lambda j: j, lambda j: j + 64))


def test_template_selection():
    task = matmul_task([128, 64], [64, 32])
    assert find_matmul_template(task, 'cuda', 'sm_90') is not None
    assert find_matmul_template(task, 'cuda', 'sm_80') is not None
    assert find_matmul_template(task, 'cuda', 'sm_75') is None  # no mma.sync m16n8k16 with f32 before sm_80
    assert type(find_matmul_template(task, 'cpu')).__name__ == 'CpuMatmulTemplate'
    assert find_matmul_template(matmul_task([128, 64], [64, 32], 'float32'), 'cuda', 'sm_90') is None
    assert find_matmul_template(matmul_task([128, 64], [64, 32], 'float32'), 'cpu') is not None
    assert find_matmul_template(matmul_task([128, 64], [64, 32], 'float64'), 'cpu') is None
    assert find_matmul_template(matmul_task([128, 64], [64, 32], 'bfloat16'), 'cuda', 'sm_90') is not None
    from hidet import kernels as templates

    with hidet.option.context(cuda_arch='sm_90'):
        assert templates.find(task, 'cuda') is not None
        assert type(templates.find(task, 'cpu')).__name__ == 'CpuMatmulTemplate'


# ---------------------------------------------------------------------------------------------- spaces
@pytest.mark.parametrize('mnk', [(4096, 4096, 4096), (1, 4096, 4096), (128, 4096, 4096), (77, 300, 136),
                                 (1000, 24, 40), (5, 7, 9)], ids=str)
def test_spaces(mnk):
    m, n, k = mnk
    spec = match_gemm(matmul_task([m, k], [k, n]))
    levels = [space(spec, level, sms=132) for level in (0, 1, 2)]
    assert len(levels[0]) == 1 and levels[1][0] == levels[2][0] == levels[0][0]  # the default first
    assert len(levels[0]) <= len(levels[1]) <= len(levels[2]) <= 40
    for cfgs in levels:
        assert len(set(cfgs)) == len(cfgs)
        for c in cfgs:
            assert check_config(spec, c) == '', c


@pytest.mark.parametrize('policy,kwargs', [('disabled', {'disabled': True}), ('4', {'nparts': 4}),
                                            ('search', {'search': True})])
def test_parallel_k_reaches_the_space(policy, kwargs):
    """PassContext.set_parallel_k becomes the matmul task's attribute (and key), which the space obeys."""
    specs = (([128, 4096], 'float16'), ([4096, 4096], 'float16'))
    (default_task,) = fused_tasks(lambda x, w: ops.gelu(ops.matmul(x, w)), *specs)
    assert 'parallel_k' not in default_task.attrs
    assert space(match_gemm(default_task), 0, sms=132)[0].split_k > 1  # the heuristic splits this shape
    with hidet.graph.PassContext() as ctx:
        ctx.set_parallel_k(**kwargs)
        (task,) = fused_tasks(lambda x, w: ops.gelu(ops.matmul(x, w)), *specs)
    assert task.attrs['parallel_k'] == policy and task.key() != default_task.key()
    spec = match_gemm(task)
    levels = {level: space(spec, level, sms=132) for level in (0, 1, 2)}
    if policy == 'search':
        assert levels[0] == space(match_gemm(default_task), 0, sms=132)
        assert {c.split_k for c in levels[1]} >= {1, 2, 4, 8, 16}
    else:
        want = 1 if policy == 'disabled' else 4
        assert all(c.split_k == want for cfgs in levels.values() for c in cfgs)
    for cfgs in levels.values():
        assert cfgs and all(not check_config(spec, c) for c in cfgs)
    with pytest.raises(ValueError, match='at most one'):
        hidet.graph.PassContext().set_parallel_k(disabled=True, nparts=2)


def test_use_tensor_core_gives_float32_gemms_the_tf32_template():
    from hidet.kernels.matmul import find_matmul_template

    specs = (([64, 32], 'float32'), ([32, 48], 'float32'))
    (exact,) = fused_tasks(lambda x, w: ops.relu(ops.matmul(x, w)), *specs)
    assert find_matmul_template(exact, 'cuda', 'sm_90') is None  # float32 stays exact by default
    with hidet.graph.PassContext() as ctx:
        ctx.set_use_tensor_core(True)
        (task,) = fused_tasks(lambda x, w: ops.relu(ops.matmul(x, w)), *specs)
        (half,) = fused_tasks(lambda x, w: ops.matmul(x, w), ([64, 32], 'float16'), ([32, 48], 'float16'))
    assert task.attrs['tf32'] is True and 'tf32' not in half.attrs
    template = find_matmul_template(task, 'cuda', 'sm_90')
    assert template is not None and template.spec.mma_dtype.name == 'float32'
    assert all(not check_config(template.spec, c) for c in template.space(2))


@pytest.mark.cuda
@pytest.mark.parametrize('m,n,k', [(64, 48, 32), (200, 328, 520), (1, 256, 512), (77, 300, 136)])
def test_tf32_candidates_match_torch(m, n, k):
    """Every level-2 candidate of a TF32 matmul + bias + relu against float64: TF32 rounds the operands to
    10-bit mantissas (errors of ~1e-3 of the products' magnitude), and does round (not exact float32)."""
    from hidet.backend.cache import build_libraries
    from hidet.kernels.matmul import find_matmul_template
    from hidet.runtime.compiled_module import CompiledModule

    with hidet.graph.PassContext() as ctx:
        ctx.set_use_tensor_core(True)
        (task,) = fused_tasks(lambda x, w, b: ops.relu(ops.matmul(x, w) + b), ([m, k], 'float32'),
                              ([k, n], 'float32'), ([n], 'float32'))
    template = find_matmul_template(task, 'cuda')
    assert template is not None and template.spec.mma_dtype.name == 'float32'
    x, w, b = torch.randn(m, k, device='cuda'), torch.randn(k, n, device='cuda'), torch.randn(n, device='cuda')
    expected = torch.relu(x.double() @ w.double() + b.double())
    scale = (x.double().abs() @ w.double().abs()).max().item()
    configs = template.space(2)
    paths = build_libraries([(template.source(c, fallback=False), 'cuda', task.name) for c in configs])
    bad = []
    for c, path in zip(configs, paths):
        out = torch.full((m, n), float('nan'), device='cuda')
        CompiledModule(path)['launch'](x, w, b, out)
        torch.cuda.synchronize()
        err = (out.double() - expected).abs().max().item()
        if not 0 < err <= 2e-3 * scale:
            bad.append(f'{c.name()}: max error {err} (products up to {scale})')
    assert not bad, '; '.join(bad)


def test_config_checks():
    spec = match_gemm(matmul_task([256, 256], [256, 256]))
    assert check_config(spec, MmaConfig(128, 128, 32, 64, 64, 3)) == ''
    assert 'warp tiles' in check_config(spec, MmaConfig(128, 128, 32, 48, 64, 3))
    assert 'stages' in check_config(spec, MmaConfig(128, 128, 32, 64, 64, 1))
    assert 'shared memory' in check_config(spec, MmaConfig(256, 256, 64, 64, 128, 8))
    assert 'k splits' in check_config(spec, MmaConfig(128, 128, 64, 64, 64, 3, 8))
    # TMA: wgmma configs over operands read straight from aligned rows, or a convolution's input (im2col)
    assert check_config(spec, MmaConfig(128, 128, 64, 64, 128, 4, 1, True, True)) == ''
    assert 'wgmma' in check_config(spec, MmaConfig(128, 128, 32, 64, 64, 3, tma=True))
    for c, why in ((64, ''), (32, 'multiple of 64')):
        conv = ops.conv2d_channels_last(hidet.symbol([2, 8, 8, c], 'float16', 'cuda'),
                                        hidet.symbol([64, 3, 3, c], 'float16', 'cuda'), padding=1).trace[0].task
        got = check_config(match_gemm(conv, fold_k=True), MmaConfig(64, 64, 64, 64, 64, 4, 1, True, True))
        assert (why in got) if why else got == ''
    odd = match_gemm(matmul_task([256, 250], [250, 256]))  # rows of 250 elements: not 16-byte aligned
    assert 'aligned' in check_config(odd, MmaConfig(128, 128, 64, 64, 128, 4, 1, True, True))


# ---------------------------------------------------------------------------------------------- tuning cache
class FakeTemplate(Template):
    """A template over CPU kernels whose candidates differ by a comment; a fake benchmark reads it back."""

    name = 'fake-v1'

    def __init__(self, task):
        self.task = task
        self.title = f'{task.name} fake'

    def space(self, level):
        return [0] if level == 0 else [0, 1, 2, 3][:2 + level]

    def source(self, config, fallback=True):
        from hidet.backend.codegen import generate
        from hidet.ir.schedulers import schedule_task

        return f'// config {config}\n' + generate(schedule_task(self.task, 'cpu'))

    @staticmethod
    def config_to_json(config):
        return {'value': config}

    @staticmethod
    def config_from_json(obj):
        return obj.get('value')


def fake_benchmark(calls, latency):
    def benchmark(task, path, target, trial, entry):
        with open(os.path.join(os.path.dirname(path), 'source.cpp')) as f:
            config = int(re.match(r'// config (\d+)', f.read()).group(1))
        calls.append(config)
        return latency[config]

    return benchmark


def test_tuning_persists_in_the_cache(tmp_path):
    from hidet.backend import cache
    from hidet.drivers.tuning import choose_configs, tuning_key

    a = tensor_input('a', 'float32', [4, 4])
    task = Task('double', [a], [compute('d', [4, 4], lambda i, j: a[i, j] * 2.0)])
    template = FakeTemplate(task)
    calls = []
    bench = fake_benchmark(calls, {0: 3.0, 1: 1.0, 2: 2.0, 3: math.inf})
    with hidet.option.context(cache_dir=str(tmp_path)) as opts:
        assert choose_configs([(task, 'cpu', template)], 0, bench) == [0] and calls == []  # level 0: no tuning
        assert choose_configs([(task, 'cpu', template)], 2, bench) == [1]
        assert sorted(calls) == [0, 1, 2, 3]
        assert cache.status('tuning')['entries'] == 1
        record = json.loads(open(cache.tuning_path(tuning_key(task, 'cpu', template, 2, opts), opts)).read())
        assert record['config'] == {'value': 1} and record['latency_ms'] == 1.0
        assert [c['latency_ms'] for c in record['candidates']] == [3.0, 1.0, 2.0, None]
        calls.clear()
        assert choose_configs([(task, 'cpu', template)], 2, bench) == [1] and calls == []  # tuned once
        assert choose_configs([(task, 'cpu', template)], 1, bench) == [1] and sorted(calls) == [0, 1, 2]
        cache.clear('tuning')
        assert cache.status('tuning')['entries'] == 0


class WrongTemplate(FakeTemplate):
    """Candidate 1 computes a * 3, not a * 2 (a kernel bug), and would win on speed if it were not checked."""

    name = 'wrong-v1'

    def source(self, config, fallback=True):
        from hidet.backend.codegen import generate
        from hidet.ir.schedulers import schedule_task

        a = tensor_input('a', 'float32', [4, 4])
        task = self.task if config != 1 else Task('double', [a], [compute('d', [4, 4], lambda i, j: a[i, j] * 3.0)])
        return f'// config {config}\n' + generate(schedule_task(task, 'cpu'))


def test_tuning_drops_candidates_that_compute_something_else(tmp_path):
    """Every candidate runs on the same random inputs and must agree with the first (the default): one that
    computes something else is dropped with a warning naming it, and the record keeps no time for it."""
    from hidet.backend import cache
    from hidet.drivers import tuning

    a = tensor_input('a', 'float32', [4, 4])
    task = Task('double', [a], [compute('d', [4, 4], lambda i, j: a[i, j] * 2.0)])
    template = WrongTemplate(task)
    seen = []

    def timed(task, path, target, trial, entry):  # the real check, then candidate 1 as the fastest
        with open(os.path.join(os.path.dirname(path), 'source.cpp')) as f:
            config = int(re.match(r'// config (\d+)', f.read()).group(1))
        tuning.benchmark_library(task, path, target, trial, entry, warmup=0, number=1, repeat=1)
        seen.append(config)
        return {0: 3.0, 1: 1.0, 2: 2.0, 3: 2.5}[config]

    with hidet.option.context(cache_dir=str(tmp_path)) as opts:
        with pytest.warns(UserWarning, match=r"candidate \{'value': 1\} of wrong-v1 .* computes different results"):
            assert tuning.choose_configs([(task, 'cpu', template)], 2, timed) == [2]
        record = json.loads(open(cache.tuning_path(tuning.tuning_key(task, 'cpu', template, 2, opts), opts)).read())
    assert sorted(seen) == [0, 2, 3] and [c['latency_ms'] for c in record['candidates']] == [3.0, None, 2.0, 2.5]


class BundlingTemplate(FakeTemplate):
    """Hand-written CPU libraries (d = a * 2; candidate 2: * 3) that tuning may compile several to a library."""

    name = 'bundling-v1'

    def source(self, config, fallback=True, entry='launch'):
        factor = 3.0 if config == 2 else 2.0
        return '\n'.join([f'// config {config}', '#include <hidet/kernel/cpu.h>', 'HIDET_DEFINE_LIBRARY_EXPORTS()',
                          f'HIDET_KERNEL_EXPORT int32_t {entry}(void* const* buffers, int32_t num_buffers, '
                          'const int64_t* dims, int32_t num_dims, void* stream) {',
                          '  const float* a = (const float*)buffers[0];',
                          '  float* d = (float*)buffers[1];',
                          f'  for (int i = 0; i < 16; i++) d[i] = a[i] * {factor}f;',
                          '  return 0;', '}'] + declare_kernel(entry, self.task.signature()))

    def candidates_source(self, configs):
        from hidet.backend.codegen import merge_libraries

        return merge_libraries([self.source(c, entry=f'launch_{i}') for i, c in enumerate(configs)])


def test_tuning_compiles_candidates_together(tmp_path):
    """A template with candidates_source gets up to BUNDLE_MAX candidates per library (fewer where the build
    workers would idle), each timed and checked through its own entry."""
    from hidet.drivers import tuning

    a = tensor_input('a', 'float32', [16])
    task = Task('double', [a], [compute('d', [16], lambda i: a[i] * 2.0)])
    template = BundlingTemplate(task)
    seen = []

    def timed(task, path, target, trial, entry):
        seen.append((path, entry))
        tuning.benchmark_library(task, path, target, trial, entry, warmup=0, number=1, repeat=1)
        return 1.0 + len(seen)

    with hidet.option.context(cache_dir=str(tmp_path), num_build_workers=1) as opts:
        assert [tuning.bundle_size(n, opts) for n in (4, 3, 9)] == [4, 3, 4]
        with pytest.warns(UserWarning, match=r"candidate \{'value': 2\}"):
            assert tuning.choose_configs([(task, 'cpu', template)], 2, timed) == [0]
    assert [e for _, e in seen] == ['launch_0', 'launch_1', 'launch_2', 'launch_3']
    assert len({p for p, _ in seen}) == 1
    opts = hidet.option.current().replace(num_build_workers=8)
    assert [tuning.bundle_size(n, opts) for n in (9, 32, 20)] == [1, 4, 2]


def test_trial_outputs_agree_within_a_tolerance():
    from hidet.drivers.tuning import AGREE_RTOL, Trial

    a = tensor_input('a', 'float32', [8])
    trial = Trial(Task('neg', [a], [compute('d', [8], lambda i: -a[i])]), 'cpu')
    want = numpy.linspace(-4.0, 4.0, 8)
    assert trial.disagreement([want]) == ''  # the first becomes the reference
    assert trial.disagreement([want + 4.0 * AGREE_RTOL / 2]) == ''
    assert 'differs from the first' in trial.disagreement([want + 4.0 * AGREE_RTOL * 2])
    unwritten = want.copy()
    unwritten[3] = numpy.nan
    assert 'NaN' in trial.disagreement([unwritten])
    # a few values at an edge (an overflow, the square root of ~0) may round either way in a large output
    big = numpy.random.default_rng(0).standard_normal(200_000)
    trial = Trial(Task('neg', [a], [compute('d', [8], lambda i: -a[i])]), 'cpu')
    assert trial.disagreement([big]) == ''
    edges = big.copy()
    edges[:2] = [numpy.inf, numpy.nan]
    assert trial.disagreement([edges]) == ''
    edges[:200] = numpy.nan  # a block left unwritten
    assert 'NaN or infinite at 200 elements' in trial.disagreement([edges])
    b = tensor_input('b', 'bfloat16', [8])  # outputs of every dtype come back (numpy has no bfloat16)
    trial = Trial(Task('neg', [b], [compute('d', [8], lambda i: -b[i])]), 'cpu')
    outputs, _ = trial.run(lambda x, y: None)
    assert outputs[0].shape == (8,) and numpy.isnan(outputs[0]).all()


def test_tuning_fails_when_no_candidate_runs(tmp_path):
    from hidet.drivers.tuning import choose_configs

    a = tensor_input('a', 'float32', [4])
    task = Task('neg', [a], [compute('d', [4], lambda i: -a[i])])
    bench = fake_benchmark([], {0: math.inf, 1: math.inf, 2: math.inf})
    with hidet.option.context(cache_dir=str(tmp_path)), pytest.raises(RuntimeError, match='no candidate'):
        choose_configs([(task, 'cpu', FakeTemplate(task))], 1, bench)


# ---------------------------------------------------------------------------------------------- nvcc, no GPU
def _nvcc_or_skip():
    from hidet.backend.compiler import CompilerNotFoundError, find_nvcc

    try:
        find_nvcc()
    except CompilerNotFoundError:
        pytest.skip('nvcc not found')


def test_sources_compile_with_nvcc():
    """The default configs of a plain, a split-k, a fused (computed prologue) and a transposed case, for sm_80
    (mma.sync)."""
    _nvcc_or_skip()
    from hidet.backend.cache import build_libraries

    tasks = [matmul_task([256, 512], [512, 384]), matmul_task([1, 1024], [1024, 512]),
             fused_tasks(scaled_bias_gelu, ([64, 96], 'float16'), ([96, 80], 'float16'), ([80], 'float16'))[0],
             fused_tasks(lambda q, k: ops.matmul(q, ops.transpose(k, 1, 2)), ([4, 64, 96], 'bfloat16'),
                         ([4, 80, 96], 'bfloat16'))[0]]
    with hidet.option.context(cuda_arch='sm_80'):
        templates = [find_matmul_template(t, 'cuda') for t in tasks]
        sources = [t.source(t.default()) for t in templates]
        assert 'hidet::lang::mma_m16n8k16_f16_f32' in sources[0] and 'cp_async<16>' in sources[0]
        assert 'hidet_mm_workspace' in sources[1] and 'generic_launch' in sources[1]
        assert 'mma_m16n8k16_bf16_f32' in sources[3] and 'ldmatrix<4, false>' in sources[3]
        paths = build_libraries([(s, 'cuda', 'matmul-template-test') for s in sources])
    assert all(os.path.exists(p) for p in paths)


def test_wgmma_sources_compile_with_nvcc():
    """sm_90: large GEMMs default to wgmma configs; one per warpgroup tile width, every operand layout (A and B
    k- or m/n-major, computed, gathered by a convolution), float16 and bfloat16, split-k, and TMA twins (the
    launch entry building the tensor maps), compile for sm_90a."""
    _nvcc_or_skip()
    from hidet.backend.cache import build_libraries

    plain = matmul_task([512, 1024], [1024, 768])
    tasks_cfgs = [
        (plain, MmaConfig(128, 256, 64, 64, 256, 4, 1, True)),
        (matmul_task([256, 512], [512, 384], 'bfloat16'), MmaConfig(128, 128, 64, 64, 128, 4, 2, True)),
        (fused_tasks(lambda x, w: ops.matmul(ops.transpose(x, 1, 2), ops.transpose(w, 1, 2)),
                     ([3, 96, 136], 'float16'), ([3, 72, 96], 'float16'))[0],
         MmaConfig(64, 128, 64, 64, 64, 3, 1, True)),
        (fused_tasks(scaled_bias_gelu, ([128, 96], 'float16'), ([96, 80], 'float16'), ([80], 'float16'))[0],
         MmaConfig(128, 64, 64, 64, 64, 5, 1, True)),
        (fused_tasks(lambda x, w: ops.conv2d(x, w, padding=1),
                     ([2, 64, 14, 14], 'float16'), ([64, 64, 3, 3], 'float16'))[-1], None),
    ]
    tasks_cfgs += [(task, replace(cfg, tma=True)) for task, cfg in tasks_cfgs[:3]]  # TMA: plain, split-k, batched
    conv = ops.conv2d_channels_last(hidet.symbol([2, 9, 11, 64], 'float16', 'cuda'),
                                    hidet.symbol([128, 3, 3, 64], 'float16', 'cuda'), stride=(2, 1), padding=(1, 2))
    tasks_cfgs += [(conv.trace[0].task, MmaConfig(128, 128, 64, 64, 128, 4, 2, True, True)),  # im2col TMA
                   (conv.trace[0].task, MmaConfig(64, 128, 64, 64, 128, 4, 1, True, True))]
    with hidet.option.context(cuda_arch='sm_90'):
        assert default_config(match_gemm(plain), wgmma=True).wgmma
        sources = []
        for task, cfg in tasks_cfgs:
            template = find_matmul_template(task, 'cuda')
            assert template is not None and template.wgmma, explain(task)
            cfg = cfg or template.default()
            assert cfg.wgmma and not template.check(cfg), (cfg.name(), template.check(cfg))
            sources.append(template.source(cfg))
            assert 'hidet::lang::wgmma_m64k16<' in sources[-1] and 'dynamic_smem_aligned<1024>' in sources[-1]
            assert ('hidet::lang::tma_load(' in sources[-1] and 'make_tensor_map' in sources[-1]) == cfg.tma
            # (TMA: a producer warp after the warpgroups, which sync among themselves by a named barrier)
            assert ('named_barrier_sync<1, ' in sources[-1]) == cfg.tma
            assert f'__launch_bounds__({cfg.threads + 32 if cfg.tma else cfg.threads})' in sources[-1]
        assert all('hidet::lang::tma_load_im2col(' in sources[i] for i in (-2, -1))
        # split-k: the split blocks of a tile are one cluster summing through shared memory, no workspace
        assert '__cluster_dims__(1, 2, 1)' in sources[1] and 'hidet_mm_workspace' not in sources[1]
        assert 'hidet::lang::cluster_load_f32x4(' in sources[1]
        paths = build_libraries([(s, 'cuda', 'matmul-template-test') for s in sources])
    assert all(os.path.exists(p) for p in paths)


def test_candidates_compile_together_with_nvcc():
    """sm_90: several candidates of one task (cp.async, split-k, TMA) in one library, behind launch_0.."""
    _nvcc_or_skip()
    import subprocess

    from hidet.backend.cache import build_libraries

    task = matmul_task([512, 1024], [1024, 768])
    cfgs = [MmaConfig(128, 256, 64, 64, 256, 4, 1, True), MmaConfig(128, 128, 64, 64, 128, 4, 2, True),
            MmaConfig(128, 128, 64, 64, 128, 4, 2, True, True)]
    with hidet.option.context(cuda_arch='sm_90'):
        template = find_matmul_template(task, 'cuda')
        source = template.candidates_source(cfgs)
        assert source.count('#include <hidet/kernel/lang.h>') == 1
        (path,) = build_libraries([(source, 'cuda', 'matmul-template-test')])
    symbols = subprocess.run(['nm', '-D', '--defined-only', path], capture_output=True, text=True).stdout
    assert all(f' launch_{i}' in symbols for i in range(3)) and ' launch\n' not in symbols


def _eval(e, env):
    """An integer / boolean IR expression's value (C semantics: division truncates toward zero)."""
    from hidet.ir.expr import Binary, Cast, Constant, Var

    if isinstance(e, Constant):
        return e.value
    if isinstance(e, Var):
        return env[id(e)]
    if isinstance(e, Cast):
        return _eval(e.a, env)
    assert isinstance(e, Binary), type(e)
    a, b = _eval(e.a, env), _eval(e.b, env)
    if e.op == '/':
        return abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    if e.op == '%':
        return a - b * (abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1))
    return {'+': a + b, '-': a - b, '*': a * b, '<': a < b, '<=': a <= b, '>': a > b, '>=': a >= b,
            '==': a == b, '!=': a != b, '&&': a and b, '&': a & b}[e.op]


@pytest.mark.parametrize('x_shape,w_shape,stride,padding,dilation', [
    ([2, 9, 11, 16], [24, 3, 3, 16], 1, 1, 1), ([1, 12, 10, 8], [16, 5, 5, 8], 2, 2, 1),
    ([3, 10, 10, 24], [8, 3, 3, 24], 1, 2, 2), ([1, 8, 8, 32], [32, 1, 1, 32], 2, 0, 1)])
def test_gather_rows_split_offsets_and_padding_tests(x_shape, w_shape, stride, padding, dilation):
    """A convolution's gathered operand: its offset and padding test, split into a part of the row (kept per
    chunk row by the kernel) and a part of k (per k-tile), agree with the whole expressions everywhere."""
    import random

    from hidet.kernels.matmul.values import row_split

    xs, ws = hidet.symbol(x_shape, 'float16', 'cuda'), hidet.symbol(w_shape, 'float16', 'cuda')
    y = ops.conv2d_channels_last(xs, ws, stride=stride, padding=padding, dilation=dilation)
    spec = match_gemm(y.trace[0].task, fold_k=True)
    g = spec.a.gather
    assert g is not None
    split = row_split(g.offset, g.valid, spec.k_var)
    assert split is not None and len(split.row_terms) == (2 if padding else 0)
    rng = random.Random(0)
    for _ in range(300):
        m, k = rng.randrange(spec.m), rng.randrange(spec.k // 8) * 8
        env = {id(spec.m_var): m, id(spec.k_var): k}
        want_off = _eval(g.offset, env)
        assert _eval(split.row_offset, env) + _eval(split.k_offset, env) == want_off
        want_ok = bool(_eval(g.valid, env)) if g.valid is not None else True
        rows = [_eval(t, env) for t in split.row_terms]
        ok = all({'<': r < v, '<=': r <= v, '>': r > v, '>=': r >= v}[op]
                 for (i, op, side), r, v in ((c, rows[c[0]], _eval(c[2], env)) for c in split.conds))
        assert ok == want_ok, (m, k)


@pytest.mark.parametrize('x_shape,w_shape,stride,padding,dilation', [
    ([2, 9, 11, 64], [64, 3, 3, 64], (2, 1), (1, 2), (1, 2)), ([1, 12, 10, 128], [96, 5, 5, 128], 2, 2, 1),
    ([3, 10, 10, 64], [64, 1, 3, 64], 1, (0, 1), 1), ([4, 8, 8, 64], [128, 1, 1, 64], 2, 0, 1),
    ([2, 7, 7, 512], [64, 3, 3, 512], 1, 1, 1)], ids=str)
def test_conv_window_gives_the_gather_and_the_im2col_box(x_shape, w_shape, stride, padding, dilation):
    """A convolution's gathered input is recognized as its window (ConvWindow): the element at (m, k) is the
    input at the window position the sizes, strides, padding and dilation give; TMA's im2col box then has
    exactly the output positions as window origins, and the im2col TMA twins are offered only when asked."""
    import random

    from hidet.kernels.matmul.tma import im2col_corners, im2col_window, tma_unsupported

    spec = conv_spec(x_shape, w_shape, stride, padding, dilation)
    win = spec.a.gather.window
    n, h, w, c = x_shape
    oh, ow = win.out
    kh, kw = w_shape[1:3]
    assert win.input == tuple(x_shape) and win.kernel == (kh, kw) and spec.m == n * oh * ow
    rng = random.Random(0)
    for _ in range(200):
        m, k = rng.randrange(spec.m), rng.randrange(spec.k // 8) * 8
        b, p, q = m // (oh * ow), m // ow % oh, m % ow
        r, s, ch = k // (kw * c), k // c % kw, k % c
        y = p * win.stride[0] - win.padding[0] + r * win.dilation[0]
        x = q * win.stride[1] - win.padding[1] + s * win.dilation[1]
        env = {id(spec.m_var): m, id(spec.k_var): k}
        inside = 0 <= y < h and 0 <= x < w
        assert (bool(_eval(spec.a.gather.valid, env)) if spec.a.gather.valid is not None else True) == inside
        if inside:
            assert _eval(spec.a.gather.offset, env) == ((b * h + y) * w + x) * c + ch
    (lw, lh), (uw, uh) = im2col_corners(win)
    assert len(range(lh, h + uh, win.stride[0])) == oh and len(range(lw, w + uw, win.stride[1])) == ow
    assert im2col_window(spec) == win and tma_unsupported(spec) == ''
    with hidet.option.context(cuda_arch='sm_90'):
        template = find_matmul_template(spec.task, 'cuda')
        assert any(cfg.tma for cfg in template.space(2)) == (spec.m > 64)


def test_conv_window_only_where_im2col_fits():
    """No window (or no im2col) where TMA cannot copy the gather: channels not a multiple of 64 (a k-tile
    would straddle window positions), a gather that is not a convolution's (merged heads)."""
    from hidet.kernels.matmul.tma import im2col_window, tma_unsupported

    spec = conv_spec([2, 9, 9, 32], [16, 3, 3, 32], 1, 1, 1)
    assert spec.a.gather.window is not None and im2col_window(spec) is None
    assert 'convolution' in tma_unsupported(spec)
    q = hidet.symbol([2, 4, 32, 64], 'float16', 'cuda')
    w = hidet.symbol([256, 96], 'float16', 'cuda')
    y = ops.matmul(ops.reshape(ops.transpose(q, 1, 2), [2, 32, 256]), w)  # heads x dim merged into k
    spec = match_gemm(hidet.graph.optimize(hidet.trace_from(y, [q, w])).nodes[0].task)
    if spec.a.gather is not None:
        assert spec.a.gather.window is None


def test_a_symbolic_batch_is_no_gemm():
    """Batched products over a symbolic batch (attention's scores at dynamic shapes): NotGemm, said so, and no
    operand modes for the fusion policy (the GEMM templates take a symbolic m only)."""
    q = hidet.symbol(['b', 4, 16, 32], 'float16', 'cuda')
    k = hidet.symbol(['b', 4, 32, 16], 'float16', 'cuda')
    task = ops.matmul(q, k).trace[0].task
    with pytest.raises(NotGemm, match='symbolic'):
        match_gemm(task)
    assert operand_modes(task) is None


def test_epilogue_reads_are_issued_before_the_stores():
    """GPT-2's MLP down-projection at batch 8 (4096x768x3072) with its bias and residual: each thread issues the
    bias and residual loads of all its 12 output vectors before its first store (a store between two loads keeps
    their latencies apart: the epilogue cost 7 µs over the bare GEMM on the H100), and still stores them all."""
    (task,) = fused_tasks(lambda a, b, bias, res: ops.matmul(a, b) + bias + res, ([4096, 3072], 'float16'),
                          ([3072, 768], 'float16'), ([768], 'float16'), ([4096, 768], 'float16'))
    template = find_matmul_template(task, 'cuda', 'sm_90')
    cfg = default_config(template.spec, 132, wgmma=True)
    assert cfg.name() == '128x192x64_w64x192_p4_wg_tma'
    lines = template.source(cfg).splitlines()
    loads = [i for i, line in enumerate(lines) if re.search(r'copy_vector<16>\(x\d+_vec', line)]
    stores = [i for i, line in enumerate(lines) if re.search(r'copy_vector<16>\(out_', line)]
    assert len(loads) == 2 * 12 and len(stores) == 12
    assert max(loads) < min(stores)


def test_per_column_epilogue_reads_are_loaded_once_a_thread():
    """resnet50's expansion at batch 32 with its epilogue (a float32 batch-norm scale and shift per column, a
    residual): a thread's 8 output vectors lie in one column of the 64 x 128 tile, so the scale and shift are
    loaded once (2 x 2 16-byte loads), the residual once a vector, 4 vectors ahead (registers: three blocks an SM)."""
    def block(x, w, s, t, r):
        y = ops.cast(ops.cast(ops.conv2d_channels_last(x, w), 'float32') * s + t, 'float16')
        return ops.relu(y + r)

    (task,) = fused_tasks(block, ([32, 28, 28, 128], 'float16'), ([512, 1, 1, 128], 'float16'), ([512], 'float32'),
                          ([512], 'float32'), ([32, 28, 28, 512], 'float16'))
    template = find_matmul_template(task, 'cuda', 'sm_90')
    cfg = default_config(template.spec, 132, wgmma=True)
    assert cfg.name() == '64x128x64_w64x128_p3_wg_tma'
    lines = template.source(cfg).splitlines()
    loads = {}
    for i, line in enumerate(lines):
        found = re.search(r'copy_vector<16>\(x\d+_vec\w* \+ \w+, (in\d+)_', line)
        if found:
            loads.setdefault(found.group(1), []).append(i)
    stores = [i for i, line in enumerate(lines) if re.search(r'copy_vector<16>\(out_', line)]
    scale, shift, residual = (loads[f'in{p}'] for p in (2, 3, 4))
    assert len(scale) == len(shift) == 2 and len(residual) == len(stores) == 8
    assert max(scale + shift) < min(residual) and sorted(residual)[3] < min(stores)


@pytest.mark.parametrize('dtype,storage', [('float16', '__half'), ('bfloat16', '__nv_bfloat16')])
def test_gelu_tanh_and_silu_epilogues_use_the_fast_activation_forms(dtype, storage):
    """GPT-2's written-out GELU (0.5 x (1 + tanh(k (x + 0.044715 x^3)))), ops.gelu's and SiLU gating in a GEMM's
    epilogue: tanh is the GPU's tanh.approx (its result is rounded to 16 bits: one special-function instruction,
    where the float32 ``hidet::one_plus_tanh`` takes two), the erf GELU's erf a fit on it (erff: +31% over the bare
    GEMM at 4096x3072x768 on the H100) and the sigmoid ``hidet::sigmoid`` (approximate exp2 and reciprocal), not
    tanhf, expf and an IEEE division: those took the GELU epilogue 30% over the bare GEMM, and the two
    special-function instructions 21% at 4096x3072x768. The output is rounded once (not rounded, widened and
    rounded again)."""
    def new_gelu(x):
        return 0.5 * x * (1.0 + ops.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * ops.pow(x, 3.0))))
    (gelu,) = fused_tasks(lambda a, b, bias: new_gelu(ops.matmul(a, b) + bias), ([256, 768], dtype),
                          ([768, 512], dtype), ([512], dtype))
    (ops_gelu,) = fused_tasks(lambda a, b, bias: ops.gelu(ops.matmul(a, b) + bias, 'tanh'), ([256, 768], dtype),
                              ([768, 512], dtype), ([512], dtype))
    (erf_gelu,) = fused_tasks(lambda a, b, bias: ops.gelu(ops.matmul(a, b) + bias), ([256, 768], dtype),
                              ([768, 512], dtype), ([512], dtype))
    (silu,) = fused_tasks(lambda a, b, up: ops.silu(ops.matmul(a, b)) * up, ([256, 768], dtype),
                          ([768, 512], dtype), ([256, 512], dtype))
    for task, fast, slow in ((gelu, 'hidet::tanh_approx(', r'\btanh\('), (ops_gelu, 'hidet::tanh_approx(', r'\btanh\('),
                             (erf_gelu, 'hidet::erf_approx(', r'\berf\('), (silu, 'hidet::sigmoid(', r'\bexp\(')):
        template = find_matmul_template(task, 'cuda', 'sm_90')
        source = template.source(default_config(template.spec, 132, wgmma=True))
        assert fast in source and not re.search(slow, source), task.name
        assert f'from_float<{storage}>' in source and f'from_float<{storage}>(float(hidet::to_float(' not in source


def test_transposed_outputs_are_stored_walking_m():
    """A channels-last convolution written NCHW (mobile networks' expansions, read by an NCHW depthwise one):
    consecutive m are consecutive outputs, so the epilogue's threads take consecutive rows of the staged tile
    (coalesced stores) from rows 65 words apart (conflict-free column reads); n-contiguous outputs keep walking n."""
    (task,) = fused_tasks(lambda x, w: ops.permute(ops.conv2d_channels_last(x, w), [0, 3, 1, 2]),
                          ([1, 56, 56, 16], 'float16'), ([96, 1, 1, 16], 'float16'))
    template = find_matmul_template(task, 'cuda', 'sm_90')
    assert template.spec.out_m_contiguous and not template.spec.out_n_contiguous
    source = template.source(default_config(template.spec, 132, wgmma=True))
    assert re.search(r'% int32_t\(64\)\);', source) and '* int32_t(65))' in source
    plain = match_gemm(matmul_task([256, 512], [512, 384]))
    assert plain.out_n_contiguous and not plain.out_m_contiguous
