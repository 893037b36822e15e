"""Precision conversion (PassContext.set_precision): the graph's float32 inputs and constants are
cast to float16/bfloat16 at its start, every operator is rebuilt for the new dtypes, and outputs
are cast back, so the graph's signature is unchanged. Reductions still accumulate in float32
(DESIGN.md contract 5); constants are cast once by constant folding (the casts are deferred:
``deferred_constants``, so the fold_constants pass that follows evaluates them on the host instead of
compiling a cast kernel per constant here), saturated to the target's finite range (a float32 mask of
-1e9 or a large folded weight becomes float16's largest value, not an infinity; infinities stay infinite)."""
from __future__ import annotations

import numpy as np

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import deferred_constants
from hidet.graph.ops.arithmetic import cast_
from hidet.graph.tensor import _from_host_values, _host_values
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
                cast_inputs[id(t)] = cast_(_saturated(t, target) if not t.is_symbolic() else t, target)
            return cast_inputs[id(t)]

        def convert(node, inputs):
            new_inputs = [lowered(t) for t in inputs]
            if all(a is b for a, b in zip(new_inputs, node.inputs)):
                return None
            return node.reforward(new_inputs).outputs

        with deferred_constants():  # (casts of constants: traced, for constant folding)
            converted = rewrite_graph(graph, convert)
            outputs = [lowered(new) if new.trace is None else new for new in converted.outputs]
            outputs = [cast_(new, old.dtype) for old, new in zip(graph.outputs, outputs)]
        return FlowGraph(outputs, graph.inputs)


def _saturated(constant, target):
    """``constant``, or a copy with its finite values clamped to ``target``'s range where some pass it."""
    if target.np_dtype is None or np.finfo(target.np_dtype).max >= np.finfo(np.float32).max:
        return constant  # bfloat16 spans float32's range
    limit = float(np.finfo(target.np_dtype).max)
    values = _host_values(constant)
    with np.errstate(invalid='ignore'):
        if not np.any(np.isfinite(values) & (np.abs(values) > limit)):
            return constant
    return _from_host_values(np.where(np.isinf(values), values, np.clip(values, -limit, limit)), constant.dtype,
                             constant.device)
