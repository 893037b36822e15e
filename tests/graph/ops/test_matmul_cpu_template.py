"""The CPU matmul template: every candidate against torch, fused graphs, tuning timed on the CPU,
convolutions as implicit GEMMs."""
from __future__ import annotations

import json

import pytest
import torch

import hidet
from hidet import ops
from hidet.graph.ops.matmul import MatmulOp
from hidet.kernels.matmul import NotGemm, explain, find_matmul_template, match_gemm

from .matmul_cases import fused_tasks, gated_reference, gated_task, matmul_task


def _cpu_task_and_args(a_shape, b_shape, dtype, transpose_b=False):
    tdt = getattr(torch, dtype)
    a = torch.randn(*a_shape, dtype=tdt)
    b = torch.randn(*b_shape, dtype=tdt)  # transposed: b_shape is [..., n, k]
    sa, sb = hidet.symbol(list(a.shape), dtype), hidet.symbol(list(b.shape), dtype)
    fn = (lambda x, y: ops.matmul(x, ops.transpose(y, -1, -2))) if transpose_b else ops.matmul
    (task,) = fused_tasks(fn, (list(a.shape), dtype), (list(b.shape), dtype)) if transpose_b else \
        [MatmulOp(sa, sb).task]
    want = (a.double() @ (b.double().transpose(-1, -2) if transpose_b else b.double()))
    return task, a, b, want


@pytest.mark.parametrize('case', [([100, 200], [200, 300], 'float32', False), ([1, 64], [64, 10], 'float32', False),
                                  ([2, 1, 33, 72], [3, 72, 24], 'float32', False),
                                  ([4, 17, 9], [4, 13, 9], 'bfloat16', True), ([5, 40], [40, 7], 'float16', False)],
                         ids=str)
def test_cpu_template_every_candidate(case):
    """Each level-1 candidate of the CPU template computes torch.matmul (edges, batches, a transposed operand,
    16-bit operands)."""
    from hidet.backend.cache import build_libraries
    from hidet.runtime.compiled_module import CompiledModule

    a_shape, b_shape, dtype, transpose_b = case
    torch.manual_seed(0)
    task, a, b, want = _cpu_task_and_args(a_shape, b_shape, dtype, transpose_b)
    template = find_matmul_template(task, 'cpu')
    configs = template.space(1)
    assert configs and configs[0] == template.default()
    paths = build_libraries([(template.source(c), 'cpu', 'cpu-matmul-test') for c in configs])
    tol = 1e-5 if dtype == 'float32' else 1e-2
    for cfg, path in zip(configs, paths):
        out = torch.empty(want.shape, dtype=a.dtype)
        args = [a if tuple(t.shape) == tuple(a.shape) else b for t in task.inputs]  # the task's input order
        CompiledModule(path)['launch'](*args, out)
        scale = max(1.0, want.abs().max().item())
        assert (out.double() - want).abs().max().item() <= tol * scale, cfg


@pytest.mark.parametrize('mhk,dtype', [((37, 192, 40), 'float32'), ((5, 64, 24), 'float16'),
                                       ((9, 128, 16), 'bfloat16')], ids=str)
def test_cpu_template_paired_epilogue(mhk, dtype):
    """silu(gate) * up in the epilogue of the interleaved gate / up GEMM (a paired epilogue): each level-1
    candidate with whole column pairs in its tiles (the others refused by check), against float64."""
    from hidet.backend.cache import build_libraries
    from hidet.runtime.compiled_module import CompiledModule

    m, h, k = mhk
    torch.manual_seed(0)
    task = gated_task(m, h, k, dtype, 'cpu')
    template = find_matmul_template(task, 'cpu')
    assert template is not None and template.spec.pair == 32
    configs = template.space(1)
    assert configs and all(c.nc % 64 == 0 for c in configs)
    x, w = torch.randn(m, k).to(getattr(torch, dtype)), (torch.randn(k, 2 * h) / k ** 0.5).to(getattr(torch, dtype))
    want = gated_reference(x.double(), w.double()).double()
    for cfg, path in zip(configs, build_libraries([(template.source(c), 'cpu', 'cpu-paired') for c in configs])):
        out = torch.empty(m, h, dtype=x.dtype)
        CompiledModule(path)['launch'](x, w, out)
        tol = {'float32': 1e-5, 'float16': 1e-2, 'bfloat16': 5e-2}[dtype]  # (bfloat16: 8 bits of mantissa)
        assert (out.double() - want).abs().max().item() <= tol * max(1.0, want.abs().max().item()), cfg


