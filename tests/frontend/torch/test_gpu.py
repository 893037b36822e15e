"""GPU tests of the torch frontend: CUDA tensors, float16, use_fp16, CUDA graphs, and (where
torchvision / transformers import) the target models with random weights. Marked `cuda`: they skip
themselves on machines without a GPU."""
import contextlib
import copy

import pytest
import torch
from torch import nn

import hidet
from hidet.graph.frontend.torch import dynamo_backend
from hidet.torch import dynamic_tracing, dynamo_config

from .models import GPTAttention, LlamaLayer, SmallCNN, TransformerBlock, VisionBlocks
from .utils import assert_close

pytestmark = pytest.mark.cuda

TOL = {torch.float32: 1e-4, torch.float16: 2e-2}


@pytest.fixture(autouse=True)
def exact_float32_reference():
    """Eager float32 convolutions use TF32 by default on the GPU (cudnn.allow_tf32): compare with exact ones."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _check(model, inputs, dtype, rtol=None, atol=None, against_float32=False, **compile_kwargs):
    """Compile ``model`` in ``dtype`` and compare with eager on ``inputs`` and on fresh random ones.

    ``against_float32`` (deep float16 models): two float16 computations of a layer whose outputs are ~50
    in magnitude differ by an fp16 ulp (0.03) on their near-zero elements without either being wrong, so
    element-wise tolerances against eager float16 test rounding luck. There, both are compared with the
    float32 model instead: hidet's float16 error may exceed eager float16's own error by at most 2e-2 of
    the output's scale."""
    rtol = TOL[dtype] if rtol is None else rtol
    atol = TOL[dtype] if atol is None else atol
    model = model.eval().cuda()
    reference = copy.deepcopy(model) if against_float32 else None
    model = model.to(dtype)
    inputs = [x.cuda().to(dtype) if x.is_floating_point() else x.cuda() for x in inputs]
    compiled = torch.compile(model, backend='hidet', **compile_kwargs)
    with torch.inference_mode():
        for _ in range(2):  # fresh inputs the second time (CUDA-graph replay)
            actual, expected = compiled(*inputs), model(*inputs)
            if reference is None:
                assert_close(actual, expected, rtol, atol)
            else:
                exact = reference(*[x.float() if x.is_floating_point() else x for x in inputs])
                _assert_as_accurate_as_eager(actual, expected, exact, rtol)
            inputs = [torch.randn_like(x) if x.is_floating_point() else x for x in inputs]
    return compiled


def _assert_as_accurate_as_eager(actual, eager, exact, rtol):
    assert actual.dtype == eager.dtype and actual.shape == eager.shape
    hidet_error = (actual.float() - exact).abs().max().item()
    eager_error = (eager.float() - exact).abs().max().item()
    scale = exact.abs().max().item()
    print(f'float16 max error against float32: hidet {hidet_error:.4g}, eager {eager_error:.4g} '
          f'(output scale {scale:.4g})')
    # resnet50 in float16: both 0.0595 off on outputs of scale 1.8 (the same rounding of inputs and weights)
    assert hidet_error <= eager_error + rtol * scale + 6e-8, (hidet_error, eager_error, scale)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
@pytest.mark.parametrize('name', ['cnn', 'vision', 'transformer', 'gpt', 'llama'])
def test_small_models(name, dtype):
    torch.manual_seed(0)
    model, inputs = {
        'cnn': lambda: (SmallCNN(), [torch.randn(2, 3, 16, 16)]),
        'vision': lambda: (VisionBlocks(), [torch.randn(2, 3, 16, 16)]),
        'transformer': lambda: (TransformerBlock(), [torch.randn(2, 5, 16)]),
        'gpt': lambda: (GPTAttention(), [torch.randint(0, 50, (2, 7))]),
        'llama': lambda: (LlamaLayer(), [torch.randn(2, 6, 32), torch.arange(6)[None].expand(2, 6)]),
    }[name]()
    _check(model, inputs, dtype)


@pytest.mark.parametrize('flag', [True, False])
def test_cuda_graph_knob(monkeypatch, flag):
    captured = []
    original = hidet.CompiledGraph.cuda_graph

    def spy(self):
        captured.append(self)
        return original(self)

    monkeypatch.setattr(hidet.CompiledGraph, 'cuda_graph', spy)
    dynamo_config.use_cuda_graph(flag)
    torch.manual_seed(0)
    _check(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)), [torch.randn(4, 8)], torch.float32)
    assert bool(captured) == flag


