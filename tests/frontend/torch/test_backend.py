"""The backend's contract with torch: entry point, torch tensors in and out, output structures,
non-contiguous inputs, grad modes, model state as constants, recompiles for new shapes."""
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hidet.frontend.torch import dynamo_backend

from .utils import CountingBackend, assert_close, compile_and_compare


def test_entry_point_without_importing_hidet():
    assert 'hidet' in torch._dynamo.list_backends()
    code = ('import sys, torch\n'
            'f = torch.compile(lambda x: torch.relu(x) * 2 + 1, backend="hidet")\n'
            'x = torch.randn(5)\n'
            'torch.testing.assert_close(f(x), torch.relu(x) * 2 + 1)\n'
            'assert "hidet" in sys.modules\n'
            'print("ok")\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and 'ok' in out.stdout, out.stderr[-2000:]


def test_output_structures():
    def f(x, y):
        s = x + y
        return {'sum': s, 'pair': (x * y, [s - 1, x]), 'again': s, 'n': x.shape[0], 'none': None}

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    compiled = compile_and_compare(f, x, y)  # (compares structure and types too)
    out = compiled(x, y)
    assert isinstance(out['pair'], tuple) and isinstance(out['pair'][1], list) and out['n'] == 3


def test_non_contiguous_inputs():
    def f(x, y):
        return x @ y + 1

    x = torch.randn(6, 5).t()           # transposed
    y = torch.randn(12, 4)[::2]          # strided rows
    assert not x.is_contiguous() and not y.is_contiguous()
    compile_and_compare(f, x, y)


@pytest.mark.parametrize('grad_mode', ['no_grad', 'inference_mode', 'enabled'])
def test_grad_modes(grad_mode):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.Linear(8, 3)).eval()
    x = torch.randn(2, 4)
    ctx = {'no_grad': torch.no_grad, 'inference_mode': torch.inference_mode, 'enabled': torch.enable_grad}[grad_mode]
    compiled = torch.compile(model, backend='hidet')
    with ctx():
        assert_close(compiled(x), model(x).detach())


def test_parameters_and_buffers_are_constants(monkeypatch):
    flags, built = [], []
    original = dynamo_backend.CompiledFx.__init__

    def spy(self, gm, constants, config, registry=None, options=None):
        names = [n.name for n in gm.graph.nodes if n.op == 'placeholder']
        flags.append(dict(zip(names, constants)))
        built.append(self)
        original(self, gm, constants, config, registry, options)

    monkeypatch.setattr(dynamo_backend.CompiledFx, '__init__', spy)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4)
            self.scale = torch.tensor(1.5)       # a plain tensor attribute

        def forward(self, x):
            return F.relu(self.bn(self.conv(x))) * self.scale

    torch.manual_seed(0)
    model = Net().eval()
    compile_and_compare(model, torch.randn(1, 3, 6, 6))
    (placeholders,) = flags
    inputs = [name for name, is_const in placeholders.items() if not is_const]
    assert len(inputs) == 1 and 'x' in inputs[0], placeholders
    assert len(placeholders) >= 5  # weights, bias, running stats, … (lifted to graph inputs by dynamo)
    (graph,) = built[0].flow_graphs
    assert len(graph.inputs) == 1   # only x: every weight is a constant of the graph


def test_new_shapes_recompile():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2)).eval()
    compiled = torch.compile(model, backend='hidet')
    with torch.no_grad():
        for batch in (2, 3, 5):
            x = torch.randn(batch, 4)
            assert_close(compiled(x), model(x))


def test_inplace_operations():
    def f(x):
        y = x * 2
        y.add_(1)
        y += x
        z = y.clone()
        z.mul_(y)
        return F.relu(z, inplace=True), y

    compile_and_compare(f, torch.randn(3, 3))