def test_cpu_template_runs_fused_graphs():
    """A scale prologue and a bias + GELU + residual (cast) epilogue fused into the CPU template's kernel."""
    torch.manual_seed(0)
    x, w, bias, res = torch.randn(37, 64).half(), torch.randn(64, 48).half(), torch.randn(48).half(), torch.randn(37, 48)

    def fn(x, w, bias, res):
        return ops.gelu(ops.matmul(x * 0.5 + 1.0, w) + bias) + ops.cast(res, 'float16')

    syms = [hidet.symbol(list(t.shape), str(t.dtype).replace('torch.', '')) for t in (x, w, bias, res)]
    graph = hidet.graph.optimize(hidet.trace_from(fn(*syms), syms))
    assert len(graph.nodes) == 1 and find_matmul_template(graph.nodes[0].task, 'cpu') is not None
    got = graph.build()(*[hidet.from_torch(t) for t in (x, w, bias, res)]).torch()
    want = torch.nn.functional.gelu((x * 0.5 + 1.0).float() @ w.float() + bias.float()).half().float() + res.half().float()
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


def test_cpu_tuning_times_candidates_on_the_cpu(tmp_path):
    from hidet.drivers.tuning import choose_configs, tuning_key

    task = MatmulOp(hidet.symbol([64, 96]), hidet.symbol([96, 80])).task
    template = find_matmul_template(task, 'cpu')
    with hidet.option.context(cache_dir=str(tmp_path)) as opts:
        (config,) = choose_configs([(task, 'cpu', template)], 1)
        from hidet.backend import cache

        record = json.loads(open(cache.tuning_path(tuning_key(task, 'cpu', template, 1, opts), opts)).read())
    assert config in template.space(1)
    assert all(c['latency_ms'] is not None and c['latency_ms'] > 0 for c in record['candidates'])


@pytest.mark.parametrize('conv', [((2, 3, 9, 9), (6, 3, 3, 3), 1, 1, 1), ((1, 8, 12, 10), (16, 8, 3, 3), 2, 0, 2),
                                  ((2, 16, 7, 7), (32, 16, 1, 1), 1, 0, 1)], ids=str)
def test_cpu_template_runs_convolutions_as_implicit_gemms(conv):
    """conv2d (+ bias + ReLU, fused) on the CPU: its reduction over channels x window folds into one k."""
    x_shape, w_shape, stride, padding, dilation = conv
    torch.manual_seed(0)
    x, w, b = torch.randn(*x_shape), torch.randn(*w_shape), torch.randn(w_shape[0])
    syms = [hidet.symbol(list(t.shape)) for t in (x, w, b)]
    y = ops.relu(ops.conv2d(syms[0], syms[1], syms[2], stride=stride, padding=padding, dilation=dilation))
    graph = hidet.graph.optimize(hidet.trace_from(y, syms))
    assert len(graph.nodes) == 1
    spec = match_gemm(graph.nodes[0].task, ('float32',), fold_k=True)
    assert spec.k == w_shape[1] * w_shape[2] * w_shape[3] and spec.n == w_shape[0]
    assert find_matmul_template(graph.nodes[0].task, 'cpu') is not None
    got = graph.build()(*[hidet.from_torch(t) for t in (x, w, b)]).torch()
    want = torch.relu(torch.nn.functional.conv2d(x.double(), w.double(), b.double(), stride, padding, dilation))
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_cpu_template_leaves_depthwise_and_gemv_to_the_auto_scheduler():
    depthwise = ops.conv2d(hidet.symbol([1, 8, 9, 9]), hidet.symbol([8, 1, 3, 3]), padding=1, groups=8)
    assert find_matmul_template(depthwise.trace[0].task, 'cpu') is None
    assert find_matmul_template(matmul_task([64, 32], [32], 'float32'), 'cpu') is None
    with pytest.raises(NotGemm, match='several axes'):  # the CUDA template does not fold k (yet)
        match_gemm(ops.conv2d(hidet.symbol([1, 8, 9, 9], 'float16'), hidet.symbol([4, 8, 3, 3], 'float16')).trace[0].task)


