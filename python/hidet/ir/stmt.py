"""Statements and functions: the scheduled form of a task, which the backend prints as C++ / CUDA."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from hidet.ir.expr import Expr, Var, convert


class Stmt:
    pass


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
    """``for (var = start; var < stop; var += step)``; kind 'serial', 'parallel' (OpenMP) or 'unroll'."""

    def __init__(self, var: Var, start: Expr, stop: Expr, step: Expr, body: Stmt, kind: str = 'serial'):
        self.var, self.start, self.stop, self.step = var, convert(start), convert(stop), convert(step)
        self.body, self.kind = body, kind


class If(Stmt):
    def __init__(self, cond: Expr, then: Stmt, otherwise: Optional[Stmt] = None):
        self.cond, self.then, self.otherwise = cond, then, otherwise


class Evaluate(Stmt):
    """An expression evaluated for its effect (e.g. a barrier call)."""

    def __init__(self, expr: Expr):
        self.expr = expr


class Function:
    """A kernel: 'cpu' functions run on the host, 'cuda' ones are ``__global__`` launched with
    ``grid`` × ``block`` threads. Parameters are buffer pointers (inputs, then outputs)."""

    def __init__(self, name: str, params: Sequence[Var], body: Stmt, kind: str,
                 grid: Tuple[int, ...] = (1,), block: Tuple[int, ...] = (1,)):
        self.name, self.params, self.body, self.kind = name, list(params), body, kind
        self.grid, self.block = tuple(grid), tuple(block)


class IRModule:
    """The functions of one kernel library, launched in order by its exported entry point."""

    def __init__(self, name: str, target: str, functions: List[Function], num_inputs: int, num_outputs: int):
        self.name, self.target, self.functions = name, target, functions
        self.num_inputs, self.num_outputs = num_inputs, num_outputs
