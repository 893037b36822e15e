"""Composition of compute definitions: the IR side of operator fusion.

Tasks read their inputs through ``tensor_input`` nodes. Composing replaces those nodes by other
tensors' definitions, so a consumer's task reads its producer's *computation* instead of a
buffer; the auto-scheduler then inlines it into one kernel.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

from hidet.ir.compute import GridCompute, ReduceCompute, TensorNode
from hidet.ir.expr import Expr, TensorElement
from hidet.ir.functors import collect, inline_computes, rewrite
from hidet.ir.schedulers.analysis import structural_key


class TensorReplacer:
    """Rebuilds tensor definitions with some tensors replaced (``mapping``: id(old) → new)."""

    def __init__(self, mapping: Dict[int, TensorNode]):
        self.mapping = dict(mapping)

    def __call__(self, node: TensorNode) -> TensorNode:
        if id(node) in self.mapping:
            return self.mapping[id(node)]
        if node.is_input():
            raise ValueError(f'compose: input tensor {node.name} is not bound to anything')
        d: GridCompute = node.definition

        def fn(e: Expr):
            if isinstance(e, TensorElement):
                new = self(e.tensor)
                return None if new is e.tensor else TensorElement(new, e.indices)
            return None

        value = rewrite(d.value, fn)
        new = node if value is d.value else TensorNode(node.name, node.dtype, node.shape, GridCompute(d.axes, value))
        self.mapping[id(node)] = new
        return new


def count_reads(node: TensorNode, of: TensorNode) -> int:
    """How many distinct reads of ``of`` one element of ``node`` makes once definitions are inlined.
    Reads at the same indices count once (``gelu(a)`` uses ``a`` three times but reads it once, whether one
    operator or eight compute it), and the scheduler computes each distinct read — a reduction included — once
    per element."""
    value = inline_computes(node.definition.value)
    return len({structural_key(e) for e in collect(value, TensorElement) if e.tensor is of})


def has_reduction(outputs: Sequence[TensorNode]) -> bool:
    return any(collect(out, ReduceCompute) for out in outputs)


def reads_data_dependent(node: TensorNode) -> List[TensorElement]:
    """Reads whose indices depend on loaded values (gather-like), which are not one-to-one."""
    return [e for e in collect(node, TensorElement) if any(collect(i, TensorElement) for i in e.indices)]