@pytest.mark.parametrize('order', [(0, 2, 1, 3), (0, 2, 3, 1)], ids=['heads-outer', 'heads-inner'])
def test_epilogue_merging_axes(order):
    """Attention's output: a batched matmul over heads, permuted and reshaped so heads x dim merge into one
    axis. The CPU template takes it (checked here); the CUDA template not yet (not run on a GPU)."""
    torch.manual_seed(0)
    p, v = torch.randn(2, 3, 5, 7), torch.randn(2, 3, 7, 4)

    def fn(p, v):
        y = ops.permute(ops.matmul(p, v), list(order))
        return ops.reshape(y, [2, 5, 12])

    syms = [hidet.symbol(list(t.shape)) for t in (p, v)]
    graph = hidet.graph.optimize(hidet.trace_from(fn(*syms), syms))
    (node,) = graph.nodes
    spec = match_gemm(node.task, ('float32',))
    assert spec.merged_epilogue
    assert find_matmul_template(node.task, 'cpu') is not None
    half = fused_tasks(fn, ([2, 3, 5, 7], 'float16'), ([2, 3, 7, 4], 'float16'))[0]
    assert match_gemm(half).merged_epilogue and find_matmul_template(half, 'cuda', 'sm_90') is None
    assert 'merged epilogue' in explain(half)
    got = graph.build()(hidet.from_torch(p), hidet.from_torch(v)).torch()
    want = (p.double() @ v.double()).permute(*order).reshape(2, 5, 12)
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)


def test_cpu_template_rounds_a_biased_matmul_once():
    """``x @ w + bias`` in float16 rounds once, as torch's linear: the bias is added to the float32 accumulator.
    Integer operands keep the accumulator exact and the products past 2048, where float16's step is 2 or more,
    so rounding the product to float16 before the bias would change most outputs."""
    torch.manual_seed(0)
    x, w = torch.randint(0, 17, (24, 128)).half(), torch.randint(0, 17, (128, 40)).half()
    bias = (torch.randint(-40, 40, (40,)) / 8).half()
    syms = [hidet.symbol(list(t.shape), 'float16') for t in (x, w, bias)]
    graph = hidet.graph.optimize(hidet.trace_from(ops.matmul(syms[0], syms[1]) + syms[2], syms))
    assert len(graph.nodes) == 1 and find_matmul_template(graph.nodes[0].task, 'cpu') is not None
    got = graph.build()(*[hidet.from_torch(t) for t in (x, w, bias)]).torch()
    exact = x.double() @ w.double() + bias.double()
    assert torch.equal(got, exact.half())
    assert not torch.equal((x.double() @ w.double()).half().double() + bias.double(), exact)  # (the test bites)


def test_a_threshold_on_a_matmul_compares_its_float16_value():
    """``(x @ w) > 2048`` in float16: the epilogue computes in float32 but compares the product as torch has it,
    rounded to float16: 2049 is 2048 there (ties to even), so no output passes, where the float32 value would."""
    x, w = torch.randint(0, 3, (16, 64)).half(), torch.randint(0, 3, (64, 24)).half()
    x[:, :2], x[:, 2:], w[0], w[1] = 1, 0, 2048, 1  # every product 2048 + 1
    syms = [hidet.symbol(list(t.shape), 'float16') for t in (x, w)]
    graph = hidet.graph.optimize(hidet.trace_from(ops.matmul(syms[0], syms[1]) > 2048.0, syms))
    assert len(graph.nodes) == 1 and find_matmul_template(graph.nodes[0].task, 'cpu') is not None
    got = graph.build()(*[hidet.from_torch(t) for t in (x, w)]).torch()
    assert got.dtype == torch.bool and not got.any()
    assert ((x.float() @ w.float()) > 2048.0).all()  # (the test bites)
