"""The graph layer: tensors, operators, FlowGraph and its optimization passes."""
from .creation import *  # noqa: F401,F403
from .tensor import Tensor, from_dlpack, from_numpy, from_torch
from . import ops
from .flow_graph import FlowGraph, symbol, symbol_like, trace_from
from .transforms import PassContext, optimize
