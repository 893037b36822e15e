"""Constant folding: a node whose inputs are all constants runs once, at optimization time, and
its outputs become constants (weight transposes, casts and reshapes happen once, not per call)."""
from __future__ import annotations

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext

# Folding can grow memory (broadcasting a small constant into a big one): fold only while the
# outputs stay within this many bytes, or no larger than the inputs.
MAX_FOLDED_BYTES = 64 << 20


class FoldConstants(GraphPass):
    name = 'fold_constants'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        def fold(node, inputs):
            if any(t.is_symbolic() for t in inputs):
                return None
            out_bytes = sum(t.nbytes for t in node.outputs)
            if out_bytes > MAX_FOLDED_BYTES and out_bytes > sum(t.nbytes for t in inputs):
                return None
            return node.compute(inputs)

        return rewrite_graph(graph, fold)
