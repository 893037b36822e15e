"""Tuning at build time: which config of a template each task runs.

Level 0 takes the template's default. Levels 1 and 2 compile the candidates of every task still untuned in
parallel (one ``build_libraries`` call; a template with ``candidates_source`` puts up to BUNDLE_MAX of them
in one library), then benchmark each task's candidates on its target (CUDA events on
the GPU, wall clock on the CPU; a progress bar ``Finding the best candidates for <task> <shapes>``) and store
the winner in the cache (``<cache_dir>/tuning/``, keyed by the task, target, arch, template, level, options
and hidet's version), so a second build of the same task tunes nothing. A line on stderr says how long the
compiling and the timing took.

A task's candidates run on the same random inputs (a Trial), and each one's outputs must agree with those of
the first candidate that ran (the default, at the front of every space): one that computes something else —
a kernel bug — is dropped with a warning instead of winning on speed.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import sys
import time
import warnings
from typing import Callable, List, Optional, Sequence, Tuple

import hidet.option
from hidet.backend import cache
from hidet.backend.compiler import cuda_arch
from hidet.ir.task import Task
from hidet.option import Options
from hidet.runtime.compiled_module import CompiledModule
from hidet.runtime.cuda import current_device
from hidet.utils import logs
from hidet.utils.benchmark import benchmark_func
from hidet.version import __version__

# benchmark(task, library path, target, trial, entry) -> milliseconds per call of the library's entry (math.inf
# when the candidate cannot run; WrongResults when it disagrees with the trial's reference)
Benchmark = Callable[[Task, str, str, 'Trial', str], float]
BUNDLE_MAX = 4  # tuning candidates per library (templates that bundle them: see templates.Template)
AGREE_RTOL = 2e-2  # outputs agree within this fraction of the reference's largest magnitude (elementwise)
AGREE_STRAY = 1e-5  # and are NaN or infinite at the same elements but this fraction


def tuning_key(task: Task, target: str, template, level: int, options: Options) -> str:
    arch = cuda_arch(options) if target == 'cuda' else 'cpu'
    digest = hashlib.sha256()
    for part in (task.text(), target, arch, template.name, str(level), options.cache_key(), __version__):
        data = part.encode()
        digest.update(len(data).to_bytes(8, 'little') + data)
    return digest.hexdigest()


class Trial:
    """The candidates of one task at work: the same random inputs for all (floats random, integers zero: always
    valid as indices), outputs preset to NaN (a kernel that leaves elements unwritten shows), and the outputs
    of the first candidate that ran, which the others must agree with."""

    def __init__(self, task: Task, target: str):
        import hidet

        self.task, self.device = task, 'cuda' if target == 'cuda' else 'cpu'
        self.inputs = [hidet.randn(list(t.shape), dtype=t.dtype.name, device=self.device) if t.dtype.is_float()
                       else hidet.zeros(list(t.shape), dtype=t.dtype.name, device=self.device) for t in task.inputs]
        self.reference = None  # the first candidate's outputs (numpy arrays)

    def run(self, launch):
        """Launch once on fresh NaN outputs; the outputs (numpy arrays) and the arguments, for timing."""
        import hidet

        outs = [hidet.full(list(t.shape), math.nan if t.dtype.is_float() else 0, dtype=t.dtype.name,
                           device=self.device) for t in self.task.outputs]
        args = self.inputs + outs
        launch(*args)
        if self.device == 'cuda':
            hidet.cuda.synchronize()
        return [o.to('float32', 'cpu').numpy().astype('float64') for o in outs], args  # (numpy has no bfloat16)

    def disagreement(self, outputs) -> str:
        """'' when a candidate's ``outputs`` agree with the reference (the first become it), else how they
        differ: NaN or infinite in one and not the other at more than AGREE_STRAY of the elements (an output
        left unwritten stays NaN; a value at an edge, an overflow or the square root of ~0, may round either
        way), or a value finite in both further from the reference's than AGREE_RTOL of its largest."""
        import numpy as np

        if self.reference is None:
            self.reference = outputs
            return ''
        for i, (want, got) in enumerate(zip(self.reference, outputs)):
            stray = int(np.count_nonzero(np.isnan(want) != np.isnan(got)) +
                        np.count_nonzero(np.isinf(want) != np.isinf(got)))
            if stray > AGREE_STRAY * want.size:
                return (f'output {i} is NaN or infinite at {stray} elements where the first candidate\'s is not, or '
                        'the reverse')
            both = np.isfinite(want) & np.isfinite(got)
            if both.any():
                scale = float(np.abs(want[both]).max())
                diff = float(np.abs(want[both] - got[both]).max())
                if diff > AGREE_RTOL * scale:
                    return (f'output {i} differs from the first candidate\'s by up to {diff:.4g} (values up to '
                            f'{scale:.4g})')
        return ''


CUDA_TIMED_CALLS = 20  # launches per CUDA graph when timing a CUDA candidate


