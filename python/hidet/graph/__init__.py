"""The graph layer: tensors, operators, FlowGraph and its optimization passes."""
import importlib

from .creation import *  # noqa: F401,F403
from .tensor import Tensor, from_dlpack, from_numpy, from_torch
from . import ops
from .flow_graph import FlowGraph, symbol, symbol_like, trace_from
from .transforms import PassContext, optimize


def __getattr__(name):
    # ``hidet.graph.frontend``, the original Hidet's path of the frontends (hidet.frontend since they became a
    # layer of their own: hidet/_compat.py), after a bare ``import hidet``, loaded on first use
    if name == 'frontend':
        return importlib.import_module('hidet.graph.frontend')
    raise AttributeError(f"module 'hidet.graph' has no attribute {name!r}")
