"""Symbolic dimensions in the IR (issue 10): a task whose shapes name ``hidet.ir.expr.SymbolVar``
dimensions compiles once (CPU, and CUDA through the `cuda` twins) and runs at any size, the values coming through the kernel ABI's
``dims`` (ordered by symbol name). Elementwise with broadcasting, reductions over a symbolic axis, a
matmul with symbolic rows and depth, against torch at several sizes of one compiled library."""
import json

import pytest
import torch

import hidet
from hidet.backend.cache import build_libraries
from hidet.backend.codegen import generate
from hidet.ir.compute import compute, reduce, tensor_input
from hidet.ir.expr import SymbolVar, symbol_var
from hidet.ir.schedulers import schedule_task
from hidet.ir.task import Task
from hidet.runtime.compiled_module import CompiledModule

H = hidet.from_torch


def _library(task: Task, device: str = 'cpu'):
    target = 'cuda' if device == 'cuda' else 'cpu'
    source = generate(schedule_task(task, target))
    return CompiledModule(build_libraries([(source, target, task.name)])[0])['launch']


def test_elementwise_with_broadcast_runs_at_every_size(device):
    b, s = symbol_var('batch'), symbol_var('seq')
    x = tensor_input('x', 'float32', [b, s, 8])
    bias = tensor_input('bias', 'float32', [8])
    y = compute('y', [b, s, 8], lambda i, j, k: x[i, j, k] * 2.0 + bias[k])
    task = Task('scale_bias', [x, bias], [y])
    assert task.symbols() == ['batch', 'seq']
    assert '$batch' in task.text() and '$seq' in task.text()
    launch = _library(task, device)
    bias_t = torch.randn(8, device=device)
    for batch, seq in [(1, 1), (3, 5), (2, 17), (0, 4)]:
        xt = torch.randn(batch, seq, 8, device=device)
        out = torch.empty(batch, seq, 8, device=device)
        launch(H(xt), H(bias_t), H(out), dims=[batch, seq])
        torch.testing.assert_close(out, xt * 2 + bias_t)


@pytest.mark.parametrize('kind', ['sum', 'mean', 'max'])
def test_reduction_over_a_symbolic_axis(kind, device):
    n = symbol_var('n')
    x = tensor_input('x', 'float32', [4, n])
    y = compute('y', [4], lambda i: reduce([n], lambda j: x[i, j], kind))
    launch = _library(Task(f'row_{kind}', [x], [y]), device)
    for size in (1, 7, 100, 1000):
        xt = torch.randn(4, size, device=device)
        out = torch.empty(4, device=device)
        launch(H(xt), H(out), dims=[size])
        expected = {'sum': xt.sum(1), 'mean': xt.mean(1), 'max': xt.amax(1)}[kind]
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_matmul_with_symbolic_rows_and_depth(device):
    m, k = symbol_var('m'), symbol_var('k')
    a = tensor_input('a', 'float32', [m, k])
    w = tensor_input('w', 'float32', [k, 6])
    c = compute('c', [m, 6], lambda i, j: reduce([k], lambda kk: a[i, kk] * w[kk, j], 'sum'))
    launch = _library(Task('matmul_mk', [a, w], [c]), device)
    for rows, depth in [(1, 3), (9, 16), (33, 5)]:
        at, wt = torch.randn(rows, depth, device=device), torch.randn(depth, 6, device=device)
        out = torch.empty(rows, 6, device=device)
        launch(H(at), H(wt), H(out), dims=[depth, rows])  # by name: k, then m
        torch.testing.assert_close(out, at @ wt, rtol=1e-5, atol=1e-5)


def test_shape_arithmetic_on_symbols():
    """A dimension may be an expression of symbols: concatenating two [n] vectors gives [2n]."""
    n = symbol_var('n')
    x = tensor_input('x', 'float32', [n])
    from hidet.ir.expr import binary, select

    y = compute('y', [n * 2], lambda i: select(binary('<', i, n), x[i % n], -x[i % n]))
    launch = _library(Task('mirror', [x], [y]))
    xt = torch.randn(5)
    out = torch.empty(10)
    launch(H(xt), H(out), dims=[5])
    torch.testing.assert_close(out, torch.cat([xt, -xt]))


