"""Templates for tasks with symbolic dimensions (issue 10): the tensor-core matmul as a dispatch over
ranges of a symbolic m (each range tuned as a static task), and the attention template at symbolic batch
and sequence lengths. Selection, the ranges and the generated sources on the CPU (compiled with nvcc
where it is installed); the kernels against torch on the GPU (`cuda` marker)."""
from __future__ import annotations

import pytest
import torch

import hidet
from hidet import ops
from hidet.drivers.build_task import task_sources
from hidet.kernels.matmul import find_matmul_template
from hidet.kernels.matmul.dispatch import BOUNDS, TOP_M, SymbolicMmaTemplate
from hidet.ir.expr import evaluate_dim


def _linear_residual(device='cuda', n=96, k=64, dtype='float16'):
    """relu(x @ w + bias) + residual over x [batch, seq, k]: one fused task with a symbolic m."""
    x = hidet.symbol(['batch', 'seq', k], dtype, device)
    w = hidet.symbol([k, n], dtype, device)
    bias = hidet.symbol([n], dtype, device)
    res = hidet.symbol(['batch', 'seq', n], dtype, device)
    graph = hidet.graph.optimize(hidet.trace_from([ops.relu(ops.matmul(x, w) + bias) + res], [x, w, bias, res]))
    return graph


def _flattened_linear(device='cuda'):
    """GPT-2's Conv1D: a computed prologue (a scale and shift), rows flattened to [batch * seq, k], the
    product reshaped back to [batch, seq, n]: m is one symbolic product, unflattened by the epilogue."""
    x = hidet.symbol(['batch', 'seq', 64], 'float16', device)
    w = hidet.symbol([64, 48], 'float16', device)
    bias = hidet.symbol([48], 'float16', device)
    h = x * 2.0 + 1.0
    y = ops.reshape(ops.matmul(ops.reshape(h, [-1, 64]), w) + bias, [x.shape[0], x.shape[1], 48])
    return hidet.graph.optimize(hidet.trace_from([y], [x, w, bias]))


def _heads_merged_linear(device='cuda', heads=4, dim=32, batch='batch', seq='seq', flatten=False):
    """BERT's attention-output projection: [batch, heads, seq, dim] permuted and reshaped to rows of
    heads * dim, times a weight: the prologue reads row m at (m / seq, m % seq), a run-time divisor.
    ``flatten``: GPT-2's Conv1D, the rows flattened to [batch * seq, heads * dim] and the product reshaped
    back (m is one axis, divided by seq in the prologue)."""
    x = hidet.symbol([batch, heads, seq, dim], 'float16', device)
    w = hidet.symbol([heads * dim, 48], 'float16', device)
    bias = hidet.symbol([48], 'float16', device)
    h = ops.reshape(ops.permute(x, [0, 2, 1, 3]), [x.shape[0], x.shape[2], heads * dim])
    if flatten:
        y = ops.reshape(ops.matmul(ops.reshape(h, [-1, heads * dim]), w) + bias, [x.shape[0], x.shape[2], 48])
    else:
        y = ops.matmul(h, w) + bias
    return hidet.graph.optimize(hidet.trace_from([y], [x, w, bias]))


def test_task_instantiate_takes_symbols_at_values():
    task = _linear_residual().nodes[0].task
    static = task.instantiate({'batch': 2, 'seq': 5})
    assert static.symbols() == []
    assert [list(t.shape) for t in static.inputs] == [[2, 5, 64], [64, 96], [96], [2, 5, 96]]
    assert list(static.outputs[0].shape) == [2, 5, 96]


def test_symbolic_m_gets_the_dispatch_with_a_static_task_per_range():
    task = _linear_residual().nodes[0].task
    template = find_matmul_template(task, 'cuda', 'sm_90')
    assert isinstance(template, SymbolicMmaTemplate)
    points = template.points(task, 'cuda')
    assert len(points) == len(BOUNDS) + 1
    ms = [evaluate_dim(t.outputs[0].shape[0], {}) * evaluate_dim(t.outputs[0].shape[1], {}) for t, _, _ in points]
    assert ms == list(BOUNDS) + [TOP_M]
    assert all(tpl is not None and not t.symbols() for t, _, tpl in points)
    # no template on the CPU or before sm_80, and none where n is symbolic (the auto-scheduler's)
    assert find_matmul_template(task, 'cpu') is None
    assert find_matmul_template(task, 'cuda', 'sm_75') is None
    a, b = hidet.symbol(['m', 64], 'float16', 'cuda'), hidet.symbol([64, 'n'], 'float16', 'cuda')
    assert find_matmul_template(ops.matmul(a, b).trace[0].task, 'cuda', 'sm_90') is None


