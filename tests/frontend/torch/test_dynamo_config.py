"""hidet.torch.dynamo_config: modes, options, precedence, and the observable effect of each knob."""
import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hidet
from hidet.frontend.torch import dynamo_backend
from hidet.torch import default_registry, dynamo_config, hidet_backend, register_function

from .utils import assert_close, compile_and_compare


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)).eval()


def test_modes_and_precedence():
    assert dynamo_config.resolve().search_space == 0 and dynamo_config.resolve().use_cuda_graph
    assert dynamo_config.resolve('reduce-overhead').use_cuda_graph
    auto = dynamo_config.resolve('max-autotune')
    assert auto.search_space == 2 and auto.use_cuda_graph
    no_graphs = dynamo_config.resolve('max-autotune-no-cudagraphs')
    assert no_graphs.search_space == 2 and not no_graphs.use_cuda_graph
    dynamo_config.search_space(1).use_cuda_graph(False)            # explicit settings beat the mode
    assert dynamo_config.resolve('max-autotune').search_space == 1
    assert not dynamo_config.resolve('max-autotune').use_cuda_graph
    assert dynamo_config.resolve('max-autotune', {'search_space': 0}).search_space == 0  # options beat both
    assert dynamo_config['search_space'] == 1
    dynamo_config.reset()
    assert dynamo_config['search_space'] == 0


def test_invalid_settings_are_rejected_by_name():
    with pytest.raises(ValueError, match=r"unknown hidet option\(s\) 'bogus'.*search_space"):
        dynamo_config.resolve(options={'bogus': 1, 'search_space': 1})
    with pytest.raises(ValueError, match="mode 'fastest'"):
        dynamo_config.resolve('fastest')
    with pytest.raises(ValueError, match='search_space must be 0, 1 or 2'):
        dynamo_config.search_space(3)
    with pytest.raises(TypeError, match='use_fp16 takes True or False'):
        dynamo_config.resolve(options={'use_fp16': 'yes'})
    model, x = _mlp(), torch.randn(2, 8)
    with pytest.raises(Exception, match="'bogus'"):
        torch.compile(model, backend='hidet', options={'bogus': True})(x)


def test_mode_and_options_reach_the_backend(monkeypatch):
    seen = []
    original = dynamo_backend.CompiledFx.__init__

    def spy(self, gm, constants, config, registry=None, options=None):
        seen.append(config)
        original(self, gm, constants, config, registry, options)

    monkeypatch.setattr(dynamo_backend.CompiledFx, '__init__', spy)
    model, x = _mlp(), torch.randn(2, 8)
    compile_and_compare(model, x, mode='max-autotune-no-cudagraphs')
    assert seen and seen[-1].search_space == 2 and not seen[-1].use_cuda_graph and not seen[-1].use_tensor_core
    torch._dynamo.reset()
    compile_and_compare(model, x, options={'use_tensor_core': True, 'search_space': 1})
    assert seen[-1].search_space == 1 and seen[-1].use_cuda_graph and seen[-1].use_tensor_core


def test_pass_context_knobs(monkeypatch):
    """use_fp16 / use_fp16_reduction / use_tensor_core configure the graph optimizer's PassContext."""
    contexts = []
    optimize = hidet.graph.optimize

    def spy(graph, options=None):
        from hidet.graph.transforms import pass_context

        ctx = pass_context.current()
        contexts.append((ctx.precision, ctx.reduce_precision, ctx.use_tensor_core))
        return optimize(graph, options)

    monkeypatch.setattr(hidet.graph, 'optimize', spy)
    model, x = _mlp(), torch.randn(3, 8)
    gm = torch.fx.symbolic_trace(model)
    hidet_backend(gm, [x])
    dynamo_config.use_fp16().use_fp16_reduction().use_tensor_core()
    compiled = hidet_backend(gm, [x])
    assert contexts == [(None, None, False), ('float16', 'float16', True)]
    assert 'float16' in str(compiled.flow_graphs[0])
    with torch.no_grad():
        y = compiled(x)
        assert y.dtype == torch.float32                      # outputs cast back
        torch.testing.assert_close(y, model(x), rtol=2e-2, atol=2e-2)


