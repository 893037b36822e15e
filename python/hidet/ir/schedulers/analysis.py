"""Index analysis for the auto-scheduler.

- ``linear(e, v)``: how an integer index expression varies with one variable: ``(stride, multiple)``
  when ``e == stride * v + rest`` with a constant ``stride`` and ``rest`` independent of ``v`` and
  known to be a multiple of ``multiple`` (0: ``rest`` is 0); ``None`` when ``v`` enters otherwise
  (divided, wrapped, through a loaded value, a select, …).
- ``known_multiple(e)``: a constant that divides ``e`` for every value of its variables.
- ``depends_on(e, vars)``: whether ``e`` reads any of ``vars``.
- ``structural_key(e)``: a text that is equal for two expressions exactly when they compute the same
  thing from the same variables (used to compute a reduction once where it appears twice).
"""
from __future__ import annotations

from math import gcd
from typing import Optional, Sequence, Tuple

from hidet.ir.expr import Binary, Cast, Constant, Expr, Select, Unary, Var
from hidet.ir.functors import collect
from hidet.ir.printer import expr_text


def depends_on(e: Expr, variables: Sequence[Var]) -> bool:
    if not variables:
        return False
    ids = {id(v) for v in variables}
    return any(id(x) in ids for x in collect(e, Var))


def _int_cast(e: Expr) -> bool:
    return (isinstance(e, Cast) and e.dtype.is_integer() and e.a.dtype.is_integer()
            and e.dtype.nbytes >= e.a.dtype.nbytes)


def known_multiple(e: Expr) -> int:
    if isinstance(e, Constant) and e.dtype.is_integer():
        return abs(e.value)
    if isinstance(e, Binary) and e.op in ('+', '-'):
        return gcd(known_multiple(e.a), known_multiple(e.b))
    if isinstance(e, Binary) and e.op == '*':
        return known_multiple(e.a) * known_multiple(e.b)
    if isinstance(e, Select):
        return gcd(known_multiple(e.t), known_multiple(e.f))
    if isinstance(e, Unary) and e.op == '-':
        return known_multiple(e.a)
    if _int_cast(e):
        return known_multiple(e.a)
    return 1


def linear(e: Expr, v: Var) -> Optional[Tuple[int, int]]:
    if e is v:
        return 1, 0
    if not depends_on(e, [v]):
        return 0, known_multiple(e)
    if isinstance(e, Binary) and e.op in ('+', '-'):
        a, b = linear(e.a, v), linear(e.b, v)
        if a is None or b is None:
            return None
        return (a[0] + b[0] if e.op == '+' else a[0] - b[0]), gcd(a[1], b[1])
    if isinstance(e, Binary) and e.op == '*':
        for c, other in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, Constant) and c.dtype.is_integer():
                inner = linear(other, v)
                return None if inner is None else (c.value * inner[0], abs(c.value) * inner[1])
        return None
    if _int_cast(e):
        return linear(e.a, v)
    return None


class _IdNamer:
    """Names every variable by its identity (for structural_key)."""

    def var(self, v: Var) -> str:
        return f'{v.name}@{id(v):x}'


def structural_key(e: Expr) -> str:
    return expr_text(e, _IdNamer())