def bundle_size(candidates: int, options: Options) -> int:
    """Candidates compiled in one library: a CUDA library's fixed cost (headers, host code: ~1.6 s of the 2.4 s
    of a wgmma candidate with nvcc 13 here) is paid once per library, while enough libraries remain to keep
    every build worker busy; at most BUNDLE_MAX."""
    return max(1, min(BUNDLE_MAX, candidates // cache.build_workers(options)))


class WrongResults(Exception):
    """A candidate's outputs disagree with the reference candidate's."""


def benchmark_library(task: Task, path: str, target: str, trial: Trial = None, entry: str = 'launch', warmup: int = 2,
                      number: int = 5, repeat: int = 5) -> float:
    """Median milliseconds per call of the library's ``entry`` on the task's shapes (on the GPU: replays of a
    CUDA graph of CUDA_TIMED_CALLS launches, the kernel's time without the host's; on the CPU: wall clock),
    after one call whose outputs must agree with the ``trial``'s reference (else
    WrongResults); math.inf when the candidate cannot run."""
    trial = trial or Trial(task, target)
    launch = CompiledModule(path)[entry]
    try:
        outputs, args = trial.run(launch)
    except Exception:  # noqa: BLE001 - a candidate that fails to launch (e.g. too much shared memory) loses
        return math.inf
    why = trial.disagreement(outputs)
    if why:
        raise WrongResults(why)
    if trial.device == 'cuda':  # the GPU's time alone: host launches would hide a few-µs kernel's own
        return launch.time(*args, device=current_device(), calls=CUDA_TIMED_CALLS, repeat=repeat)
    return benchmark_func(lambda: launch(*args), warmup=warmup, number=number, repeat=repeat, device=trial.device)


def choose_configs(items: Sequence[Tuple[Task, str, object]], level: int,
                   benchmark: Optional[Benchmark] = None, *, options: Optional[Options] = None) -> List[object]:
    """The config each (task, target, template) runs at search level ``level`` (``options``: where results are
    cached, how candidates build; without them, the current ones)."""
    options = hidet.option.resolve(options)
    level = hidet.option.search_level(level)
    chosen: List[object] = [None] * len(items)
    pending = []  # (index, key, candidates)
    for i, (task, target, template) in enumerate(items):
        if level == 0:
            chosen[i] = template.space(0)[0]
            continue
        key = tuning_key(task, target, template, level, options)
        record = cache.load_tuning(key, options)
        config = template.config_from_json(record['config']) if record and 'config' in record else None
        if config is not None:
            chosen[i] = config
            logs.logger('tuning').debug('%s: tuned before (level %d): %s', template.title, level, record['config'])
            continue
        candidates = template.space(level)
        if len(candidates) == 1:
            chosen[i] = candidates[0]
            _store(key, task, template, level, candidates, [0.0], 0, options)
            continue
        pending.append((i, key, candidates))
    if not pending:
        return chosen
    # compile every candidate of every untuned task at once: (library job, entry) per candidate
    jobs, where = [], []
    size = bundle_size(sum(len(c) for _, _, c in pending), options)
    for i, key, candidates in pending:
        task, target, template = items[i]
        for start in range(0, len(candidates), size):
            group = candidates[start:start + size]
            source = template.candidates_source(group) if len(group) > 1 else None
            if source is None:
                where += [(len(jobs) + j, 'launch') for j in range(len(group))]
                jobs += [(template.source(c, fallback=False), target, f'{task.name} candidate') for c in group]
            else:
                where += [(len(jobs), f'launch_{j}') for j in range(len(group))]
                jobs.append((source, target, f'{task.name} candidates'))
    t0 = time.perf_counter()
    paths = cache.build_libraries(jobs, options)
    compiled_s = time.perf_counter() - t0
    libraries = iter((paths[job], entry) for job, entry in where)
    benchmark = benchmark or benchmark_library
    from tqdm import tqdm

    for i, key, candidates in pending:
        task, target, template = items[i]
        latencies, trial = [], Trial(task, target)
        for c in tqdm(candidates, desc=f'Finding the best candidates for {template.title}', leave=False):
            path, entry = next(libraries)
            try:
                latencies.append(benchmark(task, path, target, trial, entry))
            except WrongResults as e:
                latencies.append(math.inf)
                warnings.warn(f'hidet: tuning candidate {template.config_to_json(c)} of {template.name} for '
                              f'{template.title} computes different results ({e}); it is not used. This is a bug in '
                              "hidet's kernel templates: please report it with this message.")
        best = min(range(len(candidates)), key=lambda j: latencies[j])
        if math.isinf(latencies[best]):
            raise RuntimeError(f'no candidate of {template.name} could run {template.title}')
        chosen[i] = candidates[best]
        _store(key, task, template, level, candidates, latencies, best, options)
        log = logs.logger('tuning')
        log.info('%s: %d candidates, chose %s (%.4f ms; the default %.4f ms)', template.title, len(candidates),
                 template.config_to_json(candidates[best]), latencies[best], latencies[0])
        if log.isEnabledFor(logging.DEBUG):
            for c, t in sorted(zip(candidates, latencies), key=lambda ct: ct[1]):
                log.debug('  %.4f ms  %s', t, template.config_to_json(c))
    timed_s = time.perf_counter() - t0 - compiled_s
    print(f'hidet: tuned {len(pending)} task(s) at level {level}: {len(where)} candidates compiled in '
          f'{compiled_s:.1f} s ({len(jobs)} libraries), run and timed in {timed_s:.1f} s', file=sys.stderr)
    return chosen


def _store(key: str, task: Task, template, level: int, candidates, latencies, best: int, options: Options) -> None:
    record = {
        'task': task.name, 'title': template.title, 'template': template.name, 'level': level,
        'config': template.config_to_json(candidates[best]), 'latency_ms': latencies[best],
        'candidates': [{'config': template.config_to_json(c), 'latency_ms': (None if math.isinf(t) else t)}
                       for c, t in zip(candidates, latencies)],
        'hidet': __version__, 'time': time.strftime('%Y-%m-%d %H:%M:%S'),
    }
    json.dumps(record)  # fail here, not half-way through a write
    cache.store_tuning(key, record, options)
