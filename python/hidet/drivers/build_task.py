"""Task → CompiledModule: schedule, generate source, build through the on-disk cache, load.

Loaded modules are memoized per process by (task text, target, options), so an operator called
again with the same shapes reuses its kernel without hashing sources or touching the disk.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import hidet.option
from hidet.backend.cache import build_libraries
from hidet.backend.codegen import generate
from hidet.ir.schedulers import schedule_task
from hidet.ir.task import Task
from hidet.runtime.compiled_module import CompiledModule


class _LoadedModules:
    """The process's loaded kernel libraries (a library stays loaded for the life of the process)."""

    modules: Dict[Tuple[str, str, str], CompiledModule] = {}


def _memo_key(task: Task, target: str) -> Tuple[str, str, str]:
    return task.key(), target, hidet.option.current().cache_key()


def build_tasks(jobs: Sequence[Tuple[Task, str]]) -> List[CompiledModule]:
    """Build (in parallel, with a progress bar when several compile) and load a module per (task, target)."""
    keys = [_memo_key(task, target) for task, target in jobs]
    missing = {k: job for k, job in zip(keys, jobs) if k not in _LoadedModules.modules}
    if missing:
        sources = [(generate(schedule_task(task, target)), target, task.name) for task, target in missing.values()]
        paths = build_libraries(sources)
        for key, path in zip(missing, paths):
            _LoadedModules.modules[key] = CompiledModule(path)
    return [_LoadedModules.modules[k] for k in keys]


def build_task(task: Task, target: str) -> CompiledModule:
    return build_tasks([(task, target)])[0]
