"""Compiler drivers: g++ for CPU kernel libraries, nvcc for CUDA ones (DESIGN contracts 1, 2, 5).

A ``Toolchain`` is everything about the compiler that changes what gets built — the command, the
compilers' version output and the arch — resolved once from ``Options`` and hashed into the cache key.
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import List, Optional, Tuple

from hidet import _C, option
from hidet.option import Options, normalize_cuda_arch

TARGETS = ('cpu', 'cuda')
SYSTEM_NVCC = '/usr/local/cuda/bin/nvcc'
# where the PyPI packages put nvcc inside site-packages: nvidia-cuda-nvcc-cu12, and CUDA 13's nvidia-cuda-nvcc
PIP_NVCC_PATHS = (('nvidia', 'cuda_nvcc', 'bin', 'nvcc'), ('nvidia', 'cu13', 'bin', 'nvcc'))
OUTPUT_LIMIT = 4000  # characters of compiler output kept in a CompilationError


class CompilerNotFoundError(RuntimeError):
    """No compiler for a target could be found."""


class CompilationError(RuntimeError):
    """A compiler failed. Carries the command, its output and where the source was kept."""

    def __init__(self, command: List[str], output: str, source_path: str):
        self.command, self.output, self.source_path = command, output, source_path
        shown = output if len(output) <= OUTPUT_LIMIT else '...' + output[-OUTPUT_LIMIT:]
        super().__init__(
            f'compilation failed\n  command: {shlex.join(command)}\n  source kept at: {source_path}\n'
            f'compiler output:\n{shown.rstrip()}'
        )


def _install_root() -> str:
    """Where the package's built parts live: beside the compiled ``_C`` module (in an editable install
    the Python sources stay in the checkout while headers and libraries are installed here)."""
    return os.path.dirname(os.path.abspath(_C.__file__))


def include_dir() -> str:
    """hidet's headers (hidet/kernel_abi.h, hidet/runtime.h, ...), shipped inside the package."""
    return os.path.join(_install_root(), 'include')


def lib_dir() -> str:
    """The directory holding libhidet_runtime.so."""
    return os.path.join(_install_root(), 'lib')


@functools.lru_cache(maxsize=None)
def headers_digest(inc: str) -> str:
    """sha256 of hidet's headers: kernels include them, so they are part of the cache key."""
    digest = hashlib.sha256()
    for root, _, files in sorted(os.walk(inc)):
        for name in sorted(files):
            path = os.path.join(root, name)
            with open(path, 'rb') as f:
                digest.update(os.path.relpath(path, inc).encode() + b'\0' + f.read())
    return digest.hexdigest()


def _executable(path: Optional[str]) -> Optional[str]:
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def find_nvcc(options: Optional[Options] = None) -> str:
    """The nvcc to use: options.nvcc / HIDET_NVCC, $CUDA_HOME/bin/nvcc, nvcc on PATH,
    /usr/local/cuda/bin/nvcc, then the PyPI package nvidia-cuda-nvcc-cu12 inside site-packages."""
    options = option.resolve(options)
    if options.nvcc:
        if not _executable(options.nvcc):
            raise CompilerNotFoundError(f'nvcc set by hidet.option / HIDET_NVCC is not an executable: {options.nvcc}')
        return options.nvcc
    cuda_home = options.cuda_home
    candidates = [
        ('$CUDA_HOME/bin/nvcc', os.path.join(cuda_home, 'bin', 'nvcc') if cuda_home else None),
        ('nvcc on PATH', shutil.which('nvcc')),
        ('the system CUDA toolkit', SYSTEM_NVCC),
    ]
    for root in dict.fromkeys(p for p in sys.path if p and os.path.isdir(p)):
        candidates += [('pip package nvidia-cuda-nvcc', os.path.join(root, *rel)) for rel in PIP_NVCC_PATHS]
    for _, path in candidates:
        if _executable(path):
            return path
    looked = '\n'.join(f'  - {where}: {path or "not set / not found"}' for where, path in candidates)
    raise CompilerNotFoundError(
        'nvcc (the CUDA compiler) was not found. Looked at, in order:\n'
        f'  - hidet.option nvcc / HIDET_NVCC: not set\n{looked}\n'
        'Install it with `pip install nvidia-cuda-nvcc-cu12`, or set HIDET_NVCC to the nvcc to use '
        '(or CUDA_HOME to a CUDA toolkit).'
    )


def find_cxx(options: Optional[Options] = None) -> List[str]:
    """The C++ compiler command: options.cxx / $CXX (may hold flags) or g++."""
    options = option.resolve(options)
    command = shlex.split(options.cxx or '') or ['g++']
    path = shutil.which(command[0])
    if path is None:
        raise CompilerNotFoundError(
            f'the C++ compiler {command[0]!r} ($CXX, default g++) was not found on PATH; '
            'install g++ (e.g. `apt-get install g++`) or set CXX'
        )
    return [path] + command[1:]


