"""The examples build and run against the installed package."""
import os
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


def _run_c_example(tmp_path, device: str) -> str:
    from hidet.backend.compiler import include_dir, lib_dir as runtime_lib_dir

    exe = str(tmp_path / 'runtime_info')
    lib_dir = runtime_lib_dir()
    subprocess.run(['cc', os.path.join(ROOT, 'examples', 'cpp', 'runtime_info.c'), '-I', include_dir(),
                    '-L', lib_dir, '-lhidet_runtime', f'-Wl,-rpath,{lib_dir}', '-o', exe], check=True)
    return subprocess.run([exe, device], capture_output=True, text=True, check=True).stdout


def test_cmake_package_builds_the_examples(tmp_path):
    cmake_dir = subprocess.run([sys.executable, '-m', 'hidet', '--cmake-dir'], capture_output=True, text=True,
                               check=True).stdout.strip()
    build = tmp_path / 'build'
    subprocess.run(['cmake', '-S', os.path.join(ROOT, 'examples', 'cpp'), '-B', str(build), f'-Dhidet_DIR={cmake_dir}'],
                   check=True, capture_output=True)
    subprocess.run(['cmake', '--build', str(build)], check=True, capture_output=True)
    out = subprocess.run([str(build / 'runtime_info'), 'cpu'], capture_output=True, text=True, check=True).stdout
    assert 'round trip through cpu memory: ok' in out


def test_c_example_without_python(tmp_path):
    out = _run_c_example(tmp_path, 'cpu')
    assert 'round trip through cpu memory: ok' in out


@pytest.mark.cuda
def test_c_example_on_cuda(tmp_path):
    assert 'round trip through cuda:0 memory: ok' in _run_c_example(tmp_path, 'cuda')
