"""The runtime's Python face: thin wrappers over the C++ runtime (hidet._C)."""
from hidet._C import HidetRuntimeError, OutOfMemoryError

from . import cuda, memory
from .compiled_module import CompiledFunction, CompiledModule, load_compiled_module
from .device import Device, device
from .memory import empty_cache, memory_stats
