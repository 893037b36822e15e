"""Generic traversals of expression trees, written once: children, collection and rewriting."""
from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Optional

from hidet.ir.compute import GridCompute, ReduceCompute, TensorNode
from hidet.ir.dtypes import int32, int64
from hidet.ir.expr import (Binary, BufferLoad, Call, Cast, Constant, Expr, Select, TensorElement, Unary, Var, same_dim,
                           simplify_dim)


def children(node) -> tuple:
    """The sub-nodes of an expression (a TensorElement's tensor included) or of a TensorNode."""
    if isinstance(node, (Var, Constant)):
        return ()
    if isinstance(node, Binary):
        return node.a, node.b
    if isinstance(node, (Unary, Cast)):
        return (node.a,)
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Select):
        return node.cond, node.t, node.f
    if isinstance(node, TensorElement):
        return (node.tensor,) + node.indices
    if isinstance(node, BufferLoad):
        return (node.index,)
    if isinstance(node, ReduceCompute):
        return (node.value,)
    if isinstance(node, TensorNode):
        return () if node.definition is None else (node.definition.value,)
    raise TypeError(f'unknown IR node {type(node).__name__}')


def walk(root, descend: Callable[[object], bool] = lambda node: True) -> Iterator:
    """Every distinct node reachable from ``root`` (pre-order, first visit), not looking inside nodes for which
    ``descend`` is false (they are still visited)."""
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if descend(node):
            stack.extend(reversed(children(node)))


def collect(root, node_type) -> List:
    """Every distinct node of ``node_type`` reachable from ``root`` (pre-order, first visit)."""
    return [node for node in walk(root) if isinstance(node, node_type)]


def conjuncts(cond: Expr) -> List[Expr]:
    """The terms of a conjunction ``a && b && ...``, left to right (``[cond]`` when it is not one)."""
    if isinstance(cond, Binary) and cond.op == '&&':
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def rewrite(expr: Expr, fn: Callable[[Expr], Optional[Expr]], replaced: Optional[Dict[int, Expr]] = None) -> Expr:
    """Rebuild ``expr`` bottom-up; ``fn(node)`` may return a replacement (after children are rewritten).
    ``replaced`` (by id) replaces nodes of ``expr`` as they are, before their children are visited."""
    memo: Dict[int, Expr] = dict(replaced or {})

    def visit(e: Expr) -> Expr:
        if id(e) in memo:
            return memo[id(e)]
        if isinstance(e, (Var, Constant)):
            new = e
        elif isinstance(e, Binary):
            a, b = visit(e.a), visit(e.b)
            new = e if (a, b) == (e.a, e.b) else Binary(e.op, a, b, e.dtype)
        elif isinstance(e, Unary):
            a = visit(e.a)
            new = e if a is e.a else Unary(e.op, a)
        elif isinstance(e, Cast):
            a = visit(e.a)
            new = e if a is e.a else Cast(a, e.dtype)
        elif isinstance(e, Call):
            args = tuple(visit(a) for a in e.args)
            new = e if args == e.args else Call(e.func, args, e.dtype)
        elif isinstance(e, Select):
            c, t, f = visit(e.cond), visit(e.t), visit(e.f)
            new = e if (c, t, f) == (e.cond, e.t, e.f) else Select(c, t, f)
        elif isinstance(e, TensorElement):
            idx = tuple(visit(i) for i in e.indices)
            new = e if idx == e.indices else TensorElement(e.tensor, idx)
        elif isinstance(e, BufferLoad):  # (lowered reads: an index read from another buffer)
            index = visit(e.index)
            new = e if index is e.index else BufferLoad(e.buffer, index, e.dtype)
        elif isinstance(e, ReduceCompute):
            v = visit(e.value)
            new = e if v is e.value else ReduceCompute(e.axes, e.shape, v, e.kind, e.acc_dtype, e.dtype)
        else:
            raise TypeError(f'unknown IR node {type(e).__name__}')
        replaced = fn(new)
        memo[id(e)] = new if replaced is None else replaced
        return memo[id(e)]

    return visit(expr)


def substitute(expr: Expr, mapping: Dict[Var, Expr]) -> Expr:
    return rewrite(expr, lambda e: mapping.get(e) if isinstance(e, Var) else None)


def inline_computes(expr: Expr) -> Expr:
    """Replace reads of computed (non-input) tensors by their definitions, so only input tensors
    are read: the whole task becomes one expression per output element."""

    def fn(e: Expr) -> Optional[Expr]:
        if isinstance(e, TensorElement) and not e.tensor.is_input():
            definition: GridCompute = e.tensor.definition
            return inline_computes(substitute(definition.value, dict(zip(definition.axes, e.indices))))
        return None

    return rewrite(expr, fn)


INT32_MAX = (1 << 31) - 1


def narrow_index(expr: Expr) -> Expr:
    """``expr``'s int64 index arithmetic done in int32: casts of int32 values to int64 dropped, int64
    constants and operations made int32. Only for expressions whose every intermediate value the caller
    knows to fit in int32 (an offset into a tensor of fewer than 2^31 elements computed from indices inside
    it): 64-bit division by a constant costs several times the 32-bit one on a GPU."""
    def fn(e: Expr):
        if isinstance(e, Cast) and e.dtype == int64 and e.a.dtype == int32:
            return e.a
        if isinstance(e, Constant) and e.dtype == int64 and -INT32_MAX <= e.value <= INT32_MAX:
            return Constant(e.value, int32)
        if isinstance(e, Binary) and e.a.dtype == int32 and e.b.dtype == int32 and e.dtype == int64:
            return Binary(e.op, e.a, e.b, int32)
        if isinstance(e, Select) and e.dtype == int64 and e.t.dtype == int32 and e.f.dtype == int32:
            return Select(e.cond, e.t, e.f)
        return None

    return rewrite(expr, fn)


def merge_divmod(expr: Expr, static_divisors: bool = True) -> Expr:
    """``(x / c) * c + x % c`` → ``x`` (integer division of non-negative indices): a flat index unflattened
    and flattened back; also ``(a + x / c) * c + x % c`` → ``a * c + x``, the form a row-major flat index of
    a reshape's input takes (``((m * 12 + k / 64) * 64 + k % 64``). ``static_divisors=False`` merges only
    where c is symbolic (the C compiler folds static ones, and static kernels keep their sources)."""
    def terms(x: Expr) -> List[Expr]:
        return terms(x.a) + terms(x.b) if isinstance(x, Binary) and x.op == '+' else [x]

    def fn(x: Expr):
        if not (isinstance(x, Binary) and x.op == '+'):
            return None
        for p, q in ((x.a, x.b), (x.b, x.a)):
            if not (isinstance(p, Binary) and p.op == '*' and isinstance(q, Binary) and q.op == '%'
                    and same_dim(p.b, q.b) and (static_divisors or not isinstance(simplify_dim(q.b), int))):
                continue
            parts = terms(p.a)
            hit = next((i for i, t in enumerate(parts) if isinstance(t, Binary) and t.op == '/' and t.a is q.a
                        and same_dim(t.b, q.b)), None)
            if hit is None:
                continue
            rest = parts[:hit] + parts[hit + 1:]
            if not rest:
                return q.a
            total = rest[0]
            for t in rest[1:]:
                total = total + t
            return total * p.b + q.a
        return None

    return rewrite(expr, fn)
