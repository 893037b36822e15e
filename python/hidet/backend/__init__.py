"""The backend: compiler drivers (g++, nvcc) and the on-disk kernel cache. Source generation from the
IR will join here."""
from . import cache, compiler
from .cache import build_libraries, build_library
from .compiler import CompilationError, CompilerNotFoundError, Toolchain, find_cxx, find_nvcc, toolchain