def test_the_library_declares_its_kernel():
    """The launch entry is declared with the task's signature (kernel ABI: hidet_signature_launch): each buffer's
    dtype and shape over the task's symbols, and the symbols in the order of the ABI's dims. A graph's loader
    checks every instruction's tensors against it."""
    n = symbol_var('n')
    x = tensor_input('x', 'float16', [n, 4])
    task = Task('double_rows', [x], [compute('y', [n * 2, 4], lambda i, j: x[i % n, j])])
    assert json.loads(task.signature()) == {
        'buffers': [{'dtype': 'float16', 'shape': ['n', 4]}, {'dtype': 'float16', 'shape': [['n', 2, '*'], 4]}],
        'dims': ['n']}
    source = generate(schedule_task(task, 'cpu'))
    assert 'HIDET_KERNEL_SIGNATURE(launch, "{\\"buffers\\":[' in source
    module = CompiledModule(build_libraries([(source, 'cpu', task.name)])[0])
    assert 'launch' in module and module['launch'].signature == json.loads(task.signature())


def test_wrong_dims_are_errors_naming_the_symbols():
    n = symbol_var('n')
    x = tensor_input('x', 'float32', [n])
    launch = _library(Task('neg_n', [x], [compute('y', [n], lambda i: -x[i])]))
    xt, out = torch.randn(3), torch.empty(3)
    with pytest.raises(RuntimeError, match=r'expected 1 dimension values \(n\), got 0'):
        launch(H(xt), H(out))
    with pytest.raises(RuntimeError, match='dimension n is negative'):
        launch(H(xt), H(out), dims=[-1])


def test_symbols_are_identified_by_name_and_must_be_identifiers():
    assert SymbolVar('batch').name == 'batch'
    with pytest.raises(ValueError, match='identifier'):
        symbol_var('not a name')
    a = Task('t', [x := tensor_input('x', 'float32', [symbol_var('a'), symbol_var('b')])],
             [compute('y', x.shape, lambda i, j: x[i, j])])
    b = Task('t', [y := tensor_input('x', 'float32', [symbol_var('b'), symbol_var('a')])],
             [compute('y', y.shape, lambda i, j: y[i, j])])
    assert a.key() != b.key()  # the same text up to names would bind dims differently


def test_cuda_kernels_with_symbols_take_their_grid_from_the_dims():
    """CUDA sources (generated here; run by the `cuda` twins above): the kernels take the symbols'
    values, and the launch entry computes each grid from them."""
    n = symbol_var('n')
    x = tensor_input('x', 'float32', [4, n])
    neg = generate(schedule_task(Task('neg_cuda', [x], [compute('y', [4, n], lambda i, j: -x[i, j])]), 'cuda'))
    assert 'int64_t sym_n' in neg and 'const int64_t sym_n = dims[0];' in neg
    launch = 'hidet::launch(neg_cuda_k0, dim3(hidet::max<int64_t>(hidet::min<int64_t>('
    assert launch in neg and 'sym_n' in neg.split(launch)[1].split(';')[0]
    row = generate(schedule_task(Task('rowsum_cuda', [x], [compute('y', [4], lambda i: reduce([n], lambda j: x[i, j],
                                                                                              'sum'))]), 'cuda'))
    assert 'hidet::block_reduce_sum' in row and '< sym_n' in row


def _layer_norm_center_and_head_split():
    """Two kernels of a transformer at symbolic batch and sequence length: x - mean (a row broadcast) and
    the key heads of a fused QKV projection, [b, s, 3 * 64] → [b, 4, s, 16] (a permute)."""
    b, s = symbol_var('batch'), symbol_var('seq')
    x = tensor_input('x', 'float16', [b, s, 64])
    mean = tensor_input('mean', 'float16', [b, s, 1])
    center = Task('center', [x, mean], [compute('y', [b, s, 64], lambda i, j, k: x[i, j, k] - mean[i, j, 0])])
    qkv = tensor_input('qkv', 'float16', [b, s, 192])
    heads = Task('heads', [qkv], [compute('y', [b, 4, s, 16], lambda i, h, j, d: qkv[i, j, 64 + h * 16 + d])])
    return center, heads