def test_use_fp16_on_float32_model():
    dynamo_config.use_fp16(True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8))
    compiled = _check(model, [torch.randn(4, 32)], torch.float32, rtol=2e-2, atol=2e-2)
    assert compiled(torch.randn(4, 32, device='cuda')).dtype == torch.float32


def test_non_contiguous_cuda_input_and_structure():
    def f(x):
        return {'a': x.sum(0), 'b': (x * 2, x.t().contiguous())}

    x = torch.randn(8, 6, device='cuda').t()
    compiled = torch.compile(f, backend='hidet')
    assert_close(compiled(x), f(x))


# ---------------------------------------------------------------- the target models (random weights)
VISION = ['resnet18', 'resnet50', 'mobilenet_v2', 'efficientnet_b0', 'vit_b_16', 'convnext_tiny']


def _informative_random_weights(model):
    """torchvision's initialization leaves ViT's head at zero and batch-norm statistics at (0, 1), which
    shrinks mobilenet_v2's and efficientnet_b0's outputs to ~1e-9: any comparison of them would pass.
    Zero weight matrices are redrawn, and batch-norm statistics are taken from a random batch."""
    for m in model.modules():
        if isinstance(m, nn.Linear) and not m.weight.any():
            nn.init.normal_(m.weight, std=m.in_features ** -0.5)
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: one batch sets the statistics
    if norms:
        model.train()
        with torch.no_grad():
            model(torch.randn(4, 3, 224, 224))
    return model.eval()


@pytest.mark.parametrize('batch', [1, 8])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
@pytest.mark.parametrize('name', VISION)
def test_torchvision(name, dtype, batch):
    torchvision = pytest.importorskip('torchvision')
    torch.manual_seed(0)
    model = _informative_random_weights(getattr(torchvision.models, name)(weights=None))
    # resnet18 in float16 keeps the seed's element-wise check against eager (rtol = atol = 2e-2)
    _check(model, [torch.randn(batch, 3, 224, 224)], dtype,
           against_float32=dtype == torch.float16 and name != 'resnet18')


def _transformers_model(name):
    tf = pytest.importorskip('transformers')
    if name == 'bert':
        cfg = tf.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=128, max_position_embeddings=128)
        return tf.BertModel(cfg)
    if name == 'gpt2':
        return tf.GPT2Model(tf.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=128))
    cfg = tf.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return tf.LlamaModel(cfg)


@pytest.mark.parametrize('batch', [1, 8])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
@pytest.mark.parametrize('name', ['bert', 'gpt2', 'llama'])
def test_transformers(name, dtype, batch):
    torch.manual_seed(0)
    model = _transformers_model(name)
    model.config.return_dict = False
    ids = torch.randint(0, 1000, (batch, 16))

    class LastHidden(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[0]

    _check(LastHidden(model), [ids], dtype)


@pytest.mark.parametrize('name', ['bert', 'gpt2'])
def test_dynamic_shapes_transformers(name):
    """Compiled once with dynamic batch and sequence length (float16, CUDA graphs per shape), run at several
    sizes without recompiling, each matching eager."""
    import torch.fx.experimental._config as fx_config

    torch.manual_seed(0)
    model = _transformers_model(name).cuda().half().eval()
    model.config.return_dict = False
    compiles = []

    def backend(gm, example_inputs):
        compiles.append(gm)
        return dynamo_backend.hidet_backend(gm, example_inputs)

    torch._dynamo.reset()
    with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
        compiled = torch.compile(lambda ids: model(ids)[0], backend=backend, dynamic=True)
        for i, (batch, seq) in enumerate([(4, 32), (16, 7), (1, 100), (3, 128), (1, 33)]):
            ids = torch.randint(0, 1000, (batch, seq), device='cuda')
            # the tracing call: else torch < 2.13 guards batch != 1 in SDPA's kernel choice, and batch 1 recompiles
            with dynamic_tracing() if i == 0 else contextlib.nullcontext():
                out = compiled(ids)
            torch.testing.assert_close(out.float(), model(ids)[0].float(), rtol=2e-2, atol=2e-2)
    assert len(compiles) == 1
    torch._dynamo.reset()


def test_backend_module_is_importable():
    assert dynamo_backend.hidet_backend is hidet.torch.hidet_backend
