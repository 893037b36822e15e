"""Building graphs with symbolic dimensions (issue 10): one artifact (format version 2) whose kernels
take the symbols' values at run time; the C++ executor reads them from the inputs' shapes, plans its
arena per set of values, and runs at any batch size — from Python and from the C++ example."""
import json
import os
import subprocess

import numpy as np
import pytest
import torch

import hidet
from hidet import ops
from hidet.runtime import artifact


def _mlp_graph(device='cpu'):
    g = torch.Generator().manual_seed(0)
    w1, b1 = torch.randn(16, 32, generator=g) * 0.2, torch.randn(32, generator=g)
    w2 = torch.randn(32, 8, generator=g) * 0.2
    x = hidet.symbol(['batch', 16], dtype='float32', device=device)
    h = ops.gelu(ops.matmul(x, hidet.from_torch(w1.to(device))) + hidet.from_torch(b1.to(device)))
    y = ops.matmul(h, hidet.from_torch(w2.to(device)))
    graph = hidet.trace_from([ops.softmax(y, axis=-1), ops.transpose(y, 0, 1), ops.sum(y, dims=[0])], [x])

    def reference(a):
        yy = torch.nn.functional.gelu(a @ w1 + b1) @ w2
        return [torch.softmax(yy, -1), yy.t(), yy.sum(0)]

    return hidet.graph.optimize(graph), reference


def test_symbolic_graph_builds_once_and_runs_at_every_batch_size():
    graph, reference = _mlp_graph()
    compiled = graph.build()
    manifest = compiled.manifest
    assert manifest['format_version'] == artifact.SYMBOLIC_FORMAT_VERSION and manifest['symbols'] == ['batch']
    assert compiled.symbols == ['batch'] and compiled._graph.symbols == ['batch']
    assert manifest['arena_nbytes'] == 0  # planned by the executor for each batch size
    assert any(inst.get('dims') == [0] for inst in manifest['instructions'])
    assert repr(compiled.inputs[0]) == 'x: float32[batch, 16]'
    for batch in (3, 1, 64, 7, 64):  # larger, smaller and repeated sizes: the arena grows and plans are reused
        a = torch.randn(batch, 16)
        outs = compiled.run([a])
        for out, exp in zip(outs, reference(a)):
            assert tuple(out.shape) == tuple(exp.shape)
            torch.testing.assert_close(out, exp, rtol=1e-4, atol=1e-4)
        node_by_node = graph(hidet.from_torch(a))  # the same graph run operator by operator
        torch.testing.assert_close(outs[0], node_by_node[0].torch(), rtol=1e-5, atol=1e-5)
    # hidet tensors in, hidet tensors out
    out = compiled(hidet.from_torch(torch.randn(5, 16)))
    assert [tuple(o.shape) for o in out] == [(5, 8), (8, 5), (8,)]


@pytest.mark.cuda
def test_symbolic_graph_on_cuda():
    """The same graph on the GPU: kernels whose grids come from the dims, run at several batch sizes."""
    graph, reference = _mlp_graph('cuda')
    compiled = graph.build()
    for batch in (2, 33, 1):
        a = torch.randn(batch, 16, device='cuda')
        for out, exp in zip(compiled.run([a]), reference(a.cpu())):
            torch.testing.assert_close(out.cpu(), exp, rtol=1e-4, atol=1e-4)


