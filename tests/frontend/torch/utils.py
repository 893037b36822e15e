import torch

from hidet.cli.models import non_default_parameters  # noqa: F401  (the model tests' weights)
from hidet.torch import hidet_backend


def assert_close(actual, expected, rtol=1e-4, atol=1e-4):
    """Compare (nested) outputs of a compiled model with eager ones."""
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected), (type(actual), type(expected))
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol, atol)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys()
        for k in expected:
            assert_close(actual[k], expected[k], rtol, atol)
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), type(actual)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape and actual.device == expected.device
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    else:
        assert actual == expected


def compile_and_compare(model, *inputs, rtol=1e-4, atol=1e-4, backend='hidet', **compile_kwargs):
    """Compile with ``backend`` (hidet, or a function around hidet's), run on ``inputs`` and on fresh random
    inputs of the same shapes, and compare each with eager. A module's parameters and buffers are drawn away from
    their defaults first."""
    if isinstance(model, torch.nn.Module):
        non_default_parameters(model, inputs)
    compiled = torch.compile(model, backend=backend, **compile_kwargs)
    with torch.no_grad():
        assert_close(compiled(*inputs), model(*inputs), rtol, atol)
        fresh = [torch.randn_like(x) if x.is_floating_point() else x for x in inputs]
        assert_close(compiled(*fresh), model(*fresh), rtol, atol)
    return compiled


class CountingBackend:
    """hidet's backend, counting dynamo's compiles and keeping what it returned."""

    def __init__(self):
        self.compiled = []

    def __call__(self, gm, example_inputs):
        result = hidet_backend(gm, example_inputs)
        self.compiled.append(result)
        return result

    @property
    def builds(self) -> int:
        """Builds of hidet graphs across all of dynamo's compiles."""
        return sum(len(c.compiled_graphs) for c in self.compiled)
