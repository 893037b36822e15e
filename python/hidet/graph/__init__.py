"""The graph layer: tensors (and later operators, FlowGraph and graph passes)."""
from .creation import *  # noqa: F401,F403
from .tensor import Tensor, from_dlpack, from_numpy, from_torch
from . import ops
