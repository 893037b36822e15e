"""hidet.option and the compiler drivers: finding compilers, their flags, CUDA builds without a GPU."""
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import threading

import pytest

import hidet
import hidet.option
from hidet.backend import compiler
from hidet.backend.cache import build_library
from hidet.backend.compiler import CompilerNotFoundError
from hidet.drivers.build_task import task_sources
from tests.graph.ops.matmul_cases import matmul_task

CUDA_SOURCE = r'''
#include <hidet/kernel_abi.h>
#include <cuda_runtime.h>
static const char* last_error = "";
HIDET_KERNEL_EXPORT int32_t hidet_kernel_abi_version(void) { return HIDET_KERNEL_ABI_VERSION; }
HIDET_KERNEL_EXPORT const char* hidet_kernel_last_error(void) { return last_error; }
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
HIDET_KERNEL_EXPORT int32_t add(void* const* buffers, int32_t num_buffers, const int64_t* dims,
                                int32_t num_dims, void* stream) {
  int64_t n = dims[0];
  add_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
      (const float*)buffers[0], (const float*)buffers[1], (float*)buffers[2], n);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) { last_error = cudaGetErrorString(err); return 1; }
  return 0;
}
HIDET_KERNEL_EXPORT const char* hidet_signature_add(void) { return R"({"buffers": [{"dtype": "float32", "shape": ["n"]}, {"dtype": "float32", "shape": ["n"]}, {"dtype": "float32", "shape": ["n"]}], "dims": ["n"]})"; }
'''


def _nvcc_or_skip() -> str:
    try:
        return compiler.find_nvcc()
    except CompilerNotFoundError:
        pytest.skip('nvcc not found')


def _fatbin_entries(data: bytes):
    """(kind, arch) of every entry of the fatbins in a shared object: kind 1 is PTX, 2 is SASS (ELF)."""
    entries, start = [], 0
    while (i := data.find(struct.pack('<I', 0xBA55ED50), start)) >= 0:
        _, _, header_size, fat_size = struct.unpack_from('<IHHQ', data, i)
        offset, end = i + header_size, i + header_size + fat_size
        while offset < end:
            kind, _, entry_header, size = struct.unpack_from('<HHIQ', data, offset)
            entries.append((kind, struct.unpack_from('<I', data, offset + 28)[0]))
            offset += entry_header + size
        start = i + 4
    return entries


# ---- options ----

def test_options_context_nesting(tmp_path):
    base = hidet.option.current()
    with hidet.option.context(cache_dir=str(tmp_path)) as outer:
        assert hidet.option.current() is outer and hidet.option.get_cache_dir() == str(tmp_path)
        with hidet.option.context(cuda_arch='90', verbose_build=True) as inner:
            assert inner.cache_dir == str(tmp_path)  # inherited from the outer context
            assert inner.cuda_arch == 'sm_90' and inner.verbose_build
            seen = []
            thread = threading.Thread(target=lambda: seen.append(hidet.option.current()))
            thread.start()
            thread.join()
            assert seen[0] == base  # contexts are per thread
        assert hidet.option.current() is outer
    assert hidet.option.current() == base
    with pytest.raises(TypeError, match='unknown hidet option'):
        base.replace(no_such_option=1)
    with pytest.raises(Exception):
        base.cache_dir = 'x'  # frozen


def test_options_cache_key_and_arch_names():
    opts = hidet.option.Options()
    assert opts.cache_key() == opts.replace(verbose_build=True, cache_dir='/elsewhere').cache_key()
    assert opts.cache_key() != opts.replace(cuda_arch='sm_80').cache_key()
    for name in ('sm_90', 'sm90', '90', '9.0', 'compute_90'):
        assert hidet.option.normalize_cuda_arch(name) == 'sm_90'
    assert hidet.option.normalize_cuda_arch('sm_90a') == 'sm_90a'
    with pytest.raises(ValueError, match='invalid CUDA arch'):
        opts.replace(cuda_arch='hopper')