@functools.lru_cache(maxsize=None)
def compiler_version(path: str) -> str:
    """The output of ``path --version`` (run once per compiler per process)."""
    try:
        done = subprocess.run([path, '--version'], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise CompilerNotFoundError(f'cannot run {path}: {e}') from e
    return done.stdout.strip() or done.stderr.strip()


def version_line(version: str) -> str:
    """The line naming the version: nvcc's first line is the same for all releases, so take its 'release' line."""
    lines = version.splitlines() or ['']
    return next((ln for ln in lines if 'release' in ln), lines[0])


@functools.lru_cache(maxsize=None)
def host_cpu() -> str:
    """The host CPU (model and feature flags), for the cache key of CPU kernels built with -march=native."""
    info = {}
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if not line.strip():  # the first processor is enough
                    break
                key, _, value = line.partition(':')
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = info.get('model name') or platform.processor()
    return f"{platform.machine()} {model} [{info.get('flags') or info.get('Features', '')}]"


def cuda_arch(options: Optional[Options] = None) -> str:
    """'sm_XX' to build for: options.cuda_arch / HIDET_CUDA_ARCH, else the current GPU (through torch)."""
    options = option.resolve(options)
    if options.cuda_arch:
        return options.cuda_arch
    try:
        import torch

        if torch.cuda.is_available():
            return normalize_cuda_arch('%d%d' % torch.cuda.get_device_capability())
    except ImportError:
        pass
    raise RuntimeError(
        'cannot tell which CUDA arch to build for: no GPU is visible. Set it with '
        "hidet.option.context(cuda_arch='sm_90') or the environment variable HIDET_CUDA_ARCH=sm_90"
    )


def _pip_cuda_flags(nvcc: str) -> List[str]:
    """Extra flags for nvcc from nvidia-cuda-nvcc-cu12, whose headers and cudart live in sibling packages."""
    nvidia = os.path.dirname(os.path.dirname(os.path.dirname(nvcc)))
    if os.path.basename(os.path.dirname(os.path.dirname(nvcc))) != 'cuda_nvcc' or os.path.basename(nvidia) != 'nvidia':
        return []
    flags = [f'-I{os.path.join(nvidia, p, "include")}' for p in ('cuda_runtime', 'cuda_cccl')
             if os.path.isdir(os.path.join(nvidia, p, 'include'))]
    lib = os.path.join(nvidia, 'cuda_runtime', 'lib')
    if os.path.isdir(lib):
        flags += [f'-L{lib}']
        if not os.path.exists(os.path.join(lib, 'libcudart_static.a')):
            flags += ['--cudart', 'shared', f'-Xlinker=-rpath={lib}']
    return flags


@dataclass(frozen=True)
class Toolchain:
    """How kernel libraries of one target are built."""

    target: str  # 'cpu' | 'cuda'
    arch: str  # 'sm_90', ... for cuda; the host CPU for cpu (-march=native)
    compiler: Tuple[str, ...]  # the command prefix
    flags: Tuple[str, ...]  # flags before -o
    version: str  # the compilers' --version output (nvcc's and its host compiler's for cuda)
    headers: str  # digest of hidet's headers

    @property
    def suffix(self) -> str:
        return '.cu' if self.target == 'cuda' else '.cpp'

    def command(self, source_path: str, output_path: str) -> List[str]:
        return [*self.compiler, *self.flags, '-o', output_path, source_path]

    def key(self) -> str:
        """What of the toolchain goes into the cache key."""
        return '\n'.join([self.target, self.arch, self.version, self.headers, ' '.join(self.flags)])


def toolchain(target: str, options: Optional[Options] = None) -> Toolchain:
    """Resolve the compiler, arch and flags for ``target`` ('cpu' or 'cuda')."""
    options = option.resolve(options)
    inc = include_dir()
    if target == 'cpu':
        cxx = find_cxx(options)
        # -fno-trapping-math: floating-point exceptions are not trapped, so g++ may compute both sides of
        # a select and vectorize loops with them (the results are the same IEEE results)
        flags = ('-O3', '-march=native', '-fno-trapping-math', '-fopenmp', '-fPIC', '-shared', '-std=c++17',
                 # -fno-gnu-unique: an exported static of an inline function (hidet::last_error's buffer,
                 # libstdc++'s to_chars digits) would otherwise be STB_GNU_UNIQUE, which makes glibc ignore
                 # dlclose of the library: every graph loaded and freed would leak its libraries
                 '-fno-gnu-unique',
                 # -fno-exceptions: kernels report errors by return code; with exceptions, g++ wraps each OpenMP
                 # region in a handler calling std::terminate, which needs the C++ runtime's exception support,
                 # and a compiler that links libstdc++ statically then puts a copy in every library (its 72 KiB
                 # emergency pool allocated at each load, never freed)
                 '-fno-exceptions', '-I', inc)
        # No -z nodelete: libraries are unloaded with the last graph or module using them. The OpenMP runtime,
        # whose idle threads would crash if dlclose unmapped it, is pinned by the runtime instead
        # (LibraryRegistry::pin_openmp_runtime in cpp/runtime/library_registry.cpp).
        return Toolchain('cpu', host_cpu(), tuple(cxx), flags, compiler_version(cxx[0]), headers_digest(inc))
    if target == 'cuda':
        nvcc, cxx = find_nvcc(options), find_cxx(options)
        sm = cuda_arch(options)[len('sm_'):]
        if sm == '90':  # the H100's arch-specific features (wgmma); its SASS and PTX run on sm_90 GPUs alone
            sm = '90a'
        flags = [
            '-O3', '-std=c++17', '-shared', '-Xcompiler', '-fPIC', '-lineinfo',
            '-gencode', f'arch=compute_{sm},code=sm_{sm}',  # SASS for the arch
            '-gencode', f'arch=compute_{sm},code=compute_{sm}',  # and PTX (DESIGN contract 2)
            '-Xlinker', '--exclude-libs,ALL',  # the static cudart stays private to the library
            # Nothing of the C++ runtime (as the CPU flags; hidet/kernel/common.h says why): no exceptions, and no
            # thread-safe guards around function-local statics (nvcc's launch stubs keep a kernel's address in
            # one, written with the same value by any thread that gets there first)
            '-Xcompiler', '-fno-exceptions', '-Xcompiler', '-fno-threadsafe-statics',
            '-I', inc, *_pip_cuda_flags(nvcc),
        ]
        if int(sm.rstrip('a')) >= 90 and options.cuda_programmatic_launch:  # (hidet/kernel/cuda.h: hidet::launch)
            flags.append('-DHIDET_PROGRAMMATIC_LAUNCH')
        if len(cxx) == 1:
            flags += ['-ccbin', cxx[0]]
        version = compiler_version(nvcc) + '\n' + compiler_version(cxx[0])
        return Toolchain('cuda', f'sm_{sm}', (nvcc,), tuple(flags), version, headers_digest(inc))
    raise ValueError(f'unknown target {target!r}: expected one of {TARGETS}')


# Every CPU kernel's source includes this header first, so g++ can read it precompiled: parsing it (<string>,
# <cmath>) was half of a small kernel's build (0.79 s against 0.39 s with the precompiled header, 2 cores)
PRECOMPILED_HEADER = os.path.join('hidet', 'kernel', 'cpu.h')


def precompiles_headers(tc: Toolchain) -> bool:
    """Whether ``tc`` builds CPU kernels with GCC (whose precompiled headers are found beside the header by name;
    its --version names the Free Software Foundation, clang's does not)."""
    return tc.target == 'cpu' and 'Free Software Foundation' in tc.version


def compile_precompiled_header(tc: Toolchain, output_path: str) -> None:
    """PRECOMPILED_HEADER compiled with ``tc``'s flags into ``output_path`` (a .gch file); g++ uses it for a
    kernel only where the flags match, and reads the header itself otherwise."""
    flags = [f for f in tc.flags if f != '-shared']
    command = [*tc.compiler, *flags, '-x', 'c++-header', os.path.join(include_dir(), PRECOMPILED_HEADER),
               '-o', output_path]
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors='replace')
    except OSError as e:
        raise CompilationError(command, str(e), PRECOMPILED_HEADER) from e
    if done.returncode != 0:
        raise CompilationError(command, done.stderr + done.stdout, PRECOMPILED_HEADER)


