"""Each frontend test starts from a clean dynamo cache, default dynamo_config settings and the
default operator registry."""
import pytest
import torch

from hidet.frontend.torch import default_registry, dynamo_config


@pytest.fixture(autouse=True)
def clean_frontend_state():
    torch._dynamo.reset()
    saved = default_registry.copy()
    dynamo_config.reset()
    yield
    default_registry.restore(saved)
    dynamo_config.reset()
    torch._dynamo.reset()
