"""What every graph pass shares: a pass maps a FlowGraph to a new FlowGraph (graphs are not
mutated), rebuilding nodes through ``rewrite_graph``."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator
from hidet.graph.tensor import Tensor
from hidet.graph.transforms.pass_context import PassContext

# fn(node, new_inputs) → the node's new outputs, or None to keep the node (cloned onto new inputs)
NodeRewrite = Callable[[Operator, List[Tensor]], Optional[Sequence[Tensor]]]


class GraphPass:
    name = 'pass'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        raise NotImplementedError


def rewrite_graph(graph: FlowGraph, fn: NodeRewrite) -> FlowGraph:
    """Rebuild ``graph`` node by node in topological order."""
    mapping: Dict[int, Tensor] = {}
    for node in graph.nodes:
        inputs = [mapping.get(id(t), t) for t in node.inputs]
        outputs = fn(node, inputs)
        if outputs is None:
            changed = any(a is not b for a, b in zip(inputs, node.inputs))
            outputs = node.clone(inputs).outputs if changed else node.outputs
        for old, new in zip(node.outputs, outputs):
            if new is not old:
                mapping[id(old)] = new
    return FlowGraph([mapping.get(id(t), t) for t in graph.outputs], graph.inputs)
