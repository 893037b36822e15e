"""fold_constants evaluates constant subgraphs on the host (hidet.ir.evaluate): no kernel is built for them, the
folded weights are those the kernels compute, and a task the evaluator refuses runs its kernel (logged)."""
import importlib
import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hidet
from hidet import ops
from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import deferred_constants
from hidet.graph.tensor import _host_values
from hidet.graph.transforms import FoldConstants, PassContext, optimize
from hidet.utils import logs


def _conv_bn_relu(device, channels_in=3, channels=8, seed=0):
    """x → conv → batch norm (non-default statistics and affine) → relu, the graph and its numpy parameters."""
    rng = np.random.default_rng(seed)
    p = {'w': rng.standard_normal([channels, channels_in, 3, 3]).astype(np.float32) * 0.3,
         'mean': rng.uniform(-0.5, 0.5, channels).astype(np.float32),
         'var': rng.uniform(0.5, 2.0, channels).astype(np.float32),
         'gamma': rng.uniform(0.5, 1.5, channels).astype(np.float32),
         'beta': rng.uniform(-0.5, 0.5, channels).astype(np.float32)}
    x = hidet.symbol([2, channels_in, 10, 10], device=device)
    t = {k: hidet.asarray(v).to(device=device) for k, v in p.items()}
    with deferred_constants():  # (as the torch frontend: the statistics' operators traced, not run at once)
        y = ops.batch_norm(ops.conv2d(x, t['w'], padding=1), t['mean'], t['var'], t['gamma'], t['beta'], 1e-5)
    y = ops.relu(y)
    return hidet.trace_from(y, [x]), p


def _reference(x, p):
    out = F.batch_norm(F.conv2d(torch.from_numpy(x), torch.from_numpy(p['w']), padding=1),
                       torch.from_numpy(p['mean']), torch.from_numpy(p['var']), torch.from_numpy(p['gamma']),
                       torch.from_numpy(p['beta']), training=False, eps=1e-5)
    return F.relu(out).numpy()


@pytest.fixture
def build_calls(monkeypatch):
    """The number of tasks of each build_tasks call (the module's function: fold_constants imports it when it runs)."""
    module = importlib.import_module('hidet.drivers.build_task')
    calls, original = [], module.build_tasks
    monkeypatch.setattr(module, 'build_tasks', lambda jobs, space=0, options=None: calls.append(len(jobs)) or
                        original(jobs, space, options))
    return calls


@pytest.fixture
def graph_log(caplog):
    caplog.set_level(logging.INFO, logger='hidet.graph')
    yield caplog
    logs.logger('graph').setLevel(logging.NOTSET)


@pytest.mark.parametrize('precision', [None, 'float16'])
def test_conv_batch_norm_graph_folds_without_building_kernels(build_calls, graph_log, precision, device):
    graph, p = _conv_bn_relu(device)
    with PassContext() as ctx:
        ctx.set_precision(precision)
        optimized = optimize(graph)
    assert build_calls == []  # no kernel for the folding: batch-norm constants, weight scaling, casts
    assert not [r for r in graph_log.records if 'runs its kernel' in r.getMessage()]
    host_lines = [r.getMessage() for r in graph_log.records if 'evaluated on the host' in r.getMessage()]
    assert host_lines and all(line.endswith(', 0 by 0 kernels') for line in host_lines), host_lines
    x = np.random.default_rng(1).standard_normal([2, 3, 10, 10]).astype(np.float32)
    tol = 2e-2 if precision else 1e-4
    actual = optimized(hidet.asarray(x).to(device=device)).numpy()  # (the precision conversion keeps the graph's signature)
    np.testing.assert_allclose(actual, _reference(x, p), rtol=tol, atol=tol)


def _fold_both_ways(outputs):
    """The graph of deferred constant operators ``outputs`` folded by fold_constants, and the same operators run
    node by node by their kernels: host arrays of each output."""
    graph = FlowGraph(outputs, [])
    folded = FoldConstants()(graph, PassContext())
    by_kernels = {}
    for node in graph.nodes:
        for t, v in zip(node.outputs, node.compute([by_kernels.get(id(t), t) for t in node.inputs])):
            by_kernels[id(t)] = v
    return [_host_values(t) for t in folded.outputs], [_host_values(by_kernels[id(t)]) for t in graph.outputs]


def test_folded_weights_are_the_kernels_bits(device):
    """Weight transforms as frontends and passes defer them: a cast to float16 and bfloat16, a transpose, a
    channels-last permute, a float16 scale (one rounding) and a batch-norm-like fold in float32."""
    rng = np.random.default_rng(0)
    w = hidet.asarray(rng.standard_normal([16, 8, 3, 3]).astype(np.float32)).to(device=device)
    scale = hidet.asarray(rng.uniform(0.5, 2, [16, 1, 1, 1]).astype(np.float32)).to(device=device)
    var = hidet.asarray(rng.uniform(0.5, 2, [16]).astype(np.float32)).to(device=device)
    with deferred_constants():
        outputs = [ops.permute(ops.cast(w, 'float16'), [0, 2, 3, 1]),
                   ops.transpose(ops.reshape(ops.cast(w, 'bfloat16'), [16, 72]), 0, 1),
                   ops.multiply(ops.cast(w, 'float16'), ops.cast(scale, 'float16')),
                   ops.multiply(w, ops.reshape(ops.divide(1.0, ops.sqrt(ops.add(var, 1e-5))), [16, 1, 1, 1]))]
    folded, by_kernels = _fold_both_ways(outputs)
    for i, (a, b) in enumerate(zip(folded, by_kernels)):
        assert a.dtype == b.dtype and a.shape == b.shape, i
        np.testing.assert_array_equal(a, b, err_msg=f'output {i}')
    with deferred_constants():  # (CUDA's rsqrt is its own approximation: within an ulp or two of 1 / sqrt)
        folded, by_kernels = _fold_both_ways([ops.rsqrt(ops.add(var, 1e-5))])
    np.testing.assert_allclose(folded[0], by_kernels[0], rtol=3e-7, atol=0)


def test_refused_tasks_run_their_kernels_and_are_logged(build_calls, graph_log, monkeypatch):
    import hidet.ir.evaluate as ev

    monkeypatch.setattr(ev, 'MAX_WORK', 100)  # (every task here is larger)
    w = hidet.asarray(np.random.default_rng(0).standard_normal([20, 30]).astype(np.float32))
    with deferred_constants():
        outputs = [ops.sum(ops.multiply(w, 2.0), [1]), ops.transpose(w, 0, 1)]
    folded, by_kernels = _fold_both_ways(outputs)
    assert build_calls and build_calls[0] == 3  # the refused tasks' kernels, built together
    refused = [r.getMessage() for r in graph_log.records if 'runs its kernel' in r.getMessage()]
    assert len(refused) == 3 and all('too much work' in m for m in refused), refused
    for a, b in zip(folded, by_kernels):
        np.testing.assert_array_equal(a, b)


def test_model_with_non_default_batch_norm_statistics_matches_torch():
    from hidet.cli.models import non_default_parameters

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 8, 3, stride=2, bias=False), torch.nn.BatchNorm2d(8)).eval()
    non_default_parameters(model)
    assert not torch.all(model[1].running_var == 1)
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend='hidet')(x), model(x), rtol=1e-4, atol=1e-4)