def names_bfloat16(source_path: str) -> bool:
    """Whether a CUDA source names bfloat16 (its type, or a helper of it): one that does not is compiled with
    HIDET_NO_BF16, so hidet/kernel/cuda.h skips cuda_bf16.h (parsing it: 0.27 of a small kernel's 1.34 s of nvcc)."""
    with open(source_path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    return 'bfloat16' in text or 'bf16' in text


def compile_library(tc: Toolchain, source_path: str, output_path: str, options: Optional[Options] = None,
                    header_dir: Optional[str] = None) -> List[str]:
    """Compile ``source_path`` into the shared library ``output_path``; raise CompilationError on failure.
    ``header_dir``: a directory searched for includes first (the precompiled header's: cache.py).

    With options.debug_keep_source, the compilers' intermediate files (PTX, cubin, preprocessed source)
    are kept in ``intermediates/`` beside the source."""
    options = option.resolve(options)
    source_path, output_path = os.path.abspath(source_path), os.path.abspath(output_path)
    command, cwd = tc.command(source_path, output_path), None
    if tc.target == 'cuda' and not names_bfloat16(source_path):
        command[len(tc.compiler):len(tc.compiler)] = ['-DHIDET_NO_BF16']
    if header_dir is not None:
        command[len(tc.compiler):len(tc.compiler)] = ['-I', header_dir]
    if options.debug_keep_source:
        cwd = os.path.join(os.path.dirname(output_path), 'intermediates')
        os.makedirs(cwd, exist_ok=True)
        keep = ['--keep', '--keep-dir', cwd] if tc.target == 'cuda' else ['-save-temps=cwd']
        command[len(tc.compiler):len(tc.compiler)] = keep
    if options.verbose_build:
        print(f'[hidet] {shlex.join(command)}', file=sys.stderr)
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors='replace', cwd=cwd)
    except OSError as e:
        raise CompilationError(command, str(e), source_path) from e
    output = done.stderr + done.stdout
    if options.verbose_build and output.strip():
        print(output, file=sys.stderr)
    if done.returncode != 0:
        raise CompilationError(command, output, source_path)
    return command
