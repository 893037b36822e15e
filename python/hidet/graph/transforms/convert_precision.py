"""Precision conversion (PassContext.set_precision): the graph's float32 inputs and constants are
cast to float16/bfloat16 at its start, every operator is rebuilt for the new dtypes, and outputs
are cast back, so the graph's signature is unchanged. Reductions still accumulate in float32
(DESIGN.md contract 5); constants are cast once by constant folding."""
from __future__ import annotations

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.ops.arithmetic import cast_
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.dtypes import data_type, float32


class ConvertPrecision(GraphPass):
    name = 'convert_precision'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        if ctx.precision is None:
            return graph
        target = data_type(ctx.precision)
        cast_inputs = {}

        def lowered(t):
            if t.dtype != float32 or t.trace is not None:
                return t
            if id(t) not in cast_inputs:  # a graph input or a constant: cast once
                cast_inputs[id(t)] = cast_(t, target)
            return cast_inputs[id(t)]

        def convert(node, inputs):
            new_inputs = [lowered(t) for t in inputs]
            if all(a is b for a, b in zip(new_inputs, node.inputs)):
                return None
            return node.reforward(new_inputs).outputs

        converted = rewrite_graph(graph, convert)
        outputs = [lowered(new) if new.trace is None else new for new in converted.outputs]
        outputs = [cast_(new, old.dtype) for old, new in zip(graph.outputs, outputs)]
        return FlowGraph(outputs, graph.inputs)
