"""Drivers: Task → built kernel library (through the kernel cache) → CompiledModule; Hidet Script
IRModule → built script module (build_ir_module)."""
from .build_module import build_ir_module
from .build_task import build_task, build_tasks