def test_python_scalars_and_shapes():
    def f(x, n: int):
        b, c = x.shape
        return x.reshape(b * c // n, n).sum(-1) * n, x.size(1) + n

    x = torch.randn(4, 6)
    compiled = torch.compile(f, backend='hidet')
    with torch.no_grad():
        assert_close(compiled(x, 3), f(x, 3))
        assert_close(compiled(x, 2), f(x, 2))


def test_indexing_masks_and_reductions():
    def f(x, idx):
        m = x > 0
        y = x.masked_fill(~m, -1.0)
        v, i = y.max(dim=-1)
        return y[:, 1:3], y[idx], v, i, torch.where(m, x, 0.0).mean(), F.softmax(y, dim=-1).argmax(-1), \
            torch.cumprod(x, 1), x.cumsum(0, dtype=torch.float64)

    compile_and_compare(f, torch.randn(4, 5), torch.tensor([2, 0]))


@pytest.mark.parametrize('dtype', [torch.float64, torch.float16, torch.int32])
def test_products_enforce_eager_dtype_rules(dtype):
    # a float32 model called with another dtype fails as in eager ("mat1 and mat2 must have the same dtype"),
    # instead of promoting silently
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU()).eval()
    conv = nn.Conv2d(3, 4, 3).eval()
    x = torch.randint(0, 3, (2, 8), dtype=dtype) if dtype == torch.int32 else torch.randn(2, 8, dtype=dtype)
    image = torch.randint(0, 3, (1, 3, 6, 6), dtype=dtype) if dtype == torch.int32 else \
        torch.randn(1, 3, 6, 6, dtype=dtype)
    for module, inp in ((model, x), (conv, image), (lambda a: a @ torch.ones(8, 2), x)):
        with pytest.raises(RuntimeError):
            module(inp)
        with pytest.raises(Exception, match='same'):  # (dynamo's fake-tensor run or hidet's conversion)
            torch.compile(module, backend='hidet')(inp)


def test_assignment_and_copy_inside_a_graph():
    # operator.setitem with ints, slices, steps, None, ..., a mask, an integer tensor, scalars and tensors; copy_
    def f(x, v, idx):
        y = x * 2
        y[0] = 5.0
        y[1:, ::2] = 0.5
        y[..., 1] = y[..., 2]
        y[None, 2, :2] = v[0, :2]
        y[y > 3] = -1.0
        y[:, idx] = v[:, :2]
        y[-1] = v[-1]
        z = torch.empty_like(y)
        z.copy_(y[0])
        return y, z + 1

    compile_and_compare(f, torch.randn(4, 5), torch.randn(4, 5), torch.tensor([0, -1]))


def test_in_place_updates_of_shared_memory():
    # hidet rebinds an in-place call's target; where torch would change memory others see, it declines
    def view_then_read(x):
        y = x * 2
        y[0].add_(1)  # updates y through a view: y is read afterwards
        return y

    def input_view_update(x):
        x[0].mul_(2)  # the caller's tensor changes, through a view
        return x + 1

    torch._dynamo.reset()
    with pytest.raises(Exception, match='a view of'):
        torch.compile(view_then_read, backend='hidet')(torch.randn(3, 4))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="graph input 'l_x_' through"):
        torch.compile(input_view_update, backend='hidet')(torch.randn(3, 4))
    # with the fallback, the update of the input runs in eager: the caller sees it, as without compiling
    # (the conftest fixture resets dynamo_config after the test)
    import hidet

    torch._dynamo.reset()
    x = torch.randn(3, 4)
    x_eager = x.clone()
    hidet.torch.dynamo_config.fallback_to_eager(True)
    with pytest.warns(UserWarning, match='eager PyTorch'):
        got = torch.compile(input_view_update, backend='hidet')(x)
    assert_close(got, input_view_update(x_eager))
    assert_close(x, x_eager)


