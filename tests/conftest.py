"""Test-suite setup: `cuda`-marked tests skip themselves where no GPU is present."""
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