def test_options_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv('HIDET_CACHE_DIR', str(tmp_path / 'env'))
    monkeypatch.setenv('HIDET_CUDA_ARCH', 'sm_80')
    monkeypatch.setenv('HIDET_DEBUG_KEEP_SOURCE', 'yes')
    opts = hidet.option.current()
    assert (opts.cache_dir, opts.cuda_arch, opts.debug_keep_source) == (str(tmp_path / 'env'), 'sm_80', True)
    assert hidet.option.current() is opts  # computed once while the environment stays the same
    monkeypatch.setenv('HIDET_CUDA_ARCH', 'sm_90')
    assert hidet.option.current().cuda_arch == 'sm_90'  # re-read when it changes
    monkeypatch.setenv('HIDET_DEBUG_KEEP_SOURCE', 'maybe')
    with pytest.raises(ValueError, match='HIDET_DEBUG_KEEP_SOURCE'):
        hidet.option.current()


def test_process_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(hidet.option, '_process_defaults', {})
    monkeypatch.setenv('HIDET_CACHE_DIR', str(tmp_path / 'env'))
    hidet.option.cache_dir(tmp_path / 'set')
    assert hidet.option.get_cache_dir() == str(tmp_path / 'set')  # beats the environment
    with hidet.option.context(cache_dir=str(tmp_path / 'ctx')):
        assert hidet.option.get_cache_dir() == str(tmp_path / 'ctx')  # a context beats both


# ---- finding compilers ----

def _fake_executable(path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho fake nvcc\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def no_nvcc_anywhere(monkeypatch, tmp_path):
    for var in ('HIDET_NVCC', 'CUDA_HOME', 'CUDA_PATH'):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / 'empty-bin').mkdir()
    monkeypatch.setenv('PATH', str(tmp_path / 'empty-bin'))
    monkeypatch.setattr(compiler, 'SYSTEM_NVCC', str(tmp_path / 'no-cuda' / 'bin' / 'nvcc'))
    monkeypatch.setattr(sys, 'path', [str(tmp_path / 'site')])
    (tmp_path / 'site').mkdir()
    return tmp_path


def test_missing_nvcc_is_a_clear_error(no_nvcc_anywhere):
    with pytest.raises(CompilerNotFoundError) as info:
        compiler.find_nvcc(hidet.option.Options())
    message = str(info.value)
    for expected in ('HIDET_NVCC', '$CUDA_HOME', 'nvcc on PATH', str(no_nvcc_anywhere / 'no-cuda'),
                     str(no_nvcc_anywhere / 'site' / 'nvidia' / 'cuda_nvcc' / 'bin' / 'nvcc'),
                     'pip install nvidia-cuda-nvcc-cu12'):
        assert expected in message
    with pytest.raises(CompilerNotFoundError, match='not an executable'):
        compiler.find_nvcc(hidet.option.Options(nvcc=str(no_nvcc_anywhere / 'nope')))


def test_nvcc_search_order(no_nvcc_anywhere, monkeypatch):
    tmp = no_nvcc_anywhere
    pip_nvcc = _fake_executable(tmp / 'site' / 'nvidia' / 'cuda_nvcc' / 'bin' / 'nvcc')
    assert compiler.find_nvcc(hidet.option.Options()) == pip_nvcc
    system = _fake_executable(tmp / 'no-cuda' / 'bin' / 'nvcc')
    assert compiler.find_nvcc(hidet.option.Options()) == system
    on_path = _fake_executable(tmp / 'empty-bin' / 'nvcc')
    assert compiler.find_nvcc(hidet.option.Options()) == on_path
    monkeypatch.setenv('CUDA_HOME', str(tmp / 'home'))  # (read, as every variable, by hidet.option)
    home = _fake_executable(tmp / 'home' / 'bin' / 'nvcc')
    assert compiler.find_nvcc(hidet.option.current()) == home
    assert compiler.find_nvcc(hidet.option.Options(cuda_home=str(tmp / 'home'))) == home
    chosen = _fake_executable(tmp / 'chosen' / 'nvcc')
    monkeypatch.setenv('HIDET_NVCC', chosen)
    assert compiler.find_nvcc(hidet.option.current()) == chosen


def test_cxx_from_the_options(monkeypatch):
    monkeypatch.setenv('CXX', 'g++ -Wall')
    assert compiler.find_cxx(hidet.option.current())[1:] == ['-Wall']
    assert compiler.find_cxx(hidet.option.Options())[1:] == []  # (g++ alone)
    with pytest.raises(CompilerNotFoundError, match='no-such-cxx'):
        compiler.find_cxx(hidet.option.Options(cxx='no-such-cxx'))


# ---- flags ----

