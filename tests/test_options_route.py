"""One route for hidet's options (hidet/option.py): an API edge (FlowGraph.build, hidet.graph.optimize,
build_task, the torch backend) resolves them once; everything below takes them as an argument. Here the
current options are made unreadable (or counted) while a graph optimizes, tunes, builds and runs, so a read below
an edge fails the test."""
import pathlib

import numpy as np
import pytest
import torch

import hidet
import hidet.option
from hidet import ops
from hidet.drivers import build_task


@pytest.fixture
def given(tmp_path):
    """Options that differ from the current ones in where they cache: what was built shows which were used."""
    return hidet.option.current().replace(cache_dir=str(tmp_path / 'given'))


def _unreadable(monkeypatch):
    def current():
        raise AssertionError('hidet.option.current() was read below an API edge that had been given options')

    monkeypatch.setattr(hidet.option, 'current', current)


def test_a_graph_optimizes_tunes_and_builds_with_the_options_it_is_given(given, monkeypatch):
    x = hidet.symbol([16, 32], 'float32', 'cpu')
    w = hidet.randn([24, 32], device='cpu')
    graph = hidet.trace_from(ops.relu(ops.matmul(x, ops.transpose(w, 0, 1)) * 2.0), [x])
    _unreadable(monkeypatch)
    compiled = hidet.graph.optimize(graph, given).build(space=1, options=given)  # level 1 tunes the CPU GEMM
    monkeypatch.undo()
    xv = np.random.rand(16, 32).astype('float32')
    (y,) = compiled.run([hidet.from_numpy(xv)])
    np.testing.assert_allclose(y.numpy(), np.maximum(xv @ w.numpy().T * 2.0, 0.0), rtol=1e-4, atol=1e-4)
    cache = pathlib.Path(given.cache_dir)
    assert any(cache.joinpath('tuning').rglob('*.json')) and any(cache.joinpath('kernels').rglob('lib.so'))


def test_an_imperative_kernel_builds_with_the_options_it_is_given(given, monkeypatch):
    task = ops.add(hidet.symbol([8], 'float32', 'cpu'), hidet.symbol([8], 'float32', 'cpu')).trace[0].task
    _unreadable(monkeypatch)
    module = build_task(task, 'cpu', options=given)
    monkeypatch.undo()
    assert module.path.startswith(given.cache_dir)


def test_torch_compile_reads_the_options_once(monkeypatch, tmp_path):
    """The backend is the edge: one read when dynamo hands it a graph, none while that graph builds."""
    reads = []
    current = hidet.option.current

    def counted():
        reads.append(1)
        return current()

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(3, 8)
    torch._dynamo.reset()
    with hidet.option.context(cache_dir=str(tmp_path)):
        monkeypatch.setattr(hidet.option, 'current', counted)
        with torch.no_grad():
            y = torch.compile(model, backend='hidet')(x)
        monkeypatch.undo()
    torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)
    assert len(reads) == 1
    assert any(tmp_path.joinpath('kernels').rglob('lib.so'))
