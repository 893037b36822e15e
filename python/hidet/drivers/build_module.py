"""IRModule (a Hidet Script module) → a loaded kernel library whose kernels Python calls with hidet or
torch tensors and Python scalars.

Each exported kernel follows the kernel ABI (cpp/include/hidet/kernel_abi.h): its tensor and pointer
arguments travel in ``buffers`` (by data pointer), its scalar arguments in ``dims``, in parameter order:
integers and bools by value, float32 (and float16/bfloat16, passed as float32) as the bit pattern in the
low 32 bits, float64 as its 64-bit pattern (hidet/kernel/lang.h reads them back).
"""
from __future__ import annotations

import struct
from typing import Dict, List, Optional

from hidet.backend.cache import build_library
from hidet.backend.codegen import generate
from hidet.ir.dtypes import DataType, data_type
from hidet.ir.stmt import Function, IRModule
from hidet.ir.type import TensorMapType
from hidet.option import Options
from hidet.runtime.compiled_module import CompiledFunction, CompiledModule

_LOADED: Dict[str, CompiledModule] = {}
_INT_RANGES = {'int8': 8, 'int16': 16, 'int32': 32, 'int64': 64}


def _pack_scalar(value, dtype: DataType, name: str) -> int:
    if isinstance(value, (bool, int, float)) or hasattr(value, '__index__') or hasattr(value, '__float__'):
        pass
    else:
        raise TypeError(f"argument '{name}' must be a {dtype} scalar, got {type(value).__name__}")
    if dtype.is_boolean():
        return int(bool(value))
    if dtype.is_integer():
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"argument '{name}' must be an integer ({dtype}), got {value!r}")
        v = int(value)
        bits = _INT_RANGES.get(dtype.name)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if bits else (0, (1 << (dtype.bits)) - 1)
        if not lo <= v <= hi:
            raise OverflowError(f"argument '{name}' = {v} does not fit in {dtype}")
        return v
    if dtype.name == 'float64':
        return struct.unpack('<q', struct.pack('<d', float(value)))[0]
    return struct.unpack('<i', struct.pack('<f', float(value)))[0]


def _check_tensor(arg, dtype: DataType, target: str, name: str, kernel: str) -> None:
    if isinstance(arg, int) and not isinstance(arg, bool):
        return  # a raw address
    arg_dtype = getattr(arg, 'dtype', None)
    if arg_dtype is None:
        raise TypeError(f"{kernel}: argument '{name}' must be a tensor, got {type(arg).__name__}")
    if dtype.name != 'void' and data_type(arg_dtype) != dtype:
        raise TypeError(f"{kernel}: argument '{name}' must hold {dtype} values, got a {data_type(arg_dtype)} tensor")
    device = getattr(arg, 'device', None)
    is_cuda = getattr(arg, 'is_cuda', None)
    if is_cuda is None and device is not None:
        is_cuda = str(device).startswith('cuda')
    if is_cuda is not None and bool(is_cuda) != (target == 'cuda'):
        where = 'a CUDA' if target == 'cuda' else 'a CPU'
        raise ValueError(f"{kernel}: argument '{name}' must be on the {'GPU' if target == 'cuda' else 'CPU'} "
                         f"({kernel} is {where} kernel), got a tensor on {device}")


class ScriptKernel:
    """One exported kernel of a built script module: ``kernel(*args, stream=None)`` with arguments in
    parameter order (tensors for tensor and pointer parameters, Python numbers for scalars). The
    default stream is torch's current one for torch CUDA tensors, else hidet's current stream."""

    def __init__(self, compiled: CompiledFunction, func: Function, target: str):
        self._compiled = compiled
        self.name = func.name
        self.target = target
        # (name, is_scalar, dtype) per parameter (but tensor maps: the launch entry builds them)
        self.params = [(p.name, p.type is None, p.dtype) for p in func.params if not isinstance(p.type, TensorMapType)]

    def __call__(self, *args, stream=None) -> None:
        if len(args) != len(self.params):
            names = ', '.join(n for n, _, _ in self.params)
            raise TypeError(f'{self.name}({names}) takes {len(self.params)} arguments, got {len(args)}')
        buffers: List = []
        dims: List[int] = []
        for (name, scalar, dtype), arg in zip(self.params, args):
            if scalar:
                dims.append(_pack_scalar(arg, dtype, name))
            else:
                _check_tensor(arg, dtype, self.target, name, self.name)
                buffers.append(arg)
        self._compiled(*buffers, dims=dims, stream=stream)

    def __repr__(self) -> str:
        params = ', '.join(f"{n}: {d.short_name}{'' if s else '*'}" for n, s, d in self.params)
        return f'ScriptKernel({self.name}({params}), {self.target})'


class BuiltScriptModule:
    """A built and loaded script module: ``module['name']`` (or ``module.name``) is a kernel; the module
    is itself callable when it exports one kernel."""

    def __init__(self, ir_module: IRModule, source: str, path: str, compiled: CompiledModule):
        self.ir_module, self.source, self.path = ir_module, source, path
        by_name = {f.name: f for f in ir_module.functions}
        self.kernels = {name: ScriptKernel(compiled[name], by_name[name], ir_module.target)
                        for name in ir_module.exports}

    def __getitem__(self, name: str) -> ScriptKernel:
        if name not in self.kernels:
            raise KeyError(f"the module has no kernel {name!r}; it exports {', '.join(self.kernels)}")
        return self.kernels[name]

    def __getattr__(self, name: str) -> ScriptKernel:
        kernels = self.__dict__.get('kernels', {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(name)

    def __call__(self, *args, stream=None) -> None:
        if len(self.kernels) != 1:
            raise TypeError(f"the module exports {len(self.kernels)} kernels ({', '.join(self.kernels)}); "
                            "call one of them: module['name'](...)")
        next(iter(self.kernels.values()))(*args, stream=stream)

    def __repr__(self) -> str:
        return f"BuiltScriptModule({self.ir_module.name}, kernels: {', '.join(self.kernels)})"


def build_ir_module(ir_module: IRModule, options: Optional[Options] = None) -> BuiltScriptModule:
    """Generate, compile (through the kernel cache) and load a Hidet Script IRModule (``options``: how it builds;
    without them, the current ones)."""
    if ir_module.exports is None:
        raise ValueError('build_ir_module builds script modules (IRModule with exports); '
                         'tasks build through hidet.drivers.build_task')
    source = generate(ir_module)
    path = build_library(source, ir_module.target, ir_module.name, options)
    if path not in _LOADED:
        _LOADED[path] = CompiledModule(path)
    return BuiltScriptModule(ir_module, source, path, _LOADED[path])