def test_search_space_and_cuda_graph_reach_the_build(monkeypatch):
    """search_space is passed to FlowGraph.build; CPU graphs are never captured as CUDA graphs."""
    spaces = []
    original_build = hidet.FlowGraph.build

    def build(graph, space=0, **kwargs):
        spaces.append(space)
        compiled = original_build(graph, space=space, **kwargs)
        compiled.cuda_graph = lambda: pytest.fail('a CPU graph must not be captured')
        return compiled

    monkeypatch.setattr(hidet.FlowGraph, 'build', build)
    model, x = _mlp(), torch.randn(2, 8)
    dynamo_config.search_space(1)
    compile_and_compare(model, x)
    torch._dynamo.reset()
    compile_and_compare(model, x, options={'search_space': 2})
    assert spaces == [1, 2]


def test_print_input_graph(capsys):
    dynamo_config.print_input_graph(True)
    compile_and_compare(lambda x: F.relu(x) * 2, torch.randn(4))
    out = capsys.readouterr().out
    for word in ('opcode', 'name', 'target', 'args', 'kwargs', 'placeholder', 'call_function',
                 'torch.nn.functional.relu', 'operator.mul', 'output'):
        assert word in out


def test_correctness_report_flags_a_wrong_conversion(capsys):
    def f(x):
        return torch.tanh(F.relu(x) + 1.0)

    dynamo_config.correctness_report(True)
    compile_and_compare(f, torch.randn(8))
    out = capsys.readouterr().out
    assert 'hidet correctness report: 3 nodes, 0 with large errors' in out
    assert 'torch.nn.functional.relu' in out and 'e_h' in out

    @register_function(F.relu)
    def wrong_relu(x, inplace=False):
        return hidet.ops.abs(x)

    from hidet.frontend.torch.correctness import correctness_report

    gm = torch.fx.symbolic_trace(f)
    x = torch.randn(64)
    rows = correctness_report(gm, [x], [False], print_table=False)
    flagged = {r['name'] for r in rows if r['flagged']}
    assert {'relu', 'add', 'tanh'} >= flagged >= {'relu'}
    assert next(r for r in rows if r['name'] == 'relu')['operator'] == 'torch.nn.functional.relu'


def test_dump_graph_ir(tmp_path):
    dynamo_config.dump_graph_ir(str(tmp_path / 'ir'))
    compile_and_compare(_mlp(), torch.randn(2, 8))
    (graph_dir,) = os.listdir(tmp_path / 'ir')
    files = set(os.listdir(tmp_path / 'ir' / graph_dir))
    assert {'fx_graph.txt', 'flow_graph.txt', 'flow_graph_optimized.txt', 'options.json'} <= files
    assert 'Matmul' in (tmp_path / 'ir' / graph_dir / 'flow_graph.txt').read_text()
    assert 'Fused' in (tmp_path / 'ir' / graph_dir / 'flow_graph_optimized.txt').read_text()


def test_fallback_to_eager():
    def f(x):
        y = torch.relu(x) * 2
        z = torch.special.i0(y)   # no hidet mapping
        return torch.tanh(z) + y.sum()

    x = torch.randn(3, 5)
    with pytest.raises(NotImplementedError, match='torch.special.i0'):
        torch.compile(f, backend='hidet')(x)
    torch._dynamo.reset()
    dynamo_config.fallback_to_eager(True)
    with pytest.warns(UserWarning, match='eager PyTorch.*torch.special.i0'):
        compile_and_compare(f, x)
    assert not default_registry.has_function(torch.special.i0)
    gm = torch.fx.symbolic_trace(f)
    with pytest.warns(UserWarning):
        split = hidet_backend(gm, [x])
    regions = [m for m in split.modules() if type(m).__name__ == '_HidetRegion']
    assert len(regions) == 2  # before and after the eager i0
    assert_close(split(x), f(x))


def test_fallback_leaves_complex_values_in_eager():
    # rfft's complex result and abs (reading it) run in eager; the real-valued rest in hidet
    def f(x):
        return torch.fft.rfft(x).abs() * 2 + 1

    x = torch.randn(4, 8)
    with pytest.raises(Exception, match='complex64 values'):
        torch.compile(f, backend='hidet')(x)
    torch._dynamo.reset()
    dynamo_config.fallback_to_eager(True)
    with pytest.warns(UserWarning, match='eager PyTorch.*(abs|rfft)'):
        compile_and_compare(f, x)
