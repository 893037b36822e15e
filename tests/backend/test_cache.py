"""The on-disk kernel cache: build, load and run; hits without compiling; concurrent builders; errors."""
import multiprocessing
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import hidet
import hidet.option
from hidet.backend import cache
from hidet.backend.cache import build_libraries, build_library
from hidet.backend.compiler import CompilationError

ADD_SOURCE = r'''
#include <hidet/kernel_abi.h>
#include <string>
static thread_local std::string last_error;
HIDET_KERNEL_EXPORT int32_t hidet_kernel_abi_version(void) { return HIDET_KERNEL_ABI_VERSION; }
HIDET_KERNEL_EXPORT const char* hidet_kernel_last_error(void) { return last_error.c_str(); }
HIDET_KERNEL_EXPORT int32_t add(void* const* buffers, int32_t num_buffers, const int64_t* dims,
                                int32_t num_dims, void* stream) {
  if (num_buffers != 3 || num_dims != 1) { last_error = "add takes 3 buffers and 1 dim"; return 1; }
  const float* a = static_cast<const float*>(buffers[0]);
  const float* b = static_cast<const float*>(buffers[1]);
  float* out = static_cast<float*>(buffers[2]);
  const int64_t n = dims[0];
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = EXPR;
  return 0;
}
HIDET_KERNEL_EXPORT const char* hidet_signature_add(void) { return R"({"buffers": [{"dtype": "float32", "shape": ["n"]}, {"dtype": "float32", "shape": ["n"]}, {"dtype": "float32", "shape": ["n"]}], "dims": ["n"]})"; }
'''


def add_source(expr: str = 'a[i] + b[i]') -> str:
    return ADD_SOURCE.replace('EXPR', expr)


def run_add(path: str, n: int = 1000):
    a, b, out = hidet.randn([n]), hidet.randn([n]), hidet.empty([n])
    hidet.runtime.CompiledModule(path)['add'](a, b, out, dims=[n])
    return a.numpy(), b.numpy(), out.numpy()


@pytest.fixture
def cache_dir(tmp_path):
    with hidet.option.context(cache_dir=str(tmp_path)):
        yield tmp_path


def test_build_load_and_run(cache_dir):
    path = build_library(add_source(), 'cpu', 'add')
    entry = os.path.dirname(path)
    key = os.path.basename(entry)
    assert path == os.path.join(str(cache_dir), 'kernels', key[:2], key, 'lib.so') and len(key) == 64
    with open(os.path.join(entry, 'source.cpp')) as f:
        assert f.read() == add_source()
    a, b, out = run_add(path, 100_000)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    assert not [f for f in os.listdir(entry) if '.tmp' in f]  # no temporary file left behind


def test_cache_hit_invokes_no_compiler(cache_dir, monkeypatch):
    path = build_library(add_source(), 'cpu', 'add')

    def no_compiler(*args, **kwargs):
        raise AssertionError(f'a compiler was invoked on a cache hit: {args}')

    monkeypatch.setattr(subprocess, 'run', no_compiler)
    monkeypatch.setattr(subprocess, 'Popen', no_compiler)
    for _ in range(3):  # speed is measured by scripts/bench_build.py, not asserted here
        assert build_library(add_source(), 'cpu', 'add') == path


def test_key_covers_source_target_and_options(cache_dir, tmp_path_factory):
    plain = build_library(add_source(), 'cpu', 'add')
    assert build_library(add_source('a[i] - b[i]'), 'cpu', 'add') != plain
    assert build_library(add_source(), 'cpu', 'another_name') == plain  # the name only labels the entry
    with hidet.option.context(cuda_arch='sm_80'):  # no effect on CPU kernels
        assert build_library(add_source(), 'cpu', 'add') == plain
    other = str(tmp_path_factory.mktemp('other-cache'))
    with hidet.option.context(cache_dir=other):
        assert build_library(add_source(), 'cpu', 'add').startswith(other)


def _build_in_process(cache_dir, source, barrier, results):
    import hidet.option
    from hidet.backend.cache import build_library

    barrier.wait()
    with hidet.option.context(cache_dir=cache_dir):
        results.put(build_library(source, 'cpu', 'add'))


