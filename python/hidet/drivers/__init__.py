"""Drivers: Task → built kernel library (through the kernel cache) → CompiledModule."""
from .build_task import build_task, build_tasks
