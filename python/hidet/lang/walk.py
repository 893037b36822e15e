"""Walks over the statements and expressions of Hidet Script functions."""
from __future__ import annotations

from hidet.ir.expr import Binary, BufferLoad, Call, Cast, Select, Unary
from hidet.ir.lowlevel import Address, FunctionCall, PrimCall
from hidet.ir.stmt import Assign, Declare, Evaluate, For, If, Return, Seq, Store, VectorCopy, While


def iter_exprs(e):
    """``e`` and every sub-expression (pre-order)."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        if isinstance(x, Binary):
            stack += [x.a, x.b]
        elif isinstance(x, (Unary, Cast)):
            stack.append(x.a)
        elif isinstance(x, Select):
            stack += [x.cond, x.t, x.f]
        elif isinstance(x, (Call, PrimCall, FunctionCall)):
            stack += list(x.args)
        elif isinstance(x, BufferLoad):
            stack += [x.buffer, x.index]
        elif isinstance(x, Address):
            stack += [x.base, x.index]


def iter_stmt_exprs(s):
    """Every expression of statement ``s`` and its sub-statements."""
    if isinstance(s, Seq):
        for sub in s.stmts:
            yield from iter_stmt_exprs(sub)
        return
    if isinstance(s, For):
        roots, subs = [s.start, s.stop, s.step], [s.body]
    elif isinstance(s, If):
        roots, subs = [s.cond], [s.then] + ([s.otherwise] if s.otherwise is not None else [])
    elif isinstance(s, While):
        roots, subs = [s.cond], [s.body]
    elif isinstance(s, Declare):
        roots, subs = [s.var] + ([s.init] if s.init is not None else []), []
    elif isinstance(s, Assign):
        roots, subs = [s.var, s.value], []
    elif isinstance(s, Store):
        roots, subs = [s.buffer, s.index, s.value], []
    elif isinstance(s, Evaluate):
        roots, subs = [s.expr], []
    elif isinstance(s, VectorCopy):
        roots, subs = [s.dst, s.dst_index, s.src, s.src_index], []
    elif isinstance(s, Return):
        roots, subs = [s.value] if s.value is not None else [], []
    else:
        roots, subs = [], []
    for r in roots:
        yield from iter_exprs(r)
    for sub in subs:
        yield from iter_stmt_exprs(sub)


def iter_stmts(s):
    yield s
    if isinstance(s, Seq):
        for sub in s.stmts:
            yield from iter_stmts(sub)
    elif isinstance(s, (For, While)):
        yield from iter_stmts(s.body)
    elif isinstance(s, If):
        yield from iter_stmts(s.then)
        if s.otherwise is not None:
            yield from iter_stmts(s.otherwise)
