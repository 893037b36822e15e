"""hidet's options: one frozen dataclass, and the one place that reads environment variables.

Options are resolved once at an API edge and passed down explicitly::

    opts = hidet.option.current()                      # defaults: environment + process defaults
    with hidet.option.context(cuda_arch='sm_90') as o:  # modified options, current in this block
        hidet.backend.build_library(src, 'cuda', 'k')   # an edge: resolve(None) reads current() once
    graph.build(options=opts.replace(num_build_workers=4))  # or given: nothing below reads current()

Precedence, lowest first: the dataclass defaults, environment variables (``ENV_VARS``), process
defaults set by ``set_defaults`` / ``cache_dir(path)``, the innermost ``context`` of this thread.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Dict, Iterator, Optional

DEFAULT_CACHE_DIR = os.path.join('~', '.cache', 'hidet')


def _key_field(default):
    """A field whose value changes what gets built, so it is part of ``Options.cache_key()``."""
    return field(default=default, metadata={'cache_key': True})


@dataclass(frozen=True)
class Options:
    """All of hidet's options. Frozen: derive modified copies with ``replace``."""

    cache_dir: str = DEFAULT_CACHE_DIR  # kernels, tuning results, compiled graphs (DESIGN contract 6)
    cuda_arch: Optional[str] = _key_field(None)  # 'sm_90', 'sm_90a', ...; None: ask the GPU
    # sm_90: kernels launched programmatically dependent on the one before (hidet/kernel/cuda.h: hidet::launch), so
    # their blocks are scheduled while it drains; False launches them serialized (to time kernels apart, or A/B)
    cuda_programmatic_launch: bool = _key_field(True)
    nvcc: Optional[str] = None  # path of nvcc; None: search (see hidet.backend.compiler.find_nvcc)
    cuda_home: Optional[str] = None  # a CUDA toolkit whose bin/nvcc the search tries first (env CUDA_HOME, CUDA_PATH)
    cxx: Optional[str] = None  # the C++ compiler command, flags allowed (env CXX); None: g++
    parallel_build: bool = True  # compile several kernels at once
    num_build_workers: Optional[int] = None  # None: os.cpu_count()
    debug_keep_source: bool = False  # also keep the compilers' intermediate files beside each kernel
    verbose_build: bool = False  # print each compiler command and its output
    logs: str = ''  # which components log, and how much (hidet.utils.logs; env HIDET_LOGS, read at import hidet)

    def __post_init__(self):
        object.__setattr__(self, 'cache_dir', os.path.abspath(os.path.expanduser(os.fspath(self.cache_dir))))
        if self.cuda_arch is not None:
            object.__setattr__(self, 'cuda_arch', normalize_cuda_arch(self.cuda_arch))
        if self.num_build_workers is not None and int(self.num_build_workers) < 1:
            raise ValueError(f'num_build_workers must be at least 1, got {self.num_build_workers}')

    def replace(self, **changes) -> 'Options':
        """A copy with ``changes`` applied; unknown names are a TypeError."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(f'unknown hidet option(s): {", ".join(sorted(unknown))}')
        return dataclasses.replace(self, **changes)

    def cache_key(self) -> str:
        """A stable string of the options that change build results."""
        keyed = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get('cache_key')}
        return json.dumps(keyed, sort_keys=True)


SEARCH_LEVELS = (0, 1, 2)


def search_level(value, name: str = 'search space') -> int:
    """``value`` checked as a search level (0: the templates' defaults; 1: a few candidates; 2: the whole
    space), the one check of it (torch.compile's search_space, FlowGraph.build's space, tuning's level)."""
    if isinstance(value, bool) or value not in SEARCH_LEVELS:
        raise ValueError(f'{name} must be 0, 1 or 2, got {value!r}')
    return int(value)


def normalize_cuda_arch(arch) -> str:
    """'sm_90', 'sm90', '90', 9.0 or 'compute_90a' -> 'sm_90' / 'sm_90a'."""
    text = str(arch).strip().lower()
    m = re.fullmatch(r'(?:sm_?|compute_?)?(\d+)(?:\.(\d))?([af]?)', text)
    if not m:
        raise ValueError(f"invalid CUDA arch {arch!r}: expected e.g. 'sm_90' or 'sm_90a'")
    return f'sm_{m.group(1)}{m.group(2) or ""}{m.group(3)}'


# ---- environment variables: the only place hidet reads them ----

def _env_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ('1', 'true', 'yes', 'on'):
        return True
    if lowered in ('0', 'false', 'no', 'off', ''):
        return False
    raise ValueError(f'environment variable {name}={value!r}: expected 1/0, true/false, yes/no or on/off')


def _env_str(name: str, value: str) -> Optional[str]:
    return value or None


# environment variable -> (option, parser)
ENV_VARS = {
    'HIDET_CACHE_DIR': ('cache_dir', _env_str),
    'HIDET_CUDA_ARCH': ('cuda_arch', _env_str),
    'HIDET_CUDA_PROGRAMMATIC_LAUNCH': ('cuda_programmatic_launch', _env_bool),
    'HIDET_NVCC': ('nvcc', _env_str),
    'HIDET_DEBUG_KEEP_SOURCE': ('debug_keep_source', _env_bool),
    'HIDET_LOGS': ('logs', _env_str),
    # the toolchain's conventional variables (CUDA_HOME wins over CUDA_PATH: later entries override)
    'CUDA_PATH': ('cuda_home', _env_str),
    'CUDA_HOME': ('cuda_home', _env_str),
    'CXX': ('cxx', _env_str),
}


def from_env(environ=None) -> Options:
    """Options with the values of the ``ENV_VARS`` that are set in ``environ`` (default os.environ)."""
    environ = os.environ if environ is None else environ
    values = {}
    for var, (name, parse) in ENV_VARS.items():
        raw = environ.get(var)
        if raw is not None and parse(var, raw) is not None:
            values[name] = parse(var, raw)
    return Options(**values)


# ---- current options ----

_process_defaults: Dict[str, object] = {}  # set only by set_defaults / cache_dir
_defaults_memo = (None, None)  # (env values and process defaults it was computed from, Options)
_local = threading.local()  # per-thread stack of contexts


def _defaults() -> Options:
    global _defaults_memo
    snapshot = (tuple(os.environ.get(v) for v in ENV_VARS), tuple(sorted(_process_defaults.items())))
    seen, opts = _defaults_memo
    if seen != snapshot:
        opts = from_env().replace(**_process_defaults)
        _defaults_memo = (snapshot, opts)
    return opts


def current() -> Options:
    """The options in effect on this thread: the innermost ``context``, else the defaults."""
    stack = getattr(_local, 'stack', None)
    return stack[-1] if stack else _defaults()


def resolve(options: Optional[Options]) -> Options:
    """``options``, or without them the current ones: what an API edge (FlowGraph.build, build_task,
    build_library, the torch backend, the CLI) does once; everything below takes the resolved options as an
    argument and never reads the current ones (tests/test_options_route.py checks it)."""
    return options if options is not None else current()


@contextlib.contextmanager
def context(base: Optional[Options] = None, **changes) -> Iterator[Options]:
    """Make ``base`` (default: ``current()``) with ``changes`` current on this thread within a ``with`` block."""
    opts = (current() if base is None else base).replace(**changes)
    stack = getattr(_local, 'stack', None)
    if stack is None:
        stack = _local.stack = []
    stack.append(opts)
    try:
        yield opts
    finally:
        stack.pop()


def set_defaults(**changes) -> None:
    """Change the process-wide defaults (process state: affects every thread without a ``context``)."""
    Options().replace(**changes)  # validate the names and values
    _process_defaults.update(changes)


def cache_dir(path: str) -> None:
    """Set the process default cache directory (process state, as in the original Hidet API); overrides
    ``HIDET_CACHE_DIR``. Prefer ``context(cache_dir=...)`` for a scoped change."""
    set_defaults(cache_dir=os.fspath(path))


def get_cache_dir() -> str:
    """The cache directory in effect on this thread."""
    return current().cache_dir
