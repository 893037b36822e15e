"""The examples build and run against the installed package."""
import os
import re
import subprocess
import sys

import pytest

import hidet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quickstart_runs():
    out = subprocess.run([sys.executable, os.path.join(ROOT, 'examples', 'quickstart.py')], capture_output=True,
                         text=True, check=True, cwd='/tmp').stdout
    assert "Tensor(shape=(2, 3), dtype='float32'" in out and 'round trip through torch' in out
    assert 'Fused[Matmul, Add]' in out and 'compiled graph matches' in out


def test_seed_spellings_after_a_bare_import():
    """The original Hidet's documents (../shared/seeds) reach these from ``import hidet`` alone."""
    code = """
import hidet
hidet.torch.dynamo_config.search_space(2)
assert hidet.torch.dynamo_config['search_space'] == 2
assert hidet.driver.build_ir_module is hidet.drivers.build_ir_module
assert callable(hidet.graph.frontend.from_onnx) and hidet.frontend.from_onnx is hidet.graph.frontend.from_onnx
import hidet.graph.frontend.torch.registry as old, hidet.frontend.torch.registry as new  # (moved: one module)
assert old is new and old.__spec__.name == 'hidet.frontend.torch.registry'
x = hidet.randn([2, 3])
assert hidet.ops.transpose(x, [1, 0]).shape == (3, 2)
print('ok')
"""
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd='/tmp')
    assert out.returncode == 0 and out.stdout.strip() == 'ok', out.stderr


def test_readme_python_blocks_run_as_written(tmp_path):
    """Every ```python block of README.md, in order, in one fresh process on this machine (the quick start picks
    the GPU only where there is one; the serving snippet writes model.hidet)."""
    import re

    text = open(os.path.join(ROOT, 'README.md')).read()
    blocks = re.findall(r'```python\n(.*?)```', text, re.S)
    assert len(blocks) >= 2
    out = subprocess.run([sys.executable, '-c', '\n'.join(blocks)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert os.path.exists(tmp_path / 'model.hidet')


def test_original_hidet_operator_spellings():
    """The original Hidet's operator spellings beside torch's (docs/graph.md, "Spellings kept")."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    import hidet

    x = hidet.randn([2, 3, 8, 8])
    t = x.torch()
    pairs = [(hidet.ops.sum(x, keep_dim=True, dim=1), t.sum(1, keepdim=True)),
             (hidet.ops.mean(x, axis=[2, 3]), t.mean([2, 3])), (hidet.ops.max(x, dim=-1), t.amax(-1)),
             (hidet.ops.layer_norm(x), F.layer_norm(t, [8])),
             (hidet.ops.layer_norm(x, num_last_dims=2, epsilon=1e-3), F.layer_norm(t, [8, 8], eps=1e-3)),
             (hidet.ops.max_pool2d(x, kernel=2, stride=2), F.max_pool2d(t, 2, 2)),
             (hidet.ops.avg_pool2d(x, kernel=3, stride=1, padding=1), F.avg_pool2d(t, 3, 1, 1)),
             (hidet.ops.transpose(x, [0, 2, 3, 1]), t.permute(0, 2, 3, 1))]
    for got, want in pairs:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match='once'):
        hidet.ops.sum(x, 1, dim=2)


def _run_c_example(tmp_path, device: str) -> str:
    from hidet.backend.compiler import include_dir, lib_dir as runtime_lib_dir

    exe = str(tmp_path / 'runtime_info')
    lib_dir = runtime_lib_dir()
    subprocess.run(['cc', os.path.join(ROOT, 'examples', 'cpp', 'runtime_info.c'), '-I', include_dir(),
                    '-L', lib_dir, '-lhidet_runtime', f'-Wl,-rpath,{lib_dir}', '-o', exe], check=True)
    return subprocess.run([exe, device], capture_output=True, text=True, check=True).stdout


def test_cmake_package_builds_the_examples(examples_build):
    out = subprocess.run([os.path.join(examples_build, 'runtime_info'), 'cpu'], capture_output=True, text=True,
                         check=True).stdout
    assert 'round trip through cpu memory: ok' in out


def _serve(examples_build, tmp_path, device: str, dtype, *flags):
    """A small torch model → artifact (hidet.torch.compile_to_file) → run_model, a C++ program with no
    Python, which checks the artifact's outputs against torch's saved beside it."""
    import torch

    from torch import nn

    import hidet.torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 10))
    model = model.eval().to(device=device, dtype=dtype)
    x = torch.randn(2, 3, 16, 16, device=device, dtype=dtype)
    path = str(tmp_path / 'cnn.hidet')
    hidet.torch.compile_to_file(model, [x], path)
    run = subprocess.run([os.path.join(examples_build, 'run_model'), path, '--repeat', '5', *flags],
                         capture_output=True, text=True)
    return path, run


def test_torch_model_served_from_cpp(examples_build, tmp_path):
    import numpy as np
    import torch

    path, run = _serve(examples_build, tmp_path, 'cpu', torch.float32)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r'input  \w+ +float32\[2, 3, 16, 16\]', run.stdout)
    assert 'output output_0     float32[2, 10]: max abs error' in run.stdout and 'all outputs match' in run.stdout
    assert 'latency: median' in run.stdout

    # A wrong expected output is caught (exit 1), and so is an input file of the wrong size.
    expected = np.fromfile(path + '.example/output_0.bin', np.float32)
    (expected + 1).tofile(path + '.example/output_0.bin')
    run = subprocess.run([os.path.join(examples_build, 'run_model'), path], capture_output=True, text=True)
    assert run.returncode == 1 and 'MISMATCH' in run.stdout and 'outputs differ' in run.stdout
    with open(path + '.example/input_0.bin', 'wb') as f:
        f.write(b'\0' * 12)
    run = subprocess.run([os.path.join(examples_build, 'run_model'), path], capture_output=True, text=True)
    assert run.returncode == 1 and re.search(r"holds 12 bytes; input '\w+' \(float32\[2, 3, 16, 16\]\) takes 6144",
                                             run.stderr)
    # Random inputs: runs, checks nothing.
    run = subprocess.run([os.path.join(examples_build, 'run_model'), path, '--random', '--repeat', '3'],
                         capture_output=True, text=True, check=True)
    assert '(random)' in run.stdout and 'match' not in run.stdout


@pytest.mark.cuda
@pytest.mark.parametrize('flags', [(), ('--cuda-graph',)])
def test_torch_model_served_from_cpp_on_cuda(examples_build, tmp_path, flags):
    import torch

    _, run = _serve(examples_build, tmp_path, 'cuda', torch.float16, *flags)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'on cuda' in run.stdout and 'all outputs match' in run.stdout


def test_c_example_without_python(tmp_path):
    out = _run_c_example(tmp_path, 'cpu')
    assert 'round trip through cpu memory: ok' in out


@pytest.mark.cuda
def test_c_example_on_cuda(tmp_path):
    assert 'round trip through cuda:0 memory: ok' in _run_c_example(tmp_path, 'cuda')
