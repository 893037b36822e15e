"""Readable text of IR expressions and tasks. Variables are named by first appearance, so two
structurally equal tasks print the same text (the Task cache key relies on this)."""
from __future__ import annotations

from typing import Dict, Optional

from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.expr import Binary, Call, Cast, Constant, Expr, Select, TensorElement, Unary, Var


class Namer:
    """Stable names: tensors keep theirs; index variables become i0, i1, … in order of appearance."""

    def __init__(self):
        self.names: Dict[int, str] = {}

    def var(self, v: Var) -> str:
        if id(v) not in self.names:
            self.names[id(v)] = f'v{len(self.names)}'
        return self.names[id(v)]


def expr_text(e: Expr, namer: Optional[Namer] = None) -> str:
    namer = namer or Namer()

    def t(x: Expr) -> str:
        if isinstance(x, Var):
            return namer.var(x)
        if isinstance(x, Constant):
            return f'{x.value!r}:{x.dtype.short_name}'
        if isinstance(x, Binary):
            if x.op in ('max', 'min'):
                return f'{x.op}({t(x.a)}, {t(x.b)})'
            return f'({t(x.a)} {x.op} {t(x.b)})'
        if isinstance(x, Unary):
            return f'{x.op}{t(x.a)}'
        if isinstance(x, Call):
            return f"{x.func}({', '.join(t(a) for a in x.args)}):{x.dtype.short_name}"
        if isinstance(x, Cast):
            return f'{x.dtype.short_name}({t(x.a)})'
        if isinstance(x, Select):
            return f'({t(x.cond)} ? {t(x.t)} : {t(x.f)})'
        if isinstance(x, TensorElement):
            return f"{x.tensor.name}[{', '.join(t(i) for i in x.indices)}]"
        if isinstance(x, ReduceCompute):
            axes = ', '.join(f'{namer.var(a)}<{s}' for a, s in zip(x.axes, x.shape))
            return f'{x.kind}<{x.acc_dtype.short_name}->{x.dtype.short_name}>({axes}: {t(x.value)})'
        raise TypeError(f'cannot print {type(x).__name__}')

    return t(e)


def tensor_definition_text(node: TensorNode, namer: Namer) -> str:
    head = f'{node.name}: {node.dtype.short_name}{list(node.shape)}'
    if node.is_input():
        return head
    axes = ', '.join(namer.var(a) for a in node.definition.axes)
    return f'{head} = [{axes}] {expr_text(node.definition.value, namer)}'
