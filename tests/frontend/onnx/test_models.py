"""Models exported by torch.onnx.export run through hidet's ONNX frontend and match onnxruntime:
imperatively, and traced → optimized → (built) as a graph."""
import numpy as np
import pytest
import torch
from torch import nn

import hidet
import hidet.frontend  # noqa: F401 (hidet does not import its frontends)
import hidet.onnx  # noqa: F401
from onnx_test_utils import assert_close, export, run_ort


class SmallCNN(nn.Module):
    """conv-bn-relu, max pool, depthwise conv + hardswish, a squeeze-excite gate, residual, global pool, linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.Hardswish())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 4, 1), nn.ReLU(), nn.Conv2d(4, 8, 1),
                                nn.Sigmoid())
        self.pw = nn.Conv2d(8, 16, 1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        y = self.pool(self.stem(x))
        z = self.dw(y)
        z = z * self.se(z) + y
        z = torch.nn.functional.gelu(self.pw(z))
        z = torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1)
        return torch.softmax(self.head(z), dim=-1)


class SmallTransformer(nn.Module):
    """Token + position embeddings, a causal self-attention block and a GELU MLP, pre-LayerNorm, an LM head."""

    def __init__(self, vocab=50, d=32, heads=4, max_len=16):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        b, s = ids.shape
        pos = torch.arange(s, device=ids.device).unsqueeze(0)
        x = self.tok(ids) + self.pos(pos)
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)

        def heads(t):
            return t.reshape(b, s, self.heads, -1).transpose(1, 2)

        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=ids.device), 1)
        att = att.masked_fill(mask, float('-inf')).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, -1)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


class MiniViT(nn.Module):
    """ViT patterns: patchify conv, a class token expanded and concatenated, position embeddings, attention,
    the class token's row selected for the head."""

    def __init__(self, d=32):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.cls, self.pos = nn.Parameter(torch.randn(1, 1, d)), nn.Parameter(torch.randn(1, 17, d))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        y = self.ln1(x)
        x = x + torch.softmax(y @ y.transpose(1, 2) / 4.0, -1) @ y
        x = x + self.mlp(self.ln2(x))
        return self.head(x[:, 0])


class ConvNeXtBlock(nn.Module):
    """ConvNeXt/EfficientNet patterns: 7x7 depthwise conv, channels-last LayerNorm and MLP, layer scale, SiLU,
    nearest and bilinear resizing, repeat_interleave, average pooling without padded elements."""

    def __init__(self, d=16):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(torch.rand(d))
        self.up = nn.Upsample(scale_factor=2, mode='bilinear')

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(nn.functional.gelu(self.fc1(self.ln(y)))) * self.gamma
        x = x + y.permute(0, 3, 1, 2)
        down = nn.functional.interpolate(x, scale_factor=0.5, mode='nearest')
        x = nn.functional.silu(x) + down.repeat_interleave(2, -1).repeat_interleave(2, -2)
        return nn.functional.avg_pool2d(self.up(x), 3, 2, 1, count_include_pad=False).mean((2, 3))


def _cnn():
    torch.manual_seed(0)
    model = SmallCNN().eval()
    with torch.no_grad():  # non-trivial batch-norm statistics
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    return model, torch.randn(2, 3, 32, 32)


def _transformer():
    torch.manual_seed(0)
    return SmallTransformer().eval(), torch.randint(0, 50, (2, 12))


@pytest.mark.parametrize('opset', [13, 17])
def test_cnn_imperative(opset):
    model, x = _cnn()
    proto = export(model, [x], opset=opset, input_names=['x'])
    want = run_ort(proto, {'x': x.numpy()})[0]
    module = hidet.frontend.from_onnx(proto)
    assert_close(module(hidet.from_torch(x)), want)
    assert_close(want, model(x).detach().numpy())


@pytest.mark.parametrize('opset', [14, 17])  # (torch exports triu from opset 14)
def test_transformer_imperative(opset):
    model, ids = _transformer()
    proto = export(model, [ids], opset=opset, input_names=['ids'])
    want = run_ort(proto, {'ids': ids.numpy()})[0]
    module = hidet.frontend.from_onnx(proto)
    assert_close(module(hidet.from_torch(ids)), want)


@pytest.mark.parametrize('which', ['cnn', 'transformer'])
def test_graph_optimize_build(which):
    model, x = _cnn() if which == 'cnn' else _transformer()
    proto = export(model, [x], opset=17, input_names=['x'])
    want = run_ort(proto, {'x': x.numpy()})[0]
    module = hidet.onnx.from_onnx(proto)
    sym = hidet.symbol(list(x.shape), hidet.graph.tensor.data_type(x.dtype))
    graph = hidet.trace_from(module(sym), [sym])
    # shape subgraphs were evaluated at import: no integer shape arithmetic is left in the graph
    assert all(not out.dtype.is_integer() for n in graph.nodes for out in n.outputs), graph
    optimized = hidet.graph.optimize(graph)
    assert len(optimized.nodes) < len(graph.nodes)
    assert_close(optimized(hidet.from_torch(x)), want)
    compiled = optimized.build()
    assert_close(compiled(hidet.from_torch(x)), want)


@pytest.mark.parametrize('which', ['vit', 'convnext'])
def test_more_export_patterns(which):
    torch.manual_seed(0)
    model, x = (MiniViT(), torch.randn(2, 3, 16, 16)) if which == 'vit' else (ConvNeXtBlock(), torch.randn(2, 16, 8, 8))
    proto = export(model.eval(), [x], opset=17, input_names=['x'])
    want = run_ort(proto, {'x': x.numpy()})[0]
    graph = hidet.graph.optimize(hidet.onnx.from_onnx(proto).flow_graph())
    assert_close(graph(hidet.from_torch(x)), want)