def test_symbolic_injective_kernels_are_vectorized():
    """A static innermost extent lets a symbolic injective kernel copy 16 bytes at a time (the scalar kernel
    stays as the fallback for unaligned buffers); an index unflattened by a symbolic size divides through a
    FastDivmod, and one unflattened and flattened back is not divided at all."""
    center, heads = (generate(schedule_task(t, 'cuda')) for t in _layer_norm_center_and_head_split())
    for source, name in ((center, 'center'), (heads, 'heads')):
        assert f'{name}_k0_scalar' in source and 'hidet::copy_vector<16>' in source
    assert 'copy_vector<16>(x0_vec_' in center and 'in0 + n0_' in center  # x read at the output's own index
    assert 'FastDivmod' not in center
    assert 'fdm_0.div(' in heads and 'hidet::FastDivmod(sym_seq)' in heads and '/ sym_seq' not in heads


@pytest.mark.cuda
def test_symbolic_vectorized_kernels_match_torch_aligned_or_not():
    center, heads = (_library(t, 'cuda') for t in _layer_norm_center_and_head_split())
    for batch, seq in [(1, 1), (2, 7), (3, 384), (0, 5)]:
        x = torch.randn(batch, seq, 64, device='cuda').half()
        mean = torch.randn(batch, seq, 1, device='cuda').half()
        qkv = torch.randn(batch, seq, 192, device='cuda').half()
        shifted = torch.empty(qkv.numel() + 1, device='cuda').half()[1:].view_as(qkv).copy_(qkv)  # unaligned
        out = torch.empty(batch, seq, 64, device='cuda').half()
        center(H(x), H(mean), H(out), dims=[batch, seq])
        torch.testing.assert_close(out, x - mean)
        expected = qkv[:, :, 64:128].reshape(batch, seq, 4, 16).permute(0, 2, 1, 3)
        for source in (qkv, shifted):
            out = torch.empty(batch, 4, seq, 16, device='cuda').half()
            heads(H(source), H(out), dims=[batch, seq])
            torch.testing.assert_close(out, expected)


# ---------------------------------------------------------------- graphs of symbolic tensors (run node by node)
def _graph():
    from hidet.graph import ops

    x = hidet.symbol(['batch', 'seq', 8])
    w = hidet.asarray(torch.randn(8, 4, generator=torch.Generator().manual_seed(0)).numpy())
    b = hidet.symbol([4])
    y = ops.sum(ops.relu(ops.add(ops.matmul(x, w), b)), 1)
    return hidet.trace_from(y, [x, b]), w.torch()


def test_symbolic_graph_runs_at_every_size_without_recompiling():
    from hidet.drivers.build_task import _LoadedModules

    graph, w = _graph()
    assert graph.symbols() == ['batch', 'seq']
    assert 'float32[$batch, $seq, 4]' in str(graph)
    bias = torch.randn(4)
    loaded = None
    for batch, seq in [(1, 3), (4, 7), (2, 1), (3, 16)]:
        x = torch.randn(batch, seq, 8)
        out = graph(H(x), H(bias)).torch()
        torch.testing.assert_close(out, torch.relu(x @ w + bias).sum(1), rtol=1e-5, atol=1e-5)
        if loaded is None:
            loaded = len(_LoadedModules.modules)
        assert len(_LoadedModules.modules) == loaded  # the same kernels at every size


def test_symbolic_graph_input_errors_and_build():
    graph, w = _graph()
    with pytest.raises(ValueError, match='dimension 0 is 5, expected 4'):
        graph(H(torch.randn(2, 3, 8)), H(torch.randn(5)))
    with pytest.raises(ValueError, match='expected 3 dimensions'):
        graph(H(torch.randn(2, 8)), H(torch.randn(4)))
    compiled = graph.build()  # one artifact for every (batch, seq): tests/graph/test_symbolic_build.py
    assert compiled.symbols == ['batch', 'seq']
    bias = torch.randn(4)
    for batch, seq in [(2, 5), (3, 1)]:
        x = torch.randn(batch, seq, 8)
        torch.testing.assert_close(compiled.run([x, bias])[0], torch.relu(x @ w + bias).sum(1), rtol=1e-5, atol=1e-5)


def test_one_symbol_shared_by_two_inputs_must_agree():
    from hidet.graph import ops

    a, b = hidet.symbol(['n', 3]), hidet.symbol(['n', 3])
    graph = hidet.trace_from(ops.add(a, b), [a, b])
    x = torch.randn(5, 3)
    torch.testing.assert_close(graph(H(x), H(x)).torch(), x + x)
    with pytest.raises(ValueError, match='dimension 0 is 4, expected'):
        graph(H(x), H(torch.randn(4, 3)))


