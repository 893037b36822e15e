"""torch.compile(backend='hidet') with dynamic shapes: dynamic=True, mark_dynamic and dynamo's automatic
dynamic shapes give one symbolic hidet graph, built once and run at every size (compiles counted)."""
import contextlib

import pytest
import torch
from torch import nn
from torch.nn import functional as F
import torch.fx.experimental._config as fx_config

from hidet.torch import dynamic_tracing

from .models import GPTAttention, LlamaLayer, TransformerBlock
from .utils import CountingBackend, assert_close


@pytest.fixture
def size_oblivious():
    """Without this, dynamo specializes a size it first sees as 1 (and guards that others are >= 2)."""
    with fx_config.patch(backed_size_oblivious=True):
        torch._dynamo.reset()
        yield
    torch._dynamo.reset()


def _run_sizes(model, make_inputs, sizes, backend, **compile_kwargs):
    compiled = torch.compile(model, backend=backend, **compile_kwargs)
    with torch.no_grad():
        for size in sizes:
            inputs = make_inputs(*size)
            assert_close(compiled(*inputs), model(*inputs))
    return compiled


def _symbolic_inputs(backend: CountingBackend):
    graphs = [g for c in backend.compiled for g in c.flow_graphs]
    assert len(graphs) == 1
    return [t.shape for t in graphs[0].inputs]


def test_dynamic_true_gpt_block_compiles_once(size_oblivious):
    torch.manual_seed(0)
    backend = CountingBackend()
    sizes = [(4, 8), (1, 5), (3, 16), (16, 2), (2, 8)]
    _run_sizes(GPTAttention().eval(), lambda b, s: [torch.randint(0, 50, (b, s))], sizes, backend, dynamic=True)
    assert len(backend.compiled) == 1 and backend.builds == 1
    (shape,) = _symbolic_inputs(backend)
    assert all(not isinstance(d, int) for d in shape), shape  # batch and sequence are symbols


def test_dynamic_true_transformer_and_llama(size_oblivious):
    torch.manual_seed(0)
    backend = CountingBackend()
    # (batch 1 would recompile: torch's own multi_head_attention_forward guards on it)
    _run_sizes(TransformerBlock().eval(), lambda b, s: [torch.randn(b, s, 16)], [(2, 5), (3, 9), (4, 2)], backend,
               dynamic=True)
    assert len(backend.compiled) == 1 and backend.builds == 1

    def llama_inputs(b, s):  # (contiguous: an expanded view's strides change at batch 1, and dynamo recompiles)
        return [torch.randn(b, s, 32), torch.arange(s)[None].expand(b, s).contiguous()]

    backend = CountingBackend()
    # (batch or sequence 1 would recompile: torch's matmul decomposition of the rotary table guards on it)
    _run_sizes(LlamaLayer().eval(), llama_inputs, [(2, 6), (3, 11), (4, 3)], backend, dynamic=True)
    assert len(backend.compiled) == 1 and backend.builds == 1


class MaskedAttention(torch.nn.Module):
    """Attention through scaled_dot_product_attention with a 4-D boolean mask of the batch's size, as transformers
    (before 5.24) builds for SDPA under torch.compile even where nothing is masked."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = (torch.arange(s)[None, None, :, None] >= 0).expand(b, -1, s, s)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return y.transpose(1, 2).reshape(b, s, d)


def test_sdpa_with_a_batch_mask_compiles_once_batch_1_included():
    # before torch 2.13, SDPA's fused-kernel checks guard mask batch != 1 unless traced under dynamic_tracing
    # (sequence 1 would recompile: the math kernel's matmul decomposition guards it, as transformers' SDPA does)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, backend = MaskedAttention().eval(), CountingBackend()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        for i, (b, s) in enumerate([(4, 8), (1, 8), (3, 5), (1, 3)]):
            x = torch.randn(b, s, 32)
            with dynamic_tracing() if i == 0 else contextlib.nullcontext():
                y = compiled(x)
            assert_close(y, model(x))
    torch._dynamo.reset()
    assert len(backend.compiled) == 1 and backend.builds == 1


def test_mark_dynamic_keeps_other_dims_static():
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.GELU(), torch.nn.Linear(24, 6)).eval()
    backend = CountingBackend()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        for batch in (3, 7, 64, 5):
            x = torch.randn(batch, 12)
            torch._dynamo.mark_dynamic(x, 0)
            assert_close(compiled(x), model(x))
    assert len(backend.compiled) == 1 and backend.builds == 1
    (shape,) = _symbolic_inputs(backend)
    assert not isinstance(shape[0], int) and shape[1] == 12


def test_automatic_dynamic_after_one_recompile():
    """dynamo compiles static first; a second size makes the changed dimension dynamic (one recompile), and
    later sizes run on that graph."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = GPTAttention().eval()
    backend = CountingBackend()
    _run_sizes(model, lambda b, s: [torch.randint(0, 50, (b, s))], [(2, 5), (2, 9), (2, 3), (2, 12)], backend)
    assert len(backend.compiled) == 2 and backend.builds == 2
    static, dynamic = ([g.inputs[0].shape for g in c.flow_graphs] for c in backend.compiled)
    assert static == [(2, 5)]
    assert dynamic[0][0] == 2 and not isinstance(dynamic[0][1], int)


