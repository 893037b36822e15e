"""Tuning at build time: which config of a template each task runs.

Level 0 takes the template's default. Levels 1 and 2 compile the candidates of every task still untuned in
parallel (one ``build_libraries`` call), then benchmark each task's candidates on its target (CUDA events on
the GPU, wall clock on the CPU; a progress bar ``Finding the best candidates for <task> <shapes>``) and store the winner in the cache
(``<cache_dir>/tuning/``, keyed by the task, target, arch, template, level, options and hidet's version), so
a second build of the same task tunes nothing.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Callable, List, Optional, Sequence, Tuple

import hidet.option
from hidet.backend import cache
from hidet.ir.task import Task
from hidet.version import __version__

# benchmark(task, library path, target) -> milliseconds per launch (math.inf when the candidate cannot run)
Benchmark = Callable[[Task, str, str], float]


def tuning_key(task: Task, target: str, template, level: int) -> str:
    from hidet.backend.compiler import cuda_arch

    options = hidet.option.current()
    arch = cuda_arch(options) if target == 'cuda' else 'cpu'
    digest = hashlib.sha256()
    for part in (task.text(), target, arch, template.name, str(level), options.cache_key(), __version__):
        data = part.encode()
        digest.update(len(data).to_bytes(8, 'little') + data)
    return digest.hexdigest()


def _inputs(task: Task, device: str):
    """Arguments of a trial launch: random floats, zero integers (always valid as indices)."""
    import hidet

    args = []
    for t in task.inputs:
        if t.dtype.is_float():
            args.append(hidet.randn(list(t.shape), dtype=t.dtype.name, device=device))
        else:
            args.append(hidet.zeros(list(t.shape), dtype=t.dtype.name, device=device))
    for t in task.outputs:
        args.append(hidet.empty(list(t.shape), dtype=t.dtype.name, device=device))
    return args


def benchmark_library(task: Task, path: str, target: str, warmup: int = 2, number: int = 5, repeat: int = 5) -> float:
    """Median milliseconds per launch of the library's ``launch`` on the task's shapes (on the GPU: CUDA
    events; on the CPU: wall clock)."""
    from hidet.runtime.compiled_module import CompiledModule
    from hidet.utils.benchmark import benchmark_func

    device = 'cuda' if target == 'cuda' else 'cpu'
    args = _inputs(task, device)
    launch = CompiledModule(path)['launch']
    try:
        launch(*args)
        return benchmark_func(lambda: launch(*args), warmup=warmup, number=number, repeat=repeat, device=device)
    except Exception:  # noqa: BLE001 - a candidate that fails to launch (e.g. too much shared memory) loses
        return math.inf


def choose_configs(items: Sequence[Tuple[Task, str, object]], level: int,
                   benchmark: Optional[Benchmark] = None) -> List[object]:
    """The config each (task, target, template) runs at search level ``level``."""
    if level not in (0, 1, 2):
        raise ValueError(f'search space must be 0, 1 or 2, got {level!r}')
    chosen: List[object] = [None] * len(items)
    pending = []  # (index, key, candidates)
    for i, (task, target, template) in enumerate(items):
        if level == 0:
            chosen[i] = template.space(0)[0]
            continue
        key = tuning_key(task, target, template, level)
        record = cache.load_tuning(key)
        config = template.config_from_json(record['config']) if record and 'config' in record else None
        if config is not None:
            chosen[i] = config
            continue
        candidates = template.space(level)
        if len(candidates) == 1:
            chosen[i] = candidates[0]
            _store(key, task, template, level, candidates, [0.0], 0)
            continue
        pending.append((i, key, candidates))
    if not pending:
        return chosen
    # compile every candidate of every untuned task at once
    jobs = []
    for i, key, candidates in pending:
        task, target, template = items[i]
        for c in candidates:
            jobs.append((template.source(c, fallback=False), target, f'{task.name} candidate'))
    paths = iter(cache.build_libraries(jobs))
    benchmark = benchmark or benchmark_library
    from tqdm import tqdm

    for i, key, candidates in pending:
        task, target, template = items[i]
        latencies = []
        for c in tqdm(candidates, desc=f'Finding the best candidates for {template.title}', leave=False):
            latencies.append(benchmark(task, next(paths), target))
        best = min(range(len(candidates)), key=lambda j: latencies[j])
        if math.isinf(latencies[best]):
            raise RuntimeError(f'no candidate of {template.name} could run {template.title}')
        chosen[i] = candidates[best]
        _store(key, task, template, level, candidates, latencies, best)
    return chosen


def _store(key: str, task: Task, template, level: int, candidates, latencies, best: int) -> None:
    record = {
        'task': task.name, 'title': template.title, 'template': template.name, 'level': level,
        'config': template.config_to_json(candidates[best]), 'latency_ms': latencies[best],
        'candidates': [{'config': template.config_to_json(c), 'latency_ms': (None if math.isinf(t) else t)}
                       for c, t in zip(candidates, latencies)],
        'hidet': __version__, 'time': time.strftime('%Y-%m-%d %H:%M:%S'),
    }
    json.dumps(record)  # fail here, not half-way through a write
    cache.store_tuning(key, record)