def test_in_place_updates_of_inputs_are_written_back():
    """An in-place update of a whole graph input changes the caller's tensor, as in eager: the graph computes the
    new value and the compiled function copies it back after each run (it was declined). Updates of two inputs,
    an assignment into one, an input updated and read again, a function that returns nothing, a non-contiguous
    input; each call updates again."""
    def scaled(x, y):
        x.mul_(2)  # read again below: the updated value
        y[1:3] = x[1:3] + 1  # an assignment into y
        return x + y

    def clamped(x):
        x.clamp_(min=0.0)

    torch.manual_seed(0)
    compiled = torch.compile(scaled, backend='hidet')
    x, y = torch.randn(4, 5), torch.randn(5, 4).t()  # (y: not contiguous)
    x_eager, y_eager = x.clone(), y.clone()
    for _ in range(2):
        assert_close(compiled(x, y), scaled(x_eager, y_eager))
        assert_close(x, x_eager)
        assert_close(y, y_eager)
    z = torch.randn(3, 4)
    assert torch.compile(clamped, backend='hidet')(z) is None
    assert (z >= 0).all() and (z > 0).any()


def test_a_key_value_cache_passed_in_is_updated_at_each_step():
    """A decoder step writing its key and value into caches passed in at a position (HF's StaticCache:
    index_copy_), then attending over them: one build serves every step, and the caller's caches match eager's
    after each (HF generate with cache_implementation='static' declined before the write-back)."""
    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(16, 48)

        def forward(self, x, k_cache, v_cache, pos):
            q, k, v = self.qkv(x).chunk(3, -1)
            k_cache.index_copy_(1, pos, k)
            v_cache.index_copy_(1, pos, v)
            return torch.softmax(q @ k_cache.transpose(1, 2) / 4, -1) @ v_cache

    torch.manual_seed(0)
    step, backend = Step().eval(), CountingBackend()
    compiled = torch.compile(step, backend=backend)
    caches, eager_caches = [torch.zeros(1, 6, 16) for _ in range(2)], [torch.zeros(1, 6, 16) for _ in range(2)]
    with torch.no_grad():
        for t in range(4):
            x, pos = torch.randn(1, 1, 16), torch.tensor([t])
            assert_close(compiled(x, *caches, pos), step(x, *eager_caches, pos))
            assert_close(caches, eager_caches)
    assert backend.builds == 1


def test_an_artifact_refuses_a_model_that_updates_its_input(tmp_path):
    from hidet.torch import compile_to_file

    class Normalize(nn.Module):
        def forward(self, x):
            x.sub_(x.mean())
            return x * 2

    with pytest.raises(ValueError, match=r"updates its input\(s\) \['l_x_'\] in place"):
        compile_to_file(Normalize(), [torch.randn(4, 4)], str(tmp_path / 'm.hidet'))


def test_in_place_calls_on_constants_update_their_target():
    """An in-place call whose operands are all constants is evaluated at compile time on a copy; later reads of its
    target must see the update (a mask made in forward: ``triu_`` was lost, and x + ones came out; ``m[1] = 5``
    returns None, which was bound to m)."""
    def masked(x):
        mask = torch.ones(4, 4)
        mask.triu_(1)
        return x + mask

    def assigned(x):
        m = torch.zeros(4, 4)
        m[1] = 5.0
        m.masked_fill_(torch.eye(4, dtype=torch.bool), -1.0)
        return x * m

    for fn in (masked, assigned):
        torch._dynamo.reset()
        compile_and_compare(fn, torch.randn(4, 4))


def test_chained_in_place_calls_update_every_name_of_the_tensor():
    """``m.mul_(2).add_(1)``: the add updates the tensor that m and the mul's result both name (the add only
    rebound the mul's result before, so m came out doubled, not doubled plus one), on constants and inputs' values
    alike."""
    def chained(x):
        m = x * 1
        m.mul_(2).add_(1)
        c = torch.arange(16.0).reshape(4, 4)
        c.mul_(2).add_(1)
        return m + c

    def named(x):
        m = x * 1
        y = m.mul_(2)
        y.add_(1)
        return m + y

    for fn in (chained, named):
        torch._dynamo.reset()
        compile_and_compare(fn, torch.randn(4, 4))