def test_tiny_bert_from_transformers():
    transformers = pytest.importorskip('transformers')
    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                     attn_implementation='eager')
    bert = transformers.BertModel(config).eval()

    class Wrapper(nn.Module):  # positional inputs, one output
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask):
            return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state

    ids, mask = torch.randint(0, config.vocab_size, (1, 16)), torch.ones(1, 16, dtype=torch.int64)
    mask[:, 12:] = 0
    proto = export(Wrapper(), [ids, mask], opset=17, input_names=['ids', 'mask'])
    want = run_ort(proto, {'ids': ids.numpy(), 'mask': mask.numpy()})[0]
    graph = hidet.onnx.from_onnx(proto).flow_graph()
    assert_close(graph(hidet.from_torch(ids), hidet.from_torch(mask)), want)


def test_flow_graph_convenience_and_symbolic_dims():
    model, ids = _transformer()
    proto = export(model, [ids], opset=17, input_names=['ids'], output_names=['logits'],
                   dynamic_axes={'ids': {0: 'batch', 1: 'seq'}})
    module = hidet.onnx.from_onnx(proto)
    with pytest.raises(ValueError, match=r"input 'ids' has a symbolic dimension 0 \('batch'\).*input_shapes"):
        module.flow_graph()
    graph = module.flow_graph(input_shapes={'ids': [2, 12]})
    want = run_ort(proto, {'ids': ids.numpy()})[0]
    assert_close(graph(hidet.from_torch(ids)), want)
    # the override can also be given at import
    graph = hidet.onnx.from_onnx(proto, input_shapes={'ids': [1, 5]}).flow_graph()
    assert graph.inputs[0].shape == (1, 5) and graph.outputs[0].shape == (1, 5, 50)


def test_shape_subgraph_is_folded():
    """Shape → Gather → Unsqueeze → Concat → Reshape becomes one reshape with a static shape."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node('Shape', ['x'], ['s']),
        helper.make_node('Gather', ['s', 'i0'], ['d0'], axis=0),
        helper.make_node('Unsqueeze', ['d0', 'ax'], ['d0u']),
        helper.make_node('Concat', ['d0u', 'minus1'], ['shape'], axis=0),
        helper.make_node('Reshape', ['x', 'shape'], ['y']),
        helper.make_node('Relu', ['y'], ['z']),
    ]
    inits = [helper.make_tensor('i0', TensorProto.INT64, [], [0]), helper.make_tensor('ax', TensorProto.INT64, [1], [0]),
             helper.make_tensor('minus1', TensorProto.INT64, [1], [-1])]
    graph = helper.make_graph(nodes, 'g', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info('z', TensorProto.FLOAT, [2, 12])], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    g = hidet.onnx.from_onnx(proto).flow_graph()
    assert [n.task.name for n in g.nodes] == ['reshape', 'relu']
    x = np.random.randn(2, 3, 4).astype(np.float32)
    assert_close(g(hidet.asarray(x)), np.maximum(x.reshape(2, 12), 0))


def test_unsupported_error_lists_everything_before_running():
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node('NonZero', ['x'], ['a']),
        helper.make_node('Unique', ['x'], ['b']),
        helper.make_node('MaxPool', ['x'], ['d'], kernel_shape=[2, 2, 2]),
        helper.make_node('Relu', ['x'], ['e'], foo=1),
        helper.make_node('Custom', ['x'], ['f'], domain='com.example'),
    ]
    graph = helper.make_graph(nodes, 'g', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 1, 4, 4, 4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in 'abdef'])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 18), helper.make_opsetid('com.example', 1)])
    with pytest.raises(hidet.onnx.OnnxUnsupportedError) as info:
        hidet.onnx.from_onnx(proto)
    msg = str(info.value)
    for part in ('NonZero (opset 18)', 'Unique (opset 18)', 'MaxPool (opset 18): 3-D kernel_shape',
                 "Relu (opset 18): attribute 'foo'", "Custom (domain 'com.example')"):
        assert part in msg, msg


def test_old_opset_is_reported():
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g',
                              [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, [2])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 11)])
    with pytest.raises(hidet.onnx.OnnxUnsupportedError, match='model opset 11.*13'):
        hidet.onnx.from_onnx(proto)


def test_load_from_path_and_bytes(tmp_path):
    model, x = _cnn()
    proto = export(model, [x], opset=17)
    path = tmp_path / 'cnn.onnx'
    path.write_bytes(proto.SerializeToString())
    want = run_ort(proto, {proto.graph.input[0].name: x.numpy()})[0]
    for source in (str(path), path, proto.SerializeToString()):
        assert_close(hidet.onnx.from_onnx(source)(hidet.from_torch(x)), want)


def test_missing_onnx_package_is_a_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, 'onnx', None)
    with pytest.raises(ImportError, match='pip install onnx'):
        hidet.onnx.from_onnx('model.onnx')


def test_hidet_imports_without_onnx():
    import subprocess
    import sys

    code = ("import sys; sys.modules['onnx'] = None; import hidet, hidet.onnx, hidet.frontend; "
            "assert callable(hidet.onnx.from_onnx)")
    subprocess.run([sys.executable, '-c', code], check=True)


def test_docs_list_the_registry():
    import os

    from hidet.frontend.onnx.registry import supported_ops_markdown

    doc = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'docs', 'onnx.md')
    with open(doc) as f:
        text = f.read()
    assert supported_ops_markdown() in text, ('docs/onnx.md is out of date; regenerate its table with '
                                              'python -c "from hidet.frontend.onnx.registry import '
                                              'supported_ops_markdown as s; print(s())"')
