"""hidet's logs: standard ``logging`` loggers under ``hidet``, silent by default (warnings stay warnings).

    HIDET_LOGS=graph,+fusion python app.py       # or, in Python: hidet.utils.logs.set_logs('graph,+fusion')

Each entry names a component; ``name`` logs it at INFO, ``+name`` at DEBUG (more detail), ``-name`` turns it
off; ``all`` / ``+all`` every component. As TORCH_LOGS, in spirit. The components:
"""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Dict, Iterator

COMPONENTS = {
    'frontend': 'the fx graphs torch.compile hands to hidet, and the compile-time breakdown of each',
    'graph': 'the graph each pass receives and what it changed (nodes, time; DEBUG: the graph after it)',
    'fusion': 'the fused groups: how many kernels (DEBUG: the operators of each)',
    'build': 'the kernel chosen for each task: template and config (default or tuned) or the auto-scheduler, '
             'and the build time by stage (sources, compile, load)',
    'tuning': 'candidates timed per task and the one chosen',
    'cache': 'kernel-cache hits and misses',
}
__doc__ += '\n'.join(f'    {name:9s} {text}' for name, text in COMPONENTS.items()) + '\n'

_HANDLER_TAG = '_hidet_logs'  # marks the handler set_logs attaches to the 'hidet' logger


def logger(component: str) -> logging.Logger:
    """The logger of one of COMPONENTS (``hidet.<component>``)."""
    if component not in COMPONENTS:
        raise ValueError(f'unknown log component {component!r}; choose from {", ".join(COMPONENTS)}')
    return logging.getLogger(f'hidet.{component}')


def set_logs(spec: str) -> None:
    """Switch components on or off from a spec such as ``'graph,+fusion,-cache'`` (see the module's
    docstring); an empty spec changes nothing. Messages go to stderr as ``[hidet.fusion] ...``."""
    entries = [e.strip() for e in spec.split(',') if e.strip()]
    if not entries:
        return
    levels: Dict[str, int] = {}
    for entry in entries:
        sign, name = (entry[0], entry[1:]) if entry[0] in '+-' else ('', entry)
        level = {'+': logging.DEBUG, '-': logging.WARNING, '': logging.INFO}[sign]
        if name == 'all':
            levels.update({c: level for c in COMPONENTS})
        elif name in COMPONENTS:
            levels[name] = level
        else:
            raise ValueError(f'HIDET_LOGS: unknown component {name!r} in {spec!r}; choose from all, '
                             f'{", ".join(COMPONENTS)} (prefix + for more detail, - for none)')
    root = logging.getLogger('hidet')
    if not any(getattr(h, _HANDLER_TAG, False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter('[%(name)s] %(message)s'))
        setattr(handler, _HANDLER_TAG, True)
        root.addHandler(handler)
        root.propagate = False  # (one copy of each line, whatever the application's root logger does)
    for name, level in levels.items():
        logger(name).setLevel(level)


class StageTimes:
    """Wall time per named stage, accumulated (``with times.stage('compile'): ...``), for a breakdown line."""

    def __init__(self):
        self.seconds: Dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def text(self) -> str:
        total = sum(self.seconds.values())
        parts = ', '.join(f'{name} {s:.2f} s' for name, s in self.seconds.items())
        return f'{total:.2f} s: {parts}'