def test_views_taken_before_an_in_place_update_see_it():
    """A view of a tensor taken before the tensor is updated in place, and read after, sees the update in torch
    (they share memory): the interpreter takes such views again after the update (they kept the old values)."""
    def reshaped(x):
        m = x * 1
        v = m.view(16)
        w = v[:4]
        m.add_(1)
        return w * 2 + v.sum()

    def transposed(x):
        m = torch.zeros(4, 4)
        t = m.t()
        m.add_(x)  # (a constant made dynamic by the update: its view too)
        r = torch.ones(4, 4) * 3
        row = r[0]
        r.mul_(2)  # (constants alone)
        return t * 1 + row

    def of_another_name(x):  # (y names m's tensor: its view sees the update through m)
        m = x * 1
        y = m.mul_(2)
        v = y.view(16)
        m.add_(1)
        return v * 1

    def through_a_view(x):  # (an update of part of the tensor: the earlier view is not taken again; declined)
        m = x * 1
        v = m[1]
        m[0].add_(1)
        return v * 1

    for fn in (reshaped, transposed, of_another_name):
        torch._dynamo.reset()
        compile_and_compare(fn, torch.randn(4, 4))
    torch._dynamo.reset()
    with pytest.raises(Exception, match='a view of the same tensor taken before it'):
        torch.compile(through_a_view, backend='hidet')(torch.randn(4, 4))


def test_model_state_updated_in_place_is_declined_then_run_in_eager():
    """A buffer updated in place with constant operands (a step counter; batch norm's running statistics in
    training mode) changes the caller's tensor: hidet says so instead of leaving the buffer as it was, and with the
    fallback torch runs the update, as without compiling."""
    import hidet

    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer('steps', torch.zeros(()))
            self.norm = nn.BatchNorm1d(4)

        def forward(self, x):
            self.steps.add_(1)
            return self.norm(x) * 2

    torch.manual_seed(0)
    model, x = Counting().train(), torch.randn(8, 4) + 1
    torch._dynamo.reset()
    with pytest.raises(Exception, match='model state .*steps') as info:
        torch.compile(model, backend='hidet')(x)
    assert 'batch_norm in training mode' in str(info.value)
    reference = Counting().train()
    reference.load_state_dict(model.state_dict())
    torch._dynamo.reset()
    hidet.torch.dynamo_config.fallback_to_eager(True)  # (the conftest fixture resets dynamo_config after the test)
    with pytest.warns(UserWarning, match='eager PyTorch'):
        got = torch.compile(model, backend='hidet')(x)
    assert_close(got, reference(x))
    for name, value in reference.state_dict().items():
        assert_close(model.state_dict()[name], value)
    assert model.steps.item() == 1 and model.norm.num_batches_tracked.item() == 1


def test_output_structures_are_built_as_map_structure_builds_them():
    """A compiled call builds its output structure with a builder made once (dynamo_backend._structure_builder):
    the same structure map_structure gives, new containers at each call, fixed leaves as they are."""
    import collections

    from hidet.frontend.torch.interpreter import map_structure

    Out, Pair = dynamo_backend._Out, collections.namedtuple('Pair', 'a b')
    spec = (Out(1), [Out(0), None, 3], {'k': Out(2), 'fixed': 'x'}, Pair(Out(0), 7), (), torch.Size([2, 3]),
            torch.return_types.max([Out(2), Out(1)]))
    outs = [torch.zeros(1), torch.ones(2), torch.full((3,), 2.0)]
    build = dynamo_backend._structure_builder(spec)
    got = build(outs)
    want = map_structure(spec, lambda leaf: outs[leaf.index] if isinstance(leaf, Out) else leaf)
    assert type(got) is type(want) and len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w) and repr(g) == repr(w)
    assert got[1] is not build(outs)[1]  # a new list at each call
    assert build([torch.zeros(1)] * 3)[0] is not got[0] and dynamo_backend._structure_builder(Out(2))(outs) is outs[2]
