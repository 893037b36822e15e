"""Hidet Script: CUDA and CPU kernels written as Python functions (docs/hidet-script.md).

    from hidet.lang import attr, f32, i32
    from hidet.lang.cuda import threadIdx, blockIdx

Types: scalars ``f16 bf16 f32 f64 i8 i16 i32 i64 u8 boolean``; ``f32[m, n]`` a row-major tensor (a
parameter passed by address, or a register tensor when declared ``acc: f32[4, 4]``); ``~f32`` a pointer.
"""
from hidet.ir.dtypes import (bf16, bfloat16, boolean, f16, f32, f64, float16, float32, float64, i8, i16, i32, i64,
                             int8, int16, int32, int64, u8, uint8)
from hidet.ir.type import PointerType, TensorType, void

from . import cuda, math
from .attr import attr
from .constructs import cast, grid, register_tensor, unroll, view
from .script import ScriptModule, macro, script, script_module
from .transpiler import HidetScriptError

attrs = attr  # the spelling of the original Hidet

__all__ = ['attr', 'attrs', 'script', 'script_module', 'macro', 'ScriptModule', 'HidetScriptError', 'cuda', 'math',
           'grid', 'unroll', 'view', 'cast', 'register_tensor', 'PointerType', 'TensorType', 'void', 'f16', 'bf16',
           'f32', 'f64', 'i8', 'i16', 'i32', 'i64', 'u8', 'boolean', 'float16', 'bfloat16', 'float32', 'float64',
           'int8', 'int16', 'int32', 'int64', 'uint8']
