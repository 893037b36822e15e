"""FlowGraph: tracing from symbolic tensors, printing, running node by node, building and
saving. Small CNN and transformer block give the same results on every path (and as torch)."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import hidet
from hidet import ops

from .small_models import cnn_hidet, cnn_torch, cnn_weights, transformer_hidet, transformer_torch, \
    transformer_weights


def _close(actual, expected, tol=1e-4):
    a = actual.torch().cpu() if isinstance(actual, hidet.Tensor) else actual.cpu()
    np.testing.assert_allclose(a.numpy(), expected.cpu().numpy(), rtol=tol, atol=tol)


def test_trace_and_print():
    x = hidet.symbol([2, 3])
    c = hidet.randn([3, 4])
    d = hidet.randn([4])
    y = ops.matmul(x, c) + d
    assert y.is_symbolic() and y.trace is not None
    graph = hidet.trace_from(y, inputs=[x])
    text = str(graph)
    assert 'x: float32[2, 3][cpu]' in text
    assert 'y1: float32[2, 4][cpu] = Matmul(x, c1)' in text
    assert '= Add(y1, c2)' in text and 'return y2' in text
    assert len(graph.nodes) == 2 and graph.constants == [c, d]
    assert hidet.trace_from(y).inputs == [x]  # found when omitted


def test_trace_errors():
    x, z = hidet.symbol([2]), hidet.symbol([2])
    with pytest.raises(ValueError, match='not among its inputs'):
        hidet.trace_from(x + z, inputs=[x])
    with pytest.raises(ValueError, match='must be symbolic'):
        hidet.trace_from(x + 1, inputs=[hidet.randn([2])])
    graph = hidet.trace_from(x * 2, [x])
    with pytest.raises(ValueError, match=r'expected .*float32.*got .*\(3,\)'):
        graph(hidet.randn([3]))
    with pytest.raises(ValueError, match='takes 1 input'):
        graph()


def test_call_node_by_node():
    x = hidet.symbol([4, 5])
    graph = hidet.trace_from(ops.softmax(ops.relu(x) * 2.0, axis=-1), [x])
    a = torch.randn(4, 5)
    _close(graph(hidet.from_torch(a)), torch.softmax(torch.relu(a) * 2, -1))


def test_optimize_fuses_matmul_bias():
    x = hidet.symbol([2, 3])
    graph = hidet.trace_from(ops.relu(ops.matmul(x, hidet.randn([3, 4])) + hidet.randn([4])), [x])
    opt = hidet.graph.optimize(graph)
    assert len(graph.nodes) == 3 and len(opt.nodes) == 1
    assert 'Fused[Matmul, Add, Relu]' in str(opt)
    a = hidet.randn([2, 3])
    _close(opt(a), graph(a).torch())


def test_build_run_save_load(tmp_path):
    x = hidet.symbol([2, 3])
    c, d = hidet.randn([3, 4]), hidet.randn([4])
    graph = hidet.graph.optimize(hidet.trace_from(ops.matmul(x, c) + d, [x]))
    compiled = graph.build()
    a = hidet.randn([2, 3])
    expected = (a.torch() @ c.torch()) + d.torch()
    _close(compiled(a), expected)
    _close(compiled(a.torch()), expected)  # torch in, torch out
    assert isinstance(compiled(a.torch()), torch.Tensor)
    path = tmp_path / 'g.hidet'
    compiled.save(path)
    _close(hidet.load_compiled_graph(path)(a), expected)


def test_outputs_that_are_inputs_constants_or_repeated():
    x = hidet.symbol([3])
    c = hidet.randn([3])
    y = x + 1
    compiled = hidet.trace_from([y, x, c, y], [x]).build()
    a = hidet.randn([3])
    outs = compiled(a)
    for out, ref in zip(outs, [a.torch() + 1, a.torch(), c.torch(), a.torch() + 1]):
        _close(out, ref)
    assert outs[0].data_ptr() != outs[3].data_ptr()


def test_compiled_graph_input_errors():
    x = hidet.symbol([2, 2])
    compiled = hidet.trace_from(x * 3, [x]).build()
    with pytest.raises(ValueError, match='takes 1 input'):
        compiled()
    with pytest.raises(ValueError, match=r'input 0 \(x\): expected float32\[2, 2\]'):
        compiled(hidet.randn([2, 3]))
    with pytest.raises(ValueError, match='not contiguous'):
        compiled(torch.randn(2, 2).t())
    # torch tensors take a precomputed check (a graph without symbols): the same errors
    with pytest.raises(ValueError, match=r'input 0 \(x\): expected float32\[2, 2\] on cpu, got float64\[2, 2\]'):
        compiled(torch.randn(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r'expected float32\[2, 2\] on cpu, got float32\[2, 3\]'):
        compiled(torch.randn(2, 3))
    a = torch.randn(2, 2)
    out = compiled(a)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.shape == (2, 2)
    torch.testing.assert_close(out, a * 3)


def test_memory_plan_reuses_the_arena():
    x = hidet.symbol([64, 64])
    y = x
    for _ in range(6):  # a chain of unfusable reductions keeps intermediates alive one at a time
        y = ops.softmax(y, axis=-1) @ hidet.randn([64, 64])
    graph = hidet.graph.optimize(hidet.trace_from(y, [x]))
    compiled = graph.build()
    one = 64 * 64 * 4
    assert compiled.arena_nbytes <= 4 * one, compiled
    a = torch.randn(64, 64)
    _close(compiled(hidet.from_torch(a)), graph(hidet.from_torch(a)).torch())


@pytest.mark.parametrize('model', ['cnn', 'transformer'])
def test_small_models_on_every_path(model, device, tmp_path):
    torch.manual_seed(0)
    if model == 'cnn':
        w, fh, ft, shape = cnn_weights(device), cnn_hidet, cnn_torch, [2, 3, 8, 8]
    else:
        w, fh, ft, shape = transformer_weights(device), transformer_hidet, transformer_torch, [2, 6, 16]
    x = hidet.symbol(shape, device=device)
    graph = hidet.trace_from(fh(x, w), [x])
    a = torch.randn(*shape, device=device)
    expected = ft(a, w)
    _close(graph(hidet.from_torch(a)), expected)
    opt = hidet.graph.optimize(graph)
    compiled = opt.build()
    print(f'{model}: {len(graph.nodes)} operators -> {len(opt.nodes)} kernels')
    assert len(opt.nodes) < len(graph.nodes)
    _close(compiled(hidet.from_torch(a)), expected)
    path = tmp_path / f'{model}.hidet'
    compiled.save(path)
    np.save(tmp_path / 'a.npy', a.cpu().numpy())
    np.save(tmp_path / 'expected.npy', expected.cpu().numpy())
    script = (f'import hidet, numpy as np, torch\n'
              f'g = hidet.load_compiled_graph({str(path)!r})\n'
              f'a = torch.from_numpy(np.load({str(tmp_path / "a.npy")!r})).to({device!r})\n'
              f'y = g(a).cpu().numpy()\n'
              f'np.testing.assert_allclose(y, np.load({str(tmp_path / "expected.npy")!r}), rtol=1e-4, atol=1e-4)\n')
    subprocess.run([sys.executable, '-c', script], check=True)
    if device == 'cuda':
        cg = compiled.cuda_graph()
        first = cg.run([hidet.from_torch(a)])[0]
        b = torch.randn(*shape, device=device)
        second = cg.run([hidet.from_torch(b)])[0]
        _close(first, expected)  # not overwritten by the second replay
        _close(second, ft(b, w))


def test_outputs_in_one_block_are_views_at_the_layout_offsets():
    """The CPU twin of the next test's allocation: each output a contiguous view of its dtype and shape at its
    offset of the block (several dtypes, an empty and a 0-d output among them)."""
    from hidet.runtime.compiled_graph import _torch_outputs_in_one_block

    shapes = [((3, 5), torch.float16), ((5,), torch.float32), ((0, 4), torch.float16), ((), torch.float32),
              ((3,), torch.float16)]

    class Graph:
        @staticmethod
        def _torch_device():
            return torch.device('cpu')

        @staticmethod
        def _torch_output_shapes(values):
            return shapes

    offsets = [0, 256, 512, 512, 768]
    # 774 bytes, as the layout gives (the last output's end): no multiple of float32's size, as the GPU found
    block, outputs = _torch_outputs_in_one_block(Graph, {}, (offsets, 774))
    assert block.numel() >= 774 and block.dtype == torch.uint8
    for (shape, dtype), o, t in zip(shapes, offsets, outputs):
        assert t.shape == shape and t.dtype == dtype and t.is_contiguous()
        assert t.numel() == 0 or t.data_ptr() == block.data_ptr() + o  # (an empty tensor's data_ptr is 0)
        t.fill_(7)
    assert outputs[0].sum().item() == 7 * 15 and outputs[4].sum().item() == 7 * 3
    assert block[256:276].view(torch.float32).tolist() == [7.0] * 5  # written through the view


@pytest.mark.cuda
def test_cuda_graph_outputs_share_one_allocation_and_stay_apart():
    """Torch outputs of a CUDA-graph replay: views of one allocation laid out as the graph's static outputs
    (one copy out, not one per output), of their own dtypes and shapes; a later replay does not touch them."""
    x = hidet.symbol([3, 5], 'float16', 'cuda')
    outs = [x * 2.0, ops.cast(x, 'float32') + 1.0, ops.sum(x, 1), ops.transpose(x, 0, 1)]
    cg = hidet.trace_from(outs, [x]).build().cuda_graph()

    def expected(t):
        return [t * 2, t.float() + 1, t.sum(1), t.t()]

    a, b = (torch.randn(3, 5, device='cuda').half() for _ in range(2))
    first = cg.run([a])
    second = cg.run([b])
    assert len({t.untyped_storage().data_ptr() for t in first}) == 1  # one allocation
    for got, want in [(first, expected(a)), (second, expected(b))]:
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape and g.is_contiguous()
            torch.testing.assert_close(g, w, rtol=2e-3, atol=2e-3)


@pytest.mark.cuda
@pytest.mark.parametrize('run', ['block', 'separate'])
def test_cuda_graph_large_last_outputs_are_written_after_the_replay(run):
    """The last kernels of a graph that write large outputs alone (8 MiB or more: GPT-2's present keys and values
    at batch 8) run after each replay, into the caller's outputs, instead of into static buffers copied out
    (cuda_graph.cpp: the tail). The outputs of a replay, written directly or copied, are each call's own, whether
    torch's one block (``run``) or the caller's own tensors (the C API's ``copy_outputs``)."""
    x = hidet.symbol([1024, 2048], 'float16', 'cuda')
    hidden = ops.relu(x) + 1.0  # read by the kernels below: the graph's own, not an output
    total = ops.sum(hidden, 1)
    # the sum, returned twice (so copied out of the captured graph's outputs), then one kernel writing 4 + 4 MiB
    # (GPT-2's present copies: one batched kernel), the tail
    outs = [total, total, hidden * 2.0, hidden * 3.0]
    cg = hidet.trace_from(outs, [x]).build().cuda_graph()

    def expected(t):
        h = torch.relu(t.float()) + 1.0
        return [h.sum(1).half(), h.sum(1).half(), (h * 2).half(), (h * 3).half()]

    a, b = (torch.randn(1024, 2048, device='cuda').half() for _ in range(2))
    if run == 'block':
        first, second = cg.run([a]), cg.run([b])
    else:
        first, second = ([torch.full(tuple(o.shape), float('nan'), device='cuda', dtype=torch.float16) for o in outs]
                         for _ in range(2))
        for inputs, outputs in (([a], first), ([b], second)):
            handle = cg._handle
            handle.launch([t.data_ptr() for t in inputs], torch.cuda.current_stream().cuda_stream)
            handle.copy_outputs([t.data_ptr() for t in outputs], torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    for got, want in [(first, expected(a)), (second, expected(b))]:
        for g, w in zip(got, want):
            torch.testing.assert_close(g.float(), w.float(), rtol=2e-2, atol=2e-2)