def test_optimized_symbolic_graph_is_fused_and_runs_at_every_size():
    from hidet.graph import ops

    x, b = hidet.symbol(['batch', 'seq', 8]), hidet.symbol([4])
    w = hidet.asarray(torch.randn(8, 4, generator=torch.Generator().manual_seed(1)).numpy())
    h = ops.relu(ops.add(ops.matmul(x, w), b))
    y = ops.add(ops.sum(h, 1), ops.mean(ops.softmax(h, -1), 1))
    graph = hidet.trace_from(y, [x, b])
    optimized = hidet.graph.optimize(graph)
    print(f'{len(graph.nodes)} operators -> {len(optimized.nodes)} kernels')
    assert len(optimized.nodes) < len(graph.nodes)
    assert any(n.name == 'FusedOperator' and 'matmul' in n.task.name for n in optimized.nodes)
    bias = torch.randn(4)
    for batch, seq in [(1, 3), (5, 9)]:
        xt = torch.randn(batch, seq, 8)
        hh = torch.relu(xt @ w.torch() + bias)
        torch.testing.assert_close(optimized(H(xt), H(bias)).torch(), hh.sum(1) + torch.softmax(hh, -1).mean(1),
                                   rtol=1e-5, atol=1e-5)


def test_reshapes_of_symbolic_shapes():
    """reshape/flatten with symbolic dimensions: element counts compared as products of symbols, -1
    inferred as one (batch * seq); a reshape back from [batch * seq, ...] takes its symbols from the graph's
    inputs. Node by node and built, at several sizes."""
    from hidet.graph import ops

    x = hidet.symbol(['batch', 'seq', 12])
    rows = ops.reshape(x, [-1, 3, 4])
    back = ops.reshape(ops.permute(rows, [0, 2, 1]), [x.shape[0], -1, 12])
    split = ops.reshape(x, [x.shape[0], x.shape[1], 2, 6])
    flat = ops.flatten(x, 1)
    assert str(rows.shape[0]) == str(x.shape[0] * x.shape[1]) and back.shape[1] is x.shape[1]
    graph = hidet.trace_from([rows, back, split, flat], [x])

    def expected(a):
        b = a.shape[0]
        return [a.reshape(-1, 3, 4), a.reshape(-1, 3, 4).permute(0, 2, 1).reshape(b, -1, 12), a.reshape(b, -1, 2, 6),
                a.flatten(1)]

    compiled = graph.build()
    for batch, seq in [(3, 5), (1, 1), (2, 7)]:
        a = torch.randn(batch, seq, 12)
        for out, exp in zip(graph(H(a)), expected(a)):
            torch.testing.assert_close(out.torch(), exp)
        for out, exp in zip(compiled.run([a]), expected(a)):
            torch.testing.assert_close(out, exp)
    with pytest.raises(ValueError, match='the other dimensions do not divide the element count'):
        ops.reshape(x, [-1, 5])
    with pytest.raises(ValueError, match='the element counts differ'):
        ops.reshape(x, [x.shape[0], 12])


def test_concat_along_a_symbolic_axis():
    """Offsets along a symbolic axis are expressions: [a, 4] ++ [b, 4] ++ [3, 4] is [a + b + 3, 4]."""
    from hidet.graph import ops

    x, y, z = hidet.symbol(['a', 4]), hidet.symbol(['b', 4]), hidet.symbol([3, 4])
    out = ops.concat([x, y, z], axis=0)
    graph = hidet.trace_from([out, ops.concat([x, x], axis=1)], [x, y, z])
    compiled = graph.build()
    for a, b in [(1, 2), (5, 0), (3, 7)]:
        xt, yt, zt = torch.randn(a, 4), torch.randn(b, 4), torch.randn(3, 4)
        expected = [torch.cat([xt, yt, zt]), torch.cat([xt, xt], 1)]
        for got in (graph(H(xt), H(yt), H(zt)), compiled.run([xt, yt, zt])):
            for g, e in zip(got, expected):
                torch.testing.assert_close(g.torch() if isinstance(g, hidet.Tensor) else g, e)
