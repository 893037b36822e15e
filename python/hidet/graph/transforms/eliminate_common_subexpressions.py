"""Common-subexpression elimination: two nodes running the same task on the same inputs become one."""
from __future__ import annotations

from typing import Dict, Tuple

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext


class EliminateCommonSubexpressions(GraphPass):
    name = 'eliminate_common_subexpressions'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        seen: Dict[Tuple, list] = {}

        def dedup(node, inputs):
            key = (type(node), node.task.key(), tuple(id(t) for t in inputs))
            if key in seen:
                return seen[key]
            outputs = node.clone(inputs).outputs if any(a is not b for a, b in zip(inputs, node.inputs)) \
                else node.outputs
            seen[key] = outputs
            return outputs

        return rewrite_graph(graph, dedup)
