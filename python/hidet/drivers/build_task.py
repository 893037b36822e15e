"""Task → CompiledModule: pick a schedule (a kernel template, else the auto-scheduler), generate source,
build through the on-disk cache, load.

A task that a kernel template recognizes (hidet.kernels; e.g. a float16 matmul on CUDA, fused prologue
and epilogue included) runs the config chosen at search level ``space`` (hidet.drivers.tuning: level 0 the
template's default, levels 1 and 2 benchmarked at build time and remembered in the cache); any other task
runs the auto-scheduler's kernels.

Loaded modules are memoized per process by (task text, target, options, space), so an operator called
again with the same shapes reuses its kernel without hashing sources or touching the disk.
"""
from __future__ import annotations

import logging
from typing import Dict, List, Optional, Sequence, Tuple

import hidet.option
from hidet.backend.cache import build_libraries
from hidet.backend.codegen import generate
from hidet.backend.compiler import cuda_arch
from hidet.drivers.tuning import choose_configs
from hidet.ir.schedulers import schedule_task
from hidet.ir.task import Task
from hidet.kernels import find as find_template
from hidet.option import Options
from hidet.runtime.compiled_module import CompiledModule
from hidet.utils import logs


class _LoadedModules:
    """The process's loaded kernel libraries (a library stays loaded for the life of the process)."""

    modules: Dict[Tuple[str, str, str, int], CompiledModule] = {}


def _memo_key(task: Task, target: str, space: int, options: Options) -> Tuple[str, str, str, int]:
    return task.key(), target, options.cache_key(), space


def task_sources(jobs: Sequence[Tuple[Task, str]], space: int = 0, options: Optional[Options] = None) -> List[str]:
    """The kernel-library source of each (task, target): a template's at its chosen config, else the
    auto-scheduler's (``options``: without them, the current ones)."""
    options = hidet.option.resolve(options)
    arch = _cuda_arch(options) if any(target == 'cuda' for _, target in jobs) else None
    found = [find_template(task, target, arch) if target != 'cuda' or arch else None for task, target in jobs]
    points = [t.points(task, target) if t is not None else [] for (task, target), t in zip(jobs, found)]
    tuned = [p for ps in points for p in ps]
    configs = iter(choose_configs(tuned, space, options=options) if tuned else [])
    log = logs.logger('build')
    sources = []
    for (task, target), t, ps in zip(jobs, found, points):
        if t is None:
            log.debug('%s (%s): auto-scheduler', task.name, target)
            sources.append(generate(schedule_task(task, target)))
            continue
        chosen = [next(configs) for _ in ps]
        if log.isEnabledFor(logging.DEBUG):
            how = 'default' if space == 0 else f'tuned at level {space}'
            names = ', '.join(c.name() if callable(getattr(c, 'name', None)) else str(c) for c in chosen)
            log.debug('%s (%s): template %s, %s (%s)', task.name, target, t.name, names, how)
        sources.append(t.source_of(chosen))
    return sources


def _cuda_arch(options: Options) -> Optional[str]:
    """The options' CUDA arch (or the GPU's); None without one (no GPU, none set: CUDA tasks then take the
    auto-scheduler's source, whose build says how to set it)."""
    try:
        return cuda_arch(options)
    except RuntimeError:
        return None


def build_tasks(jobs: Sequence[Tuple[Task, str]], space: int = 0, options: Optional[Options] = None
                ) -> List[CompiledModule]:
    """Build (in parallel, with a progress bar when several compile) and load a module per (task, target).
    An API edge: without ``options``, the current ones (hidet.option), read once."""
    options = hidet.option.resolve(options)
    keys = [_memo_key(task, target, space, options) for task, target in jobs]
    missing = {k: job for k, job in zip(keys, jobs) if k not in _LoadedModules.modules}
    if missing:
        jobs_missing = list(missing.values())
        times = logs.StageTimes()
        with times.stage('sources (scheduling, tuning)'):
            sources = [(src, target, task.name)
                       for src, (task, target) in zip(task_sources(jobs_missing, space, options), jobs_missing)]
        with times.stage('compile'):
            paths = build_libraries(sources, options)
        with times.stage('load'):
            for key, path in zip(missing, paths):
                _LoadedModules.modules[key] = CompiledModule(path)
        logs.logger('build').info('%d tasks built in %s', len(jobs_missing), times.text())
    return [_LoadedModules.modules[k] for k in keys]


def build_task(task: Task, target: str, space: int = 0, options: Optional[Options] = None) -> CompiledModule:
    return build_tasks([(task, target)], space, options)[0]