def test_dispatch_source_picks_kernels_by_m_and_reads_rows_without_division():
    task = _linear_residual().nodes[0].task
    with hidet.option.context(cuda_arch='sm_90'):
        source = task_sources([(task, 'cuda')], 0)[0]
    assert 'const int64_t m = (sym_batch * sym_seq);' in source
    assert 'if (m <= 16)' in source  # the smallest range has its own (16-row) kernel
    assert source.count('HIDET_DEFINE_LIBRARY_EXPORTS') == 1
    # the residual [batch, seq, n] is read at m * n + n (the fold of batch x seq is not divided back)
    kernels = source.split("// the auto-scheduler's kernels")[0]  # (the fallback for misaligned buffers divides)
    assert '% sym_seq' not in kernels and '/ sym_seq' not in kernels


def test_ranges_sharing_a_split_config_share_its_workspace():
    """Two ranges of m that take the same split-k config (a narrow linear: 16 x 64 tiles split 2 up to 32 rows and up
    to 64) declare its workspace once, as large as the larger range needs (twice, it did not compile)."""
    x, w = hidet.symbol(['batch', 'seq', 512], 'float16', 'cuda'), hidet.symbol([512, 512], 'float16', 'cuda')
    graph = hidet.graph.optimize(hidet.trace_from(ops.silu(x @ w), [x, w]))
    with hidet.option.context(cuda_arch='sm_90'):
        template = find_matmul_template(graph.nodes[0].task, 'cuda')
        points = template.points(graph.nodes[0].task, 'cuda')
        cfgs = [tpl.default() for _, _, tpl in points]
        source = template.source_of(cfgs)
    shared = [c for c in set(cfgs) if c.split_k > 1 and cfgs.count(c) > 1]
    assert shared, [c.name() for c in cfgs]
    for c in shared:
        assert source.count(f'__device__ float hidet_mm_workspace_{c.name()}[') == 1


def test_dispatch_serves_ranges_without_tma():
    """A range's kernel runs at any m of the range: a TMA config tuned at one m (tensor maps need static sizes)
    gives its tiles to the range's kernel, copied by cp.async."""
    from dataclasses import replace

    task = _linear_residual().nodes[0].task
    with hidet.option.context(cuda_arch='sm_90'):
        template = find_matmul_template(task, 'cuda')
        cfgs = [tpl.default() for _, _, tpl in template.points(task, 'cuda')]
        tma = [replace(c, tma=True) if c.wgmma else c for c in cfgs]
        assert any(c.tma for c in tma)
        source = template.source_of(tma)
        assert source == template.source_of(cfgs) and 'tma_load' not in source


def test_flattened_rows_reshaped_back_get_the_dispatch():
    (node,) = _flattened_linear().nodes
    assert isinstance(find_matmul_template(node.task, 'cuda', 'sm_90'), SymbolicMmaTemplate)
    with hidet.option.context(cuda_arch='sm_90'):
        kernels = task_sources([(node.task, 'cuda')], 0)[0].split("// the auto-scheduler's kernels")[0]
    assert '% sym_seq' not in kernels and '/ sym_seq' not in kernels


def test_run_time_divisors_use_fast_division_computed_at_launch():
    """A division by a symbolic size in a CUDA kernel is a FastDivmod parameter (magic numbers computed by
    the launch on the host), in template kernels and in the auto-scheduler's alike; static divisors and
    CPU kernels keep plain division."""
    (node,) = _heads_merged_linear().nodes
    with hidet.option.context(cuda_arch='sm_90'):
        source = task_sources([(node.task, 'cuda')], 0)[0]
    template, generic = source.split("// the auto-scheduler's kernels")
    for part in (template, generic):
        assert 'fdm_0.div(' in part and 'fdm_0.mod(' in part and 'hidet::FastDivmod(sym_seq)' in part
        assert '/ sym_seq' not in part and '% sym_seq' not in part
    assert 'const hidet::FastDivmod fdm_0' in template
    (cpu_node,) = _heads_merged_linear('cpu').nodes
    assert 'FastDivmod' not in task_sources([(cpu_node.task, 'cpu')], 0)[0]