def test_cpu_and_cuda_flags():
    cpu = compiler.toolchain('cpu', hidet.option.Options())
    command = cpu.command('k.cpp', 'k.so')
    for flag in ('-O3', '-march=native', '-fopenmp', '-fPIC', '-shared', '-std=c++17', compiler.include_dir()):
        assert flag in command
    assert cpu.version.splitlines()[0] in compiler.compiler_version(cpu.compiler[0])
    with pytest.raises(ValueError, match='unknown target'):
        compiler.toolchain('tpu')
    _nvcc_or_skip()
    cuda = compiler.toolchain('cuda', hidet.option.Options(cuda_arch='sm_80'))
    command = ' '.join(cuda.command('k.cu', 'k.so'))
    assert 'arch=compute_80,code=sm_80' in command and 'arch=compute_80,code=compute_80' in command
    # an sm_90 GPU gets sm_90a (wgmma), SASS and PTX
    command = ' '.join(compiler.toolchain('cuda', hidet.option.Options(cuda_arch='sm_90')).command('k.cu', 'k.so'))
    assert 'arch=compute_90a,code=sm_90a' in command and 'arch=compute_90a,code=compute_90a' in command
    assert '-lineinfo' in command and '-std=c++17' in command and 'fast_math' not in command
    assert 'release' in compiler.version_line(cuda.version)
    # programmatic dependent launches on sm_90 alone (hidet/kernel/cuda.h: hidet::launch)
    assert '-DHIDET_PROGRAMMATIC_LAUNCH' in command
    assert '-DHIDET_PROGRAMMATIC_LAUNCH' not in ' '.join(cuda.command('k.cu', 'k.so'))
    # unless turned off (HIDET_CUDA_PROGRAMMATIC_LAUNCH=0): serialized launches, built and cached apart
    off = hidet.option.from_env({'HIDET_CUDA_PROGRAMMATIC_LAUNCH': '0'}).replace(cuda_arch='sm_90')
    assert not off.cuda_programmatic_launch and off.cache_key() != hidet.option.Options(cuda_arch='sm_90').cache_key()
    assert '-DHIDET_PROGRAMMATIC_LAUNCH' not in ' '.join(compiler.toolchain('cuda', off).command('k.cu', 'k.so'))


def test_every_kernel_waits_for_the_kernels_before_it_and_launches_through_hidet_launch():
    """A kernel launched programmatically may start while the kernel before it drains: each kernel's first
    statement waits for the grids before it (hidet::dependent_launch_prologue), before any memory access; and every
    launch goes through hidet::launch (the attribute), none through <<<>>>: the matmul template's (Hidet Script,
    TMA) and the auto-scheduler's (a vectorized kernel and its scalar fallback)."""
    with hidet.option.context(cuda_arch='sm_90'):
        task = matmul_task([256, 128], [128, 64])
        relu = hidet.ops.relu(hidet.symbol([64, 128], 'float16', 'cuda')).trace[0].task
        sources = task_sources([(task, 'cuda'), (relu, 'cuda')])
    for source in sources:
        first = re.findall(r'^__global__ void [^\n]*\{\n([^\n]*)', source, flags=re.M)
        assert first and all(line.strip() == 'hidet::dependent_launch_prologue();' for line in first), first
        assert '<<<' not in source and 'hidet::launch(' in source


def test_cpu_kernel_libraries_use_nothing_of_the_cpp_runtime(tmp_path):
    """A CPU kernel library (an OpenMP kernel, a reduction, the matmul template) needs no libstdc++: with it, a
    compiler that links libstdc++ statically (as some toolchains do) put a private copy in each library, whose
    72 KiB exception pool was allocated at each load and never freed, and whose unique symbols pinned it."""
    import torch

    readelf = shutil.which('readelf')
    if readelf is None:
        pytest.skip('no readelf (binutils) to read the libraries')
    with hidet.option.context(cache_dir=str(tmp_path)):
        # (shapes no other test uses: modules already loaded in this process would not be built again here)
        x, w = hidet.from_torch(torch.randn(37, 53)), hidet.from_torch(torch.randn(53, 41))
        hidet.ops.relu(x), hidet.ops.softmax(x, 1), hidet.ops.matmul(x, w)
    _assert_no_cpp_runtime(readelf, tmp_path, 3)


