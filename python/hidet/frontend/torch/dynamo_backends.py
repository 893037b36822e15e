"""The original Hidet's name for dynamo_backend.py, which its operator-mapping guide imports; the backend itself
is in dynamo_backend.py."""
from hidet.frontend.torch.dynamo_backend import CompiledFx, hidet_backend  # noqa: F401

__all__ = ['CompiledFx', 'hidet_backend']
