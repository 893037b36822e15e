"""hidet.torch.compile_to_file: a torch model to an artifact in one call, loaded back in Python (in a
fresh process too); its example files; and the errors for what an artifact cannot hold."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import hidet
import hidet.torch

from .models import SmallCNN, TransformerBlock


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, tokens, image):
        return {'logits': torch.relu(self.fc(tokens)), 'pooled': self.conv(image).flatten(1).sum(1)}


def test_two_inputs_dict_outputs(tmp_path):
    torch.manual_seed(0)
    model = TwoInputs().eval()
    tokens, image = torch.randn(2, 8), torch.randn(2, 3, 6, 6)
    path = str(tmp_path / 'model.hidet')
    compiled = hidet.torch.compile_to_file(model, [tokens, image], path)
    assert [i.name for i in compiled.inputs] == ['tokens', 'image']
    assert [o.name for o in compiled.outputs] == ['output_0', 'output_1']
    expected = model(tokens, image)
    got = compiled(tokens, image)
    # the outputs in the order of the model's output structure
    torch.testing.assert_close(got[0], expected['logits'], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], expected['pooled'], rtol=1e-5, atol=1e-5)

    # The example beside the artifact: the inputs and the eager outputs, raw bytes.
    example = path + '.example'
    assert sorted(os.listdir(example)) == ['input_0.bin', 'input_1.bin', 'output_0.bin', 'output_1.bin']
    np.testing.assert_array_equal(np.fromfile(f'{example}/input_1.bin', np.float32).reshape(2, 3, 6, 6), image.numpy())
    np.testing.assert_allclose(np.fromfile(f'{example}/output_0.bin', np.float32).reshape(2, 4),
                               expected['logits'].detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize('name', ['cnn', 'transformer'])
def test_fresh_process_loads_and_matches(tmp_path, name):
    torch.manual_seed(0)
    model, x = {'cnn': (SmallCNN(), torch.randn(2, 3, 16, 16)),
                'transformer': (TransformerBlock(), torch.randn(2, 5, 16))}[name]
    model = model.eval()
    path = str(tmp_path / f'{name}.hidet')
    hidet.torch.compile_to_file(model, [x], path, save_example=False)
    assert not os.path.exists(path + '.example')
    x2 = torch.randn_like(x)
    torch.save(x2, tmp_path / 'x.pt')
    script = (f'import torch, hidet; g = hidet.load_compiled_graph({path!r}); '
              f'ys = g.run([torch.load({str(tmp_path / "x.pt")!r})]); torch.save(ys, {str(tmp_path / "y.pt")!r})')
    subprocess.run([sys.executable, '-c', script], check=True, cwd=str(tmp_path))
    with torch.no_grad():
        expected = model(x2)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    torch.testing.assert_close(torch.load(tmp_path / 'y.pt'), expected, rtol=1e-4, atol=1e-4)


def test_options_and_search_space(tmp_path):
    model = nn.Sequential(nn.Linear(16, 16), nn.GELU()).eval()
    x = torch.randn(4, 16)
    compiled = hidet.torch.compile_to_file(model, [x], str(tmp_path / 'm.hidet'), search_space=1,
                                           options={'use_fp16': True})
    # use_fp16: the graph computes in float16 and casts back to the model's dtypes at its edges
    assert compiled.inputs[0].dtype == hidet.float32 and compiled.outputs[0].dtype == hidet.float32
    torch.testing.assert_close(compiled(x), model(x), rtol=2e-2, atol=2e-2)
    with pytest.raises(ValueError, match="unknown hidet option"):
        hidet.torch.compile_to_file(model, [x], str(tmp_path / 'n.hidet'), options={'use_fp17': True})


def test_what_an_artifact_cannot_hold(tmp_path):
    def graph_break(x):
        y = x * 2
        print('a graph break')
        return y + 1

    with pytest.raises(RuntimeError, match='one graph'):
        hidet.torch.compile_to_file(graph_break, [torch.randn(3)], str(tmp_path / 'a.hidet'))

    def unsupported(x):
        return torch.special.i0(x)

    with pytest.raises(NotImplementedError, match='i0'):
        hidet.torch.compile_to_file(unsupported, [torch.randn(3)], str(tmp_path / 'b.hidet'))

    with pytest.raises(TypeError, match='example_inputs must be torch tensors'):
        hidet.torch.compile_to_file(graph_break, [3.0], str(tmp_path / 'c.hidet'))
