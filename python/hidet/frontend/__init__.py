"""Frontends: models of other frameworks → hidet FlowGraphs (each imports its framework lazily)."""
from .onnx import from_onnx  # noqa: F401