@pytest.mark.parametrize('flatten', [False, True])
@pytest.mark.parametrize('symbolic', [True, False])
def test_heads_merged_rows_are_gathered_16_bytes_at_a_time(symbolic, flatten):
    """k = head * dim + d: each 8 consecutive k (d % 8 == 0) are 8 consecutive elements of one head's row, so
    the operand is copied in 16-byte chunks from a computed address (not element by element), whether the
    rows are (batch, seq) axes or one flattened axis m read at (m / seq, m % seq)."""
    from hidet.kernels.matmul.spec import match_gemm

    graph = _heads_merged_linear(flatten=flatten) if symbolic else _heads_merged_linear(batch=2, seq=77,
                                                                                       flatten=flatten)
    spec = match_gemm(graph.nodes[0].task)
    assert spec.a.mode == 'gather' and spec.b.mode == 'direct'
    # head_dim 4: a chunk of 8 k spans two heads, not contiguous; the GEMM would read them element by element,
    # so the permute runs in a kernel of its own and the GEMM copies its output
    narrow = _heads_merged_linear(heads=32, dim=4, batch=2, seq=77)
    assert len(narrow.nodes) == 2 and match_gemm(narrow.nodes[1].task).a.mode == 'direct'


def test_symbolic_sources_compile_with_nvcc():
    from hidet.backend.compiler import CompilerNotFoundError, find_nvcc

    try:
        find_nvcc()
    except CompilerNotFoundError:
        pytest.skip('nvcc not found')
    from hidet.backend.cache import build_libraries

    q = hidet.symbol(['batch', 4, 'seq', 32], 'float16', 'cuda')
    attention = ops.scaled_dot_product_attention(q, q, q, is_causal=True).trace[0].task
    tasks = [_linear_residual().nodes[0].task, attention, _heads_merged_linear().nodes[0].task]
    with hidet.option.context(cuda_arch=None if hidet.cuda.available() else 'sm_90'):
        sources = task_sources([(t, 'cuda') for t in tasks], 0)
        assert 'sym_seq' in sources[1] and 'FastDivmod' in sources[2]
        paths = build_libraries([(s, 'cuda', 'symbolic-template-test') for s in sources])
    assert len(paths) == 3


# ---------------------------------------------------------------------------------------------- on the GPU
@pytest.mark.cuda
@pytest.mark.parametrize('space', [0, 1])
def test_dispatch_matches_torch_in_every_range(space):
    graph = _linear_residual()
    compiled = graph.build(space=space)
    g = torch.Generator(device='cuda').manual_seed(0)
    w = torch.randn(64, 96, device='cuda', generator=g).half() * 0.2
    bias = torch.randn(96, device='cuda', generator=g).half()
    for batch, seq in [(1, 1), (1, 20), (4, 25), (3, 233), (1, 2048), (3, 1500)]:  # m: every range, both sides
        x = torch.randn(batch, seq, 64, device='cuda', generator=g).half()
        res = torch.randn(batch, seq, 96, device='cuda', generator=g).half()
        (out,) = compiled.run([x, w, bias, res])
        expected = torch.relu((x.float() @ w.float()).half().float() + bias.float()) + res.float()
        torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