def test_symint_inputs_and_sizes_in_the_graph(size_oblivious):
    """Sizes flow through the graph as SymInt placeholders and Python arithmetic on them (view, expand,
    arange, zeros of a symbolic size)."""
    torch.manual_seed(0)

    def f(x):
        b, s, d = x.shape
        pos = torch.arange(s, device=x.device).float()
        pad = torch.zeros(b, 1, d)
        y = torch.cat([x + pos[None, :, None], pad], dim=1)   # [b, s + 1, d]
        return y.view(b * (s + 1), d).sum(-1).view(b, s + 1)[:, :-1] * 2

    backend = CountingBackend()
    _run_sizes(f, lambda b, s: [torch.randn(b, s, 4)], [(2, 3), (5, 7), (1, 2)], backend, dynamic=True)
    assert len(backend.compiled) == 1 and backend.builds == 1


def test_a_declined_conversion_says_why(size_oblivious):
    """A conversion that declines a symbolic case (a strided slice of a symbolic size) is reported with its
    reason."""
    from hidet.frontend.torch.interpreter import UnsupportedOperatorsError

    def f(x):
        return x[:, ::2] * 2

    compiled = torch.compile(f, backend='hidet', dynamic=True, fullgraph=True)
    with pytest.raises(Exception) as info:
        compiled(torch.randn(3, 10))
    text = str(info.value)
    assert isinstance(info.value, UnsupportedOperatorsError) or 'UnsupportedOperatorsError' in text, text
    assert 'symbolic slices take step 1' in text, text


def test_a_module_number_changed_after_compiling_is_seen(size_oblivious):
    """With dynamic=True dynamo passes a module's Python number as a 0-d tensor input and does not guard on its
    value; hidet bakes it in, so a call compares the values and builds again when one changed (it answered with
    the old number)."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            return x * self.scale

    model, backend = Scaled(), CountingBackend()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    x = torch.randn(3, 4)
    assert_close(compiled(x), x * 2.0)
    assert_close(compiled(x), x * 2.0)
    model.scale = 3.0
    assert_close(compiled(x), x * 3.0)
    assert backend.builds == 2


def test_a_python_number_that_changes_between_calls_is_read_in_the_graph():
    """dynamo passes a Python number argument that changed between calls as a 0-d float64 tensor and reads it with
    ``.item()``: one build serves every later value (the first call's build has the number baked in), and the
    number does not raise a float16 input's dtype, as in torch."""
    def f(x, t):
        return torch.softmax(x / t, -1) * (1 - t)

    backend = CountingBackend()
    compiled = torch.compile(f, backend=backend)
    x = torch.randn(4, 8)
    for t in (0.7, 0.9, 1.3, 2.0):
        assert_close(compiled(x, t), f(x, t))
    assert backend.builds == 2
    h = x.half()
    for t in (0.5, 3.0):
        y = compiled(h, t)
        assert y.dtype == torch.float16
        assert_close(y.float(), f(h, t).float(), rtol=2e-3, atol=2e-3)


def test_a_conversion_that_needs_a_constant_number_declines_with_the_reason():
    """leaky_relu's slope must be a Python number: given one that changes between calls it declines, naming why
    (it raised TypeError from deep inside), and with the fallback torch runs it with the number."""
    from hidet.torch import dynamo_config

    def f(x, slope):
        return F.leaky_relu(x * 2, slope) + 1

    compiled = torch.compile(f, backend='hidet')
    x = torch.randn(4, 8)
    compiled(x, 0.1)
    with pytest.raises(Exception, match='a number computed in the graph .*needs a constant number'):
        compiled(x, 0.2)
    torch._dynamo.reset()
    dynamo_config.fallback_to_eager(True)
    compiled = torch.compile(f, backend='hidet')
    with pytest.warns(UserWarning, match='eager PyTorch.*leaky_relu'):
        for slope in (0.1, 0.2, 0.3):
            assert_close(compiled(x, slope), f(x, slope))