def test_two_processes_build_the_same_kernel(cache_dir):
    ctx = multiprocessing.get_context('spawn')
    barrier, results = ctx.Barrier(2), ctx.Queue()
    source = add_source('a[i] * 3.0f + b[i]')
    procs = [ctx.Process(target=_build_in_process, args=(str(cache_dir), source, barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    paths = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert paths[0] == paths[1]
    a, b, out = run_add(paths[0])
    np.testing.assert_allclose(out, a * 3 + b, rtol=1e-5, atol=1e-6)  # FMA contraction may differ by an ulp
    assert sorted(os.listdir(os.path.dirname(paths[0]))) == ['lib.so', 'lock', 'meta.json', 'source.cpp']


def test_compile_error_shows_message_and_kept_source(cache_dir):
    broken = add_source('a[i] + ;')
    with pytest.raises(CompilationError) as info:
        build_library(broken, 'cpu', 'broken')
    error = info.value
    assert os.path.isfile(error.source_path) and error.source_path.endswith('source.cpp')
    with open(error.source_path) as f:
        assert f.read() == broken
    message = str(error)
    assert 'error' in message and error.source_path in message and '-march=native' in message
    assert not os.path.exists(os.path.join(os.path.dirname(error.source_path), 'lib.so'))


def test_build_libraries_in_parallel(cache_dir, monkeypatch):
    running, most, lock = [0], [0], threading.Lock()
    real_compile = cache.compile_library

    def counting_compile(*args, **kwargs):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.2)
            return real_compile(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(cache, 'compile_library', counting_compile)
    exprs = ['a[i] + b[i]', 'a[i] - b[i]', 'a[i] * b[i]', 'a[i] + 2.0f * b[i]']
    jobs = [(add_source(e), 'cpu', f'k{i}') for i, e in enumerate(exprs)] + [(add_source(exprs[0]), 'cpu', 'again')]
    with hidet.option.context(num_build_workers=4):
        paths = build_libraries(jobs)
    assert most[0] > 1 and len(set(paths)) == 4 and paths[0] == paths[4]
    a, b, out = run_add(paths[2])
    np.testing.assert_allclose(out, a * b, rtol=1e-6)
    calls = []
    monkeypatch.setattr(cache, 'compile_library', lambda *args, **kw: calls.append(args) or real_compile(*args, **kw))
    assert build_libraries(jobs[:2] + [(add_source('a[i] / b[i]'), 'cpu', 'new')])[:2] == paths[:2]
    assert len(calls) == 1  # hits resolved without compiling; only the new one compiled


def test_build_libraries_reports_failure_after_building_the_rest(cache_dir):
    jobs = [(add_source('a[i] +* ;'), 'cpu', 'broken'), (add_source('b[i]'), 'cpu', 'fine')]
    with pytest.raises(CompilationError):
        build_libraries(jobs)
    assert cache.status()['entries'] == 1  # the good one was built and cached


def test_debug_keep_source_keeps_intermediates(cache_dir):
    with hidet.option.context(debug_keep_source=True):
        path = build_library(add_source('a[i] + b[i] + 1.0f'), 'cpu', 'add')
    kept = os.listdir(os.path.join(os.path.dirname(path), 'intermediates'))
    assert any(name.endswith('.ii') for name in kept) and any(name.endswith('.s') for name in kept)


def test_status_and_clear(cache_dir):
    assert cache.status() == {'path': str(cache_dir / 'kernels'), 'entries': 0, 'bytes': 0}
    build_libraries([(add_source(), 'cpu', 'a'), (add_source('b[i]'), 'cpu', 'b')])
    info = cache.status()
    assert info['entries'] == 2 and info['bytes'] > 0
    cache.clear('kernels')
    assert cache.status()['entries'] == 0
    with pytest.raises(ValueError, match='unknown cache kind'):
        cache.clear('everything')


def test_cpu_kernels_read_a_precompiled_header(cache_dir):
    """g++ kernels include hidet/kernel/cpu.h first; it is precompiled once per toolchain into the cache and read
    from there (half of a small kernel's build was parsing it); a header that fails to build is a warning, and
    kernels then parse the header as before."""
    from dataclasses import replace

    from hidet.backend.compiler import precompiles_headers, toolchain

    tc = toolchain('cpu')
    if not precompiles_headers(tc):
        pytest.skip('the C++ compiler is not GCC')
    x = hidet.randn([4, 9])
    np.testing.assert_allclose((hidet.ops.exp(x) + 1.0).numpy(), np.exp(x.numpy()) + 1.0, rtol=1e-5)
    root = cache.precompiled_header_dir(tc, hidet.option.current())
    gch = os.path.join(root, 'hidet', 'kernel', 'cpu.h.gch')
    assert root.startswith(str(cache_dir / 'kernels' / 'pch')) and os.path.getsize(gch) > 0
    built = os.path.getmtime(gch)
    assert cache.precompiled_header_dir(tc, hidet.option.current()) == root and os.path.getmtime(gch) == built
    assert cache.status('kernels')['entries'] == 2  # exp, then add (run one by one); the header is no entry
    broken = replace(tc, flags=tc.flags + ('-fno-such-flag',))
    assert cache.precompiled_header_dir(broken, hidet.option.current()) is None