def test_flattened_linear_matches_torch():
    compiled = _flattened_linear().build()
    w = torch.randn(64, 48, device='cuda').half() * 0.2
    bias = torch.randn(48, device='cuda').half()
    for batch, seq in [(1, 3), (4, 40), (3, 700)]:
        x = torch.randn(batch, seq, 64, device='cuda').half()
        (out,) = compiled.run([x, w, bias])
        expected = (x * 2.0 + 1.0).float().reshape(-1, 64) @ w.float() + bias.float()
        torch.testing.assert_close(out.float(), expected.reshape(batch, seq, 48), rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
@pytest.mark.parametrize('flatten', [False, True])
@pytest.mark.parametrize('symbolic', [True, False])
def test_heads_merged_linear_matches_torch(symbolic, flatten):
    """The gathered rows (fast division by the run-time sequence length where it is symbolic), in the template
    (aligned) and in the auto-scheduler's fallback (a misaligned view of x), at lengths that are not powers of
    two."""
    if not symbolic:
        compiled = _heads_merged_linear(batch=3, seq=77, flatten=flatten).build()
        x = torch.randn(3, 4, 77, 32, device='cuda').half()
        w, bias = torch.randn(128, 48, device='cuda').half() * 0.2, torch.randn(48, device='cuda').half()
        (out,) = compiled.run([x, w, bias])
        expected = x.float().permute(0, 2, 1, 3).reshape(3, 77, 128) @ w.float() + bias.float()
        torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=2e-2)
        return
    compiled = _heads_merged_linear(flatten=flatten).build()
    w = torch.randn(128, 48, device='cuda').half() * 0.2
    bias = torch.randn(48, device='cuda').half()
    for batch, seq in [(1, 1), (2, 7), (3, 77), (16, 384), (2, 1000)]:
        x = torch.randn(batch, 4, seq, 32, device='cuda').half()
        expected = x.float().permute(0, 2, 1, 3).reshape(batch, seq, 128) @ w.float() + bias.float()
        (out,) = compiled.run([x, w, bias])
        torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=2e-2)
        shifted = torch.randn(x.numel() + 1, device='cuda').half()[1:].view_as(x).copy_(x)
        (out,) = compiled.run([shifted, w, bias])
        torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
def test_auto_scheduled_transpose_divides_by_symbols_exactly():
    x = hidet.symbol(['a', 'b', 'c'], 'float32', 'cuda')
    compiled = hidet.trace_from([ops.permute(x, [2, 0, 1]) * 2.0], [x]).build()
    for shape in [(1, 1, 1), (3, 5, 7), (17, 384, 3), (2, 1, 1023)]:
        t = torch.randn(*shape, device='cuda')
        (out,) = compiled.run([t])
        torch.testing.assert_close(out, t.permute(2, 0, 1) * 2.0)


@pytest.mark.cuda
@pytest.mark.parametrize('causal', [False, True])
def test_symbolic_attention_matches_torch(causal):
    q = hidet.symbol(['batch', 4, 'seq', 32], 'float16', 'cuda')
    k = hidet.symbol(['batch', 4, 'seq', 32], 'float16', 'cuda')
    v = hidet.symbol(['batch', 4, 'seq', 32], 'float16', 'cuda')
    graph = hidet.trace_from([ops.scaled_dot_product_attention(q, k, v, is_causal=causal)], [q, k, v])
    compiled = hidet.graph.optimize(graph).build()
    for batch, seq in [(1, 3), (2, 77), (5, 300)]:
        qkv = [torch.randn(batch, 4, seq, 32, device='cuda').half() for _ in range(3)]
        (out,) = compiled.run(qkv)
        expected = torch.nn.functional.scaled_dot_product_attention(*[t.float() for t in qkv], is_causal=causal)
        torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
def test_symbolic_swiglu_mlp_matches_torch():
    """A SwiGLU MLP over [batch, seq, 256] (gate and up merged, interleaved, the gating in the merged GEMM's
    paired epilogue, served by the dispatch over ranges of m) at several row counts, with non-default weights."""
    torch.manual_seed(0)
    wg, wu, wd = (torch.randn(*s, device='cuda').half() / 16 for s in ((256, 512), (256, 512), (512, 256)))
    x = hidet.symbol(['batch', 'seq', 256], 'float16', 'cuda')
    gate, up = x @ hidet.from_torch(wg), x @ hidet.from_torch(wu)
    graph = hidet.graph.optimize(hidet.trace_from([(ops.silu(gate) * up) @ hidet.from_torch(wd)], [x]))
    assert len(graph.nodes) == 2  # the paired GEMM, then the down projection
    compiled = graph.build()
    for batch, seq in [(1, 1), (2, 37), (3, 200)]:
        t = torch.randn(batch, seq, 256, device='cuda').half()
        (out,) = compiled.run([t])
        f = t.float()
        expected = (torch.nn.functional.silu(f @ wg.float()) * (f @ wu.float())) @ wd.float()
        torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=2e-2)