def test_cuda_kernel_libraries_use_nothing_of_the_cpp_runtime(tmp_path):
    """The same for CUDA libraries (compiled, not run): the matmul template's (TMA tensor maps, whose driver entry
    points are cached without a guarded static) and the auto-scheduler's, whose launch stubs nvcc writes."""
    readelf = shutil.which('readelf')
    if readelf is None:
        pytest.skip('no readelf (binutils) to read the libraries')
    _nvcc_or_skip()
    with hidet.option.context(cache_dir=str(tmp_path), cuda_arch='sm_90'):
        task = matmul_task([256, 128], [128, 64])
        relu = hidet.ops.relu(hidet.symbol([37, 53], 'float16', 'cuda')).trace[0].task
        for source in task_sources([(task, 'cuda'), (relu, 'cuda')]):
            build_library(source, 'cuda', 'k')
    _assert_no_cpp_runtime(readelf, tmp_path, 2)


def _assert_no_cpp_runtime(readelf: str, cache_dir, count: int):
    libraries = [os.path.join(d, 'lib.so') for d, _, files in os.walk(cache_dir / 'kernels') if 'lib.so' in files]
    assert len(libraries) >= count
    for lib in libraries:
        dynamic = subprocess.run([readelf, '-dW', '--dyn-syms', lib], capture_output=True, text=True, check=True).stdout
        assert 'libstdc++' not in dynamic and 'GLIBCXX' not in dynamic and 'CXXABI' not in dynamic, lib


def test_cuda_sources_without_bfloat16_skip_its_header(tmp_path):
    """A CUDA source that never names bfloat16 builds with HIDET_NO_BF16 (hidet/kernel/cuda.h then skips
    cuda_bf16.h, a fifth of a small kernel's nvcc time); one that does builds without it, and both compile
    (the auto-scheduler's and a Hidet Script template's float16 kernels, and a bfloat16 one)."""
    _nvcc_or_skip()
    tasks = [(matmul_task([256, 128], [128, 64]), 'cuda')]  # (float16: the tensor-core template)
    tasks += [(hidet.ops.relu(hidet.symbol([37, 53], dtype, 'cuda')).trace[0].task, 'cuda')
              for dtype in ('float16', 'bfloat16')]
    with hidet.option.context(cache_dir=str(tmp_path), cuda_arch='sm_90'):
        sources = task_sources(tasks)
        paths = [build_library(source, 'cuda', 'k') for source in sources]
    defined = []
    for path in paths:
        with open(os.path.join(os.path.dirname(path), 'meta.json')) as f:
            defined.append('-DHIDET_NO_BF16' in json.load(f)['command'])
    assert defined == [True, True, False], defined


def test_cuda_arch_unknown_without_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip('a GPU is visible')
    with pytest.raises(RuntimeError, match='HIDET_CUDA_ARCH'):
        compiler.cuda_arch(hidet.option.Options())


def test_cuda_library_carries_ptx_and_sass(tmp_path):
    _nvcc_or_skip()
    with hidet.option.context(cache_dir=str(tmp_path), cuda_arch='sm_90'):
        path = build_library(CUDA_SOURCE, 'cuda', 'add')
    assert os.path.isfile(path) and os.path.isfile(os.path.join(os.path.dirname(path), 'source.cu'))
    with open(path, 'rb') as f:
        entries = _fatbin_entries(f.read())
    assert (1, 90) in entries and (2, 90) in entries, entries  # PTX and SASS for sm_90
    cuobjdump = '/usr/local/cuda/bin/cuobjdump'
    if os.path.exists(cuobjdump):
        listed = subprocess.run([cuobjdump, '--list-ptx', '--list-elf', path], capture_output=True, text=True).stdout
        assert 'sm_90' in listed and '.ptx' in listed and '.cubin' in listed


@pytest.mark.cuda
def test_cuda_library_for_this_gpu_runs(tmp_path):
    import torch

    _nvcc_or_skip()
    with hidet.option.context(cache_dir=str(tmp_path)):  # the arch comes from the GPU
        assert compiler.cuda_arch() == 'sm_%d%d' % torch.cuda.get_device_capability()
        path = build_library(CUDA_SOURCE, 'cuda', 'add')
    a, b = torch.randn(100_000, device='cuda'), torch.randn(100_000, device='cuda')
    out = torch.empty_like(a)
    hidet.runtime.CompiledModule(path)['add'](a, b, out, dims=[a.numel()])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + b)
