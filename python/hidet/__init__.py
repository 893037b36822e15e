"""hidet: a deep-learning inference compiler for PyTorch.

Quick start::

    import hidet
    a = hidet.randn([2, 3], device='cuda')
    print(a)                      # Tensor(shape=(2, 3), dtype='float32', device='cuda:0') and values
    t = a.torch()                 # zero-copy to torch
"""
import importlib

from . import _C  # the C++ runtime; loads libhidet_runtime.so
from .version import __version__

from . import option, ir, runtime, cuda
from .lang import script, script_module  # Hidet Script (docs/hidet-script.md)
from .ir.dtypes import (
    DataType,
    bfloat16,
    boolean,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)
from .runtime import HidetRuntimeError, OutOfMemoryError
from .runtime.device import Device, device
from .graph import FlowGraph, Tensor, from_dlpack, from_numpy, from_torch, ops, symbol, symbol_like, trace_from
from . import _compat, graph, utils
from .utils import logs as _logs
from .runtime.compiled_graph import CompiledGraph, load_compiled_graph
from .graph.creation import (
    arange,
    asarray,
    empty,
    empty_like,
    full,
    full_like,
    manual_seed,
    ones,
    ones_like,
    randint,
    randint_like,
    randn,
    randn_like,
    zeros,
    zeros_like,
)

_logs.set_logs(option.current().logs)  # HIDET_LOGS
_compat.install()  # the original Hidet's module paths (hidet.graph.frontend...)

# Submodules reached from a bare ``import hidet`` (as the original Hidet's documents do), loaded on first use:
# the torch frontend imports torch, which a user of hidet.ops alone should not pay for, and nothing that
# ``import hidet`` loads imports the build drivers since the kernel templates stopped registering with them;
# ``hidet.driver`` is the original Hidet's name for ``hidet.drivers``.
_LAZY_SUBMODULES = {'torch': 'hidet.torch', 'onnx': 'hidet.onnx', 'frontend': 'hidet.frontend', 'drivers': 'hidet.drivers',
                    'driver': 'hidet.drivers'}


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(_LAZY_SUBMODULES[name])
    raise AttributeError(f"module 'hidet' has no attribute {name!r}")
