"""Constant folding: a node whose inputs are all constants runs once, at optimization time, and
its outputs become constants (weight transposes, casts and reshapes happen once, not per call). The
kernels of every node that will fold are compiled first, together (in parallel)."""
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
        from hidet.drivers.build_task import build_tasks

        folded = set()  # ids of the tensors that will be constants
        foldable = set()  # ids of the nodes that run now
        jobs = {}
        for node in graph.nodes:
            if all(not t.is_symbolic() or id(t) in folded for t in node.inputs) and _small_enough(node):
                foldable.add(id(node))
                folded.update(id(t) for t in node.outputs)
                if all(t.numel() > 0 for t in node.outputs):
                    jobs.setdefault(node.task.key(), (node.task, node.target))
        if not foldable:
            return graph
        build_tasks(list(jobs.values()))
        return rewrite_graph(graph, lambda node, inputs: node.compute(inputs) if id(node) in foldable else None)


def _small_enough(node) -> bool:
    if node.task.symbols():  # constants in, a symbolic size out (a slice of a table to the sequence length)
        return False
    out_bytes = sum(t.nbytes for t in node.outputs)
    return out_bytes <= MAX_FOLDED_BYTES or out_bytes <= sum(t.nbytes for t in node.inputs)
