"""Test-suite setup: `cuda`-marked tests skip themselves where no GPU is present; the C++ examples
are built once per session for the tests that run them."""
import os
import subprocess
import sys

import pytest

import hidet


def pytest_collection_modifyitems(config, items):
    if hidet.cuda.available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {hidet.cuda.unavailable_reason().split(';')[0]}")
    for item in items:
        if 'cuda' in item.keywords:
            item.add_marker(skip)


def pytest_generate_tests(metafunc):
    # `device` parametrizes over cpu and cuda; the cuda case carries the cuda marker.
    if 'device' in metafunc.fixturenames:
        metafunc.parametrize('device', ['cpu', pytest.param('cuda', marks=pytest.mark.cuda)])


@pytest.fixture(scope='session')
def examples_build(tmp_path_factory) -> str:
    """examples/cpp built as a standalone CMake project against the installed package."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmake_dir = subprocess.run([sys.executable, '-m', 'hidet', '--cmake-dir'], capture_output=True, text=True,
                               check=True).stdout.strip()
    build = tmp_path_factory.mktemp('examples') / 'build'
    subprocess.run(['cmake', '-S', os.path.join(root, 'examples', 'cpp'), '-B', str(build), f'-Dhidet_DIR={cmake_dir}'],
                   check=True, capture_output=True)
    subprocess.run(['cmake', '--build', str(build), '-j', '2'], check=True, capture_output=True)
    return str(build)
