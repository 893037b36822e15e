"""Shape-op simplification: identity reshapes and permutes vanish; reshape∘reshape and
permute∘permute become one op (the inner one dies if nothing else reads it)."""
from __future__ import annotations

from hidet.graph import ops
from hidet.graph.flow_graph import FlowGraph
from hidet.graph.ops.reshape import ReshapeOp
from hidet.graph.ops.transform import PermuteOp
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext


class SimplifyTransforms(GraphPass):
    name = 'simplify_transforms'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        def simplify(node, inputs):
            if not isinstance(node, (ReshapeOp, PermuteOp)):
                return None
            x = inputs[0]
            producer = x.trace[0] if x.trace is not None else None
            if isinstance(node, ReshapeOp):
                shape = node.outputs[0].shape
                if isinstance(producer, ReshapeOp):
                    x = producer.inputs[0]
                return [x] if shape == x.shape else [ops.reshape(x, shape)] if x is not inputs[0] else None
            dims = list(node.attrs['dims'])
            if isinstance(producer, PermuteOp):
                inner = producer.attrs['dims']
                x, dims = producer.inputs[0], [inner[d] for d in dims]
            if dims == sorted(dims):
                return [x]
            return [ops.permute(x, dims)] if x is not inputs[0] else None

        return rewrite_graph(graph, simplify)
