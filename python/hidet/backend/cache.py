"""The on-disk kernel cache (DESIGN contract 6).

A kernel library lives at ``<cache_dir>/kernels/<key[:2]>/<key>/lib.so`` with its source beside it
(``source.cpp`` / ``source.cu``) and a ``meta.json``; the key is the sha256 of the source, the target,
the arch, the compilers' versions, hidet's version and headers, and ``Options.cache_key()``.

A hit is one ``stat``. A miss compiles into a temporary file in the entry's directory and
``os.replace``-s it into place (atomic) while holding an ``fcntl.flock`` on the entry's lock file, so
processes and threads building the same kernel at once compile it once and all get the same path.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Dict, List, Optional, Sequence, Tuple

from hidet import option
from hidet.option import Options
from hidet.utils import logs
from hidet.version import __version__

from .compiler import (PRECOMPILED_HEADER, CompilationError, Toolchain, compile_library, compile_precompiled_header,
                       precompiles_headers, toolchain, version_line)

KINDS = ('kernels', 'tuning')  # compiled graphs will join
LIBRARY = 'lib.so'
TUNING_SUFFIX = '.json'


def kernel_key(source: str, tc: Toolchain, options: Options) -> str:
    """The cache key of ``source`` built with ``tc`` under ``options``."""
    resolved = options.replace(cuda_arch=tc.arch if tc.target == 'cuda' else None)  # None: the GPU's = tc.arch
    digest = hashlib.sha256()
    for part in (source, tc.key(), __version__, resolved.cache_key()):
        data = part.encode()
        digest.update(len(data).to_bytes(8, 'little') + data)
    return digest.hexdigest()


def entry_dir(key: str, options: Options) -> str:
    return os.path.join(options.cache_dir, 'kernels', key[:2], key)


@contextlib.contextmanager
def _locked(path: str):
    with open(path, 'a') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_atomic(path: str, text: str) -> None:
    tmp = f'{path}.tmp{os.getpid()}-{threading.get_ident()}'
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, path)


def precompiled_header_dir(tc: Toolchain, options: Options) -> Optional[str]:
    """The directory holding ``tc``'s precompiled PRECOMPILED_HEADER (``<cache_dir>/kernels/pch/<toolchain digest>``),
    built on first use; None where ``tc`` takes none, or it failed to build (a warning: kernels then parse the
    header, as without one)."""
    if not precompiles_headers(tc) or options.debug_keep_source:
        return None
    root = os.path.join(options.cache_dir, 'kernels', 'pch', hashlib.sha256(tc.key().encode()).hexdigest()[:24])
    gch = os.path.join(root, PRECOMPILED_HEADER + '.gch')
    failed = os.path.join(root, 'failed')
    if os.path.exists(gch):
        return root
    os.makedirs(os.path.dirname(gch), exist_ok=True)
    with _locked(os.path.join(root, 'lock')):
        if not os.path.exists(gch) and not os.path.exists(failed):
            tmp = f'{gch}.tmp{os.getpid()}-{threading.get_ident()}'
            try:
                compile_precompiled_header(tc, tmp)
                os.replace(tmp, gch)
            except CompilationError as e:
                logs.logger('build').warning('the precompiled header failed to build; kernels parse the header '
                                             'instead:\n%s', e)
                _write_atomic(failed, str(e))
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
    return root if os.path.exists(gch) else None


def _build_entry(source: str, name: str, tc: Toolchain, key: str, options: Options) -> str:
    """Compile one entry unless another process or thread did meanwhile; return its library path."""
    directory = entry_dir(key, options)
    lib = os.path.join(directory, LIBRARY)
    os.makedirs(directory, exist_ok=True)
    with _locked(os.path.join(directory, 'lock')):
        if os.path.exists(lib):
            return lib
        src = os.path.join(directory, 'source' + tc.suffix)
        _write_atomic(src, source)
        tmp = f'{lib}.tmp{os.getpid()}-{threading.get_ident()}'
        start = time.perf_counter()
        try:
            command = compile_library(tc, src, tmp, options, header_dir=precompiled_header_dir(tc, options))
            os.replace(tmp, lib)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        meta = {'name': name, 'target': tc.target, 'arch': tc.arch, 'compiler': version_line(tc.version),
                'command': [os.path.abspath(lib) if part == os.path.abspath(tmp) else part for part in command],
                'hidet': __version__, 'build_seconds': time.perf_counter() - start}
        _write_atomic(os.path.join(directory, 'meta.json'), json.dumps(meta, indent=2))
    return lib


def build_library(source: str, target: str, name: str, options: Optional[Options] = None) -> str:
    """The path of a shared library built from ``source`` for ``target`` ('cpu' or 'cuda'), from the cache
    when there; ``name`` only labels the entry and messages. Raises CompilationError on failure."""
    return build_libraries([(source, target, name)], options)[0]


def build_libraries(jobs: Sequence[Tuple[str, str, str]], options: Optional[Options] = None) -> List[str]:
    """Paths of the libraries of ``jobs`` ((source, target, name) each), in order. Cache hits are resolved
    first; the missing ones compile in parallel on options.num_build_workers threads, with a progress bar
    when more than one compiles. If some fail, the others still finish, then the first failure is raised.
    An API edge: without ``options``, the current ones (hidet.option)."""
    options = option.resolve(options)
    toolchains = {target: toolchain(target, options) for target in dict.fromkeys(job[1] for job in jobs)}
    keys, missing = [], {}  # missing: key -> (source, name, toolchain)
    log = logs.logger('cache')
    for source, target, name in jobs:
        tc = toolchains[target]
        key = kernel_key(source, tc, options)
        keys.append(key)
        if key not in missing and not os.path.exists(os.path.join(entry_dir(key, options), LIBRARY)):
            missing[key] = (source, name, tc)
            log.debug('miss %s (%s): compiling', name, key[:16])
        else:
            log.debug('hit %s (%s)', name, key[:16])
    log.info('%d kernel libraries: %d in the cache, %d to compile (%s)', len(jobs), len(jobs) - len(missing),
             len(missing), options.cache_dir)
    if missing:
        _compile_missing(missing, options)
    return [os.path.join(entry_dir(key, options), LIBRARY) for key in keys]


def build_workers(options: Options) -> int:
    """How many kernels compile at once: options.num_build_workers (default: the CPU count), 1 without
    options.parallel_build."""
    return (options.num_build_workers or os.cpu_count() or 1) if options.parallel_build else 1


def _compile_missing(missing: Dict[str, tuple], options: Options) -> None:
    from tqdm import tqdm

    workers = build_workers(options)
    with ThreadPoolExecutor(max_workers=min(workers, len(missing))) as pool:
        futures = {key: pool.submit(_build_entry, source, name, tc, key, options)
                   for key, (source, name, tc) in missing.items()}
        with tqdm(total=len(futures), desc=f'Compiling {len(futures)} kernel libraries', disable=len(futures) <= 1,
                  leave=False) as bar:
            for _ in as_completed(futures.values()):
                bar.update(1)
    errors = [f.exception() for f in futures.values() if f.exception() is not None]
    if errors:  # the first failure in job order, after the other builds finished (and were cached)
        raise errors[0]


def _kind_dir(kind: str, options: Options) -> str:
    if kind not in KINDS:
        raise ValueError(f'unknown cache kind {kind!r}: expected one of {KINDS} or "all"')
    return os.path.join(options.cache_dir, kind)


def tuning_path(key: str, options: Options) -> str:
    """``<cache_dir>/tuning/<key[:2]>/<key>.json``: the tuning result stored under ``key`` (a hex digest of
    everything that changes it: the task, target and arch, the template, the search level, the options)."""
    return os.path.join(options.cache_dir, 'tuning', key[:2], key + TUNING_SUFFIX)


def load_tuning(key: str, options: Options) -> Optional[dict]:
    """The stored tuning result of ``key``, or None (missing or unreadable)."""
    try:
        with open(tuning_path(key, options)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def store_tuning(key: str, record: dict, options: Options) -> str:
    """Write a tuning result atomically; returns its path."""
    path = tuning_path(key, options)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _write_atomic(path, json.dumps(record, indent=2, sort_keys=True))
    return path


def tuning_records(options: Optional[Options] = None) -> List[dict]:
    """Every stored tuning result (unreadable ones skipped), oldest first by their ``time``."""
    options = option.resolve(options)
    records = []
    for root, _, files in os.walk(_kind_dir('tuning', options)):
        for f in files:
            if f.endswith(TUNING_SUFFIX):
                with contextlib.suppress(OSError, ValueError), open(os.path.join(root, f)) as handle:
                    records.append(json.load(handle))
    return sorted(records, key=lambda r: str(r.get('time', '')))


def clear(kind: str = 'kernels', options: Optional[Options] = None) -> None:
    """Remove the cached entries of ``kind`` ('kernels', 'tuning' or 'all') from the cache directory."""
    options = option.resolve(options)
    for k in KINDS if kind == 'all' else (kind,):
        shutil.rmtree(_kind_dir(k, options), ignore_errors=True)


def status(kind: str = 'kernels', options: Optional[Options] = None) -> dict:
    """{'path', 'entries', 'bytes'} of the cached ``kind``: entries counts built libraries (kernels) or
    stored results (tuning)."""
    options = option.resolve(options)
    path = _kind_dir(kind, options)
    entries, size = 0, 0
    for root, _, files in os.walk(path):
        entries += LIBRARY in files if kind == 'kernels' else sum(f.endswith(TUNING_SUFFIX) for f in files)
        for f in files:
            with contextlib.suppress(OSError):
                size += os.path.getsize(os.path.join(root, f))
    return {'path': path, 'entries': entries, 'bytes': size}
