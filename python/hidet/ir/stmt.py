"""Statements and functions: the scheduled form of a task, which the backend prints as C++ / CUDA."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from hidet.ir.expr import Expr, Var, convert
from hidet.ir.printer import function_text, module_text, stmt_text
from hidet.ir.type import void


class Stmt:
    def __str__(self) -> str:
        return stmt_text(self)


class Seq(Stmt):
    def __init__(self, stmts: Sequence[Stmt]):
        self.stmts = list(stmts)


class Declare(Stmt):
    """``T var = init;``"""

    def __init__(self, var: Var, init: Optional[Expr] = None):
        self.var, self.init = var, init


class Assign(Stmt):
    def __init__(self, var: Var, value: Expr):
        self.var, self.value = var, value


class Store(Stmt):
    """``buffer[index] = value`` (converted to the buffer's element type)."""

    def __init__(self, buffer: Var, index: Expr, value: Expr):
        self.buffer, self.index, self.value = buffer, convert(index), value


class For(Stmt):
    """``for (var = start; var < stop; var += step)``; kind 'serial', 'parallel' (OpenMP), 'unroll' or
    'simd' (CPU: ``#pragma omp simd``, the iterations are independent)."""

    def __init__(self, var: Var, start: Expr, stop: Expr, step: Expr, body: Stmt, kind: str = 'serial'):
        self.var, self.start, self.stop, self.step = var, convert(start), convert(stop), convert(step)
        self.body, self.kind = body, kind


class If(Stmt):
    def __init__(self, cond: Expr, then: Stmt, otherwise: Optional[Stmt] = None):
        self.cond, self.then, self.otherwise = cond, then, otherwise


class VectorCopy(Stmt):
    """Copy ``count`` consecutive elements from ``src[src_index]`` to ``dst[dst_index]`` as one access of
    ``count`` × element-size bytes (a vectorized load or store; both addresses must be aligned to it).
    ``dst`` / ``src`` are buffer parameters or register arrays (``Var.type``, hidet.ir.type)."""

    def __init__(self, dst: Var, dst_index: Expr, src: Var, src_index: Expr, count: int):
        self.dst, self.dst_index, self.src, self.src_index = dst, convert(dst_index), src, convert(src_index)
        self.count = count


class Evaluate(Stmt):
    """An expression evaluated for its effect (e.g. a barrier call)."""

    def __init__(self, expr: Expr):
        self.expr = expr


class While(Stmt):
    def __init__(self, cond: Expr, body: Stmt):
        self.cond, self.body = cond, body


class Break(Stmt):
    pass


class Continue(Stmt):
    pass


class Return(Stmt):
    def __init__(self, value: Optional[Expr] = None):
        self.value = value


class Function:
    """A kernel: 'cpu' functions run on the host, 'cuda' ones are ``__global__`` launched with
    ``grid`` × ``block`` threads. Parameters are buffer pointers (inputs, then outputs).

    Hidet Script functions use the kinds of ``SCRIPT_KINDS``: kernels ('cuda_kernel', 'cpu_kernel') are
    exported through the kernel ABI, the others are called by functions of the module. Their parameters
    are scalars, pointers and tensors (``Var.type``); ``grid``, ``block`` and ``dynamic_smem`` may be
    expressions of the scalar parameters; ``ret_type`` is what internal functions return."""

    SCRIPT_KINDS = ('cuda_kernel', 'cuda_device', 'cpu_kernel', 'cpu_internal')

    # A vectorized kernel (hidet/ir/schedulers) runs only when every buffer it accesses by vectors is
    # aligned: ``aligned`` lists (parameter index, bytes); otherwise the launcher runs ``fallback``.
    aligned: Tuple[Tuple[int, int], ...] = ()
    fallback: Optional['Function'] = None
    cluster: Tuple[int, ...] = ()  # a cuda_kernel's thread-block cluster (sm_90: __cluster_dims__), none if empty
    max_registers: int = 0  # a cuda_kernel's registers a thread at most (__maxnreg__), 0: nvcc's choice
    outputs: Optional[Tuple[int, ...]] = None  # the module's outputs a kernel writes (None: the one of its position)

    def __init__(self, name: str, params: Sequence[Var], body: Stmt, kind: str,
                 grid: Tuple[int, ...] = (1,), block: Tuple[int, ...] = (1,), ret_type=None, dynamic_smem=0):
        self.name, self.params, self.body, self.kind = name, list(params), body, kind
        self.grid, self.block = tuple(grid), tuple(block)
        self.ret_type = void if ret_type is None else ret_type
        self.dynamic_smem = dynamic_smem

    def __str__(self) -> str:
        return function_text(self)


class IRModule:
    """The functions of one kernel library, launched in order by its exported entry point.

    With ``exports`` (Hidet Script modules), the library instead exports one ABI entry point per named
    kernel function (hidet/backend/codegen.py says how parameters travel)."""

    def __init__(self, name: str, target: str, functions: List[Function], num_inputs: int = 0,
                 num_outputs: int = 0, exports: Optional[List[str]] = None):
        self.name, self.target, self.functions = name, target, functions
        self.num_inputs, self.num_outputs = num_inputs, num_outputs
        self.exports = exports
        self.symbols: List[str] = []  # names of the symbolic dimensions, bound from the ABI's dims in this order
        self.signature: Optional[str] = None  # a task module's: its launch entry's declaration (Task.signature)

    def __str__(self) -> str:
        return module_text(self)
