"""resnet50 (torchvision) and BERT (transformers), random weights, exported to ONNX and run through hidet
on CUDA: they match onnxruntime (CPU) and torch."""
import numpy as np
import pytest
import torch

import hidet
import hidet.onnx  # noqa: F401
from onnx_test_utils import export, run_ort


def _close(got, want, tol=2e-3):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    err = np.abs(got - want).max()
    scale = np.abs(want).max()
    assert err <= tol * max(scale, 1.0), f'max abs error {err:.3g} for outputs of magnitude {scale:.3g}'


def run_on_cuda(proto, feeds: dict):
    """The model as an optimized graph on CUDA (kernels built in parallel), run on ``feeds`` node by node
    and as a compiled graph."""
    module = hidet.onnx.from_onnx(proto, input_shapes={k: list(v.shape) for k, v in feeds.items()})
    graph = hidet.graph.optimize(module.flow_graph(device='cuda'))
    hidet.drivers.build_tasks([(n.task, 'cuda') for n in graph.nodes])
    inputs = [hidet.asarray(feeds[name], device='cuda') for name in module.input_names]
    outs = [graph(*inputs), graph.build()(*inputs)]
    return [o[0] if isinstance(o, list) else o for o in outs]


@pytest.mark.cuda
def test_resnet50_cuda():
    tv = pytest.importorskip('torchvision')
    torch.manual_seed(0)
    model = tv.models.resnet50(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    proto = export(model, [x], opset=17, input_names=['x'])
    want = run_ort(proto, {'x': x.numpy()})[0]
    with torch.no_grad():
        _close(want, model(x).numpy())
    for out in run_on_cuda(proto, {'x': x.numpy()}):
        _close(out.cpu().numpy(), want)


class BertWrapper(torch.nn.Module):
    """Positional (input_ids, attention_mask) → last_hidden_state, for the exporter."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state


@pytest.mark.cuda
def test_bert_cuda():
    transformers = pytest.importorskip('transformers')
    torch.manual_seed(0)
    config = transformers.BertConfig(attn_implementation='eager')
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (1, 128))
    mask = torch.ones(1, 128, dtype=torch.int64)
    mask[:, 100:] = 0
    proto = export(BertWrapper(model), [ids, mask], opset=17, input_names=['input_ids', 'attention_mask'])
    feeds = {'input_ids': ids.numpy(), 'attention_mask': mask.numpy()}
    want = run_ort(proto, feeds)[0]
    with torch.no_grad():
        _close(want, model(input_ids=ids, attention_mask=mask).last_hidden_state.numpy())
    for out in run_on_cuda(proto, feeds):
        _close(out.cpu().numpy(), want)
