"""Index forms the GEMM matcher reads a task's expressions with (spec.py, epilogue.py): affine forms of integer
indices, flat indices, casts stripped; and NotGemm, what the matcher raises."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from hidet.ir.compute import TensorNode
from hidet.ir.dtypes import int64
from hidet.ir.expr import (Binary, Cast, Constant, Expr, SymbolVar, TensorElement, Unary, Var, evaluate_dim, simplify_dim,
                           symbols_of)
from hidet.ir.functors import rewrite, substitute


class NotGemm(Exception):
    """Why a task is not handled by the matmul templates."""


@dataclass
class Affine:
    """``offset + sum(coeff[v] * v)`` over variables (by id)."""
    coeffs: Dict[int, int]
    offset: int

    def coeff(self, v: Var) -> int:
        return self.coeffs.get(id(v), 0)


def affine(e: Expr, allowed: Sequence[Var]) -> Optional[Affine]:
    """The affine form of an integer index expression over ``allowed`` variables, or None. Coefficients and
    offset are ints, or expressions of symbolic dimensions (in canonical form, see simplify_dim)."""
    ids = {id(v) for v in allowed}

    def visit(x: Expr) -> Optional[Affine]:
        if isinstance(x, SymbolVar):
            return Affine({}, x)
        if isinstance(x, Var):
            return Affine({id(x): 1}, 0) if id(x) in ids else None
        if isinstance(x, Constant):
            return Affine({}, int(x.value)) if x.dtype.is_integer() or x.dtype.is_boolean() else None
        if isinstance(x, Cast) and x.dtype.is_integer() and x.a.dtype.is_integer():
            return visit(x.a)
        if isinstance(x, Unary) and x.op == '-':
            a = visit(x.a)
            return None if a is None else Affine({k: -c for k, c in a.coeffs.items()}, -a.offset)
        if isinstance(x, Binary) and x.op in ('+', '-'):
            a, b = visit(x.a), visit(x.b)
            if a is None or b is None:
                return None
            sign = 1 if x.op == '+' else -1
            coeffs = dict(a.coeffs)
            for k, c in b.coeffs.items():
                coeffs[k] = simplify_dim(coeffs.get(k, 0) + sign * c)
            return Affine({k: c for k, c in coeffs.items() if not is_zero(c)},
                          simplify_dim(a.offset + sign * b.offset))
        if isinstance(x, Binary) and x.op == '*':
            a, b = visit(x.a), visit(x.b)
            if a is None or b is None:
                return None
            if not a.coeffs:
                a, b = b, a
            if b.coeffs:
                return None  # a product of variables
            scaled = {k: simplify_dim(c * b.offset) for k, c in a.coeffs.items()}
            return Affine({k: c for k, c in scaled.items() if not is_zero(c)}, simplify_dim(a.offset * b.offset))
        return None

    return visit(e)


def is_one(d) -> bool:
    return isinstance(d, int) and d == 1


def magnitude(c) -> int:
    """A coefficient's size for ordering: symbols taken as large (a stride of seq outranks any static one)."""
    return c if isinstance(c, int) else evaluate_dim(c, {name: 1 << 20 for name in symbols_of([c])})


def is_zero(c) -> bool:
    return isinstance(c, int) and c == 0


def flat_index(indices: Sequence[Expr], shape: Sequence[int]) -> Expr:
    index: Expr = Constant(0, int64)
    for i, (idx, extent) in enumerate(zip(indices, shape)):
        index = idx if i == 0 else index * extent + idx
    return index


def inline_except(expr: Expr, keep: TensorNode) -> Expr:
    """Inline reads of computed tensors, except those of ``keep``."""

    def fn(e: Expr):
        if isinstance(e, TensorElement) and not e.tensor.is_input() and e.tensor is not keep:
            d = e.tensor.definition
            return inline_except(substitute(d.value, dict(zip(d.axes, e.indices))), keep)
        return None

    return rewrite(expr, fn)


def strip_cast(e: Expr) -> Expr:
    while isinstance(e, Cast) and e.a.dtype == e.dtype:
        e = e.a
    return e


def strip_int_cast(e: Expr) -> Expr:
    while isinstance(e, Cast) and e.dtype.is_integer() and e.a.dtype.is_integer():
        e = e.a
    return e