def test_symbolic_artifact_round_trip_and_errors(tmp_path):
    graph, reference = _mlp_graph()
    path = str(tmp_path / 'mlp.hidet')
    graph.build().save(path)
    loaded = hidet.load_compiled_graph(path)
    a = torch.randn(11, 16)
    torch.testing.assert_close(loaded.run([a])[0], reference(a)[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r'input 0 \(x\): expected float32\[11, 16\] \(at batch=11\) on cpu, got '
                                         r'float32\[11, 15\]'):
        loaded.run([torch.randn(11, 15)])
    with pytest.raises(RuntimeError, match='symbolic dimension'):
        loaded._graph.run([a.data_ptr()], [0, 0, 0])  # raw buffers without the symbols' values
    with pytest.raises(RuntimeError, match="symbol 'batch' = -1 is negative"):
        loaded._graph.run([a.data_ptr()], [0, 0, 0], 0, [-1])


def test_shape_expressions_in_the_manifest(tmp_path):
    """A dimension stored as a postfix expression of symbols is evaluated by the executor (and by
    CompiledGraph): the transposed output's [8, batch] written as [8, batch * 3 / 3]."""
    graph, reference = _mlp_graph()
    entries = artifact.read(open_bytes(graph.build()), '<test>')
    manifest = json.loads(entries['manifest.json'])
    out_tensor = manifest['outputs'][1]['tensor']
    assert manifest['tensors'][out_tensor]['shape'] == [8, 'batch']
    manifest['tensors'][out_tensor]['shape'] = [8, ['batch', 3, '*', 3, '/']]
    entries['manifest.json'] = json.dumps(manifest).encode()
    compiled = hidet.runtime.compiled_graph.CompiledGraph(artifact.write(list(entries.items())))
    a = torch.randn(6, 16)
    out = compiled.run([a])[1]
    assert tuple(out.shape) == (8, 6)
    torch.testing.assert_close(out, reference(a)[1], rtol=1e-4, atol=1e-4)
    assert 'batch * 3' in repr(compiled.outputs[1]).replace('(', '').replace(')', '')
    assert artifact.eval_dim(['batch', 7, '-', 2, '/'], {'batch': 2}) == -2  # C truncation, like the executor
    assert artifact.eval_dim(['batch', 7, '-', 2, '%'], {'batch': 2}) == -1

    manifest['tensors'][out_tensor]['shape'] = [8, ['batch', '*']]
    entries['manifest.json'] = json.dumps(manifest).encode()
    with pytest.raises(RuntimeError, match=r"shape\[1\]\[1\]: operator '\*' lacks an operand"):
        hidet.runtime.compiled_graph.CompiledGraph(artifact.write(list(entries.items())))
    manifest['tensors'][out_tensor]['shape'] = [8, 'seq']
    entries['manifest.json'] = json.dumps(manifest).encode()
    with pytest.raises(RuntimeError, match="unknown symbol 'seq'"):
        hidet.runtime.compiled_graph.CompiledGraph(artifact.write(list(entries.items())))


def open_bytes(compiled) -> bytes:
    return bytes(compiled.artifact_bytes())


def test_symbolic_artifact_served_from_cpp_at_two_batch_sizes(examples_build, tmp_path):
    """The C++ example runs one artifact with a symbolic batch at batch 2 and batch 5 and checks both
    against torch (run_model --dim batch=N --inputs DIR)."""
    graph, reference = _mlp_graph()
    path = str(tmp_path / 'mlp.hidet')
    graph.build().save(path)
    run_model = os.path.join(examples_build, 'run_model')
    for batch in (2, 5):
        folder = tmp_path / f'batch{batch}'
        folder.mkdir()
        a = torch.randn(batch, 16)
        a.numpy().tofile(folder / 'input_0.bin')
        for i, out in enumerate(reference(a)):
            out.contiguous().numpy().tofile(folder / f'output_{i}.bin')
        run = subprocess.run([run_model, path, '--dim', f'batch={batch}', '--inputs', str(folder), '--repeat', '3'],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        assert f'at batch={batch}' in run.stdout and f'float32[{batch}, 16]' in run.stdout
        assert f'float32[8, {batch}]: max abs error' in run.stdout and 'all outputs match' in run.stdout
    run = subprocess.run([run_model, path, '--random'], capture_output=True, text=True)
    assert run.returncode != 0 and 'give each a value with --dim batch=N' in run.stderr
    run = subprocess.run([run_model, path, '--random', '--dim', 'batch=2', '--dim', 'seq=3'], capture_output=True,
                         text=True)
    assert run.returncode != 0 and '--dim seq: the graph has no symbolic dimension of that name' in run.stderr


def _positions_graph(device):
    """arange / full of a symbolic length, slices to it, broadcast to it: a transformer's position ids."""
    x = hidet.symbol(['batch', 'seq', 4], dtype='float32', device=device)
    table = hidet.from_torch(torch.randn(64, 4, generator=torch.Generator().manual_seed(1)).to(device))
    seq = x.shape[1]
    pos = ops.arange(0, seq, device=device)                                  # [seq]
    emb = ops.take(table, pos, 0)                                            # [seq, 4]
    window = table[:seq]                                                     # a slice to a symbolic length
    ones = ops.full([seq, 4], 0.5, 'float32', device)
    shifted = x[:, 1:] - x[:, :-1]                                           # [batch, seq - 1, 4]
    y = x + emb + window * ones
    graph = hidet.trace_from([y, ops.broadcast(ops.sum(shifted, dims=[1]), [x.shape[0], 4])], [x])

    def reference(a):
        t = table.torch()
        s = a.shape[1]
        return [a + t[:s] + t[:s] * 0.5, (a[:, 1:] - a[:, :-1]).sum(1)]

    return graph, reference


def test_creation_and_slices_of_symbolic_sizes(device):
    graph, reference = _positions_graph(device)
    compiled = hidet.graph.optimize(graph).build()
    for batch, seq in [(2, 5), (3, 17), (1, 2)]:
        a = torch.randn(batch, seq, 4, device=device)
        outs = compiled.run([a])
        for got, want in zip(outs, reference(a)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
def test_cuda_graphs_one_per_shape_least_recently_used_dropped():
    graph, reference = _mlp_graph('cuda')
    compiled = graph.build()
    graphs = compiled.cuda_graph(max_shapes=2)
    for i, batch in enumerate([2, 5, 2, 7, 5, 5]):
        a = torch.randn(batch, 16, device='cuda')
        for out, exp in zip(graphs.run([a]), reference(a.cpu())):
            torch.testing.assert_close(out.cpu(), exp, rtol=1e-4, atol=1e-4)
    # 2, 5 captured; 2 replayed; 7 captured (5 dropped: least recently used); 5 captured again, replayed
    assert graphs.captures == 4
    assert graphs.shapes == [{'batch': 7}, {'batch': 5}]
    with pytest.raises(ValueError, match='max_shapes'):
        compiled.cuda_graph(max_shapes=0)
