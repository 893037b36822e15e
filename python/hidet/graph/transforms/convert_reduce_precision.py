"""Reduction precision (PassContext.set_reduce_precision): reductions over 16-bit floats accumulate
in the given dtype instead of the default float32 (DESIGN.md contract 5) — faster, less exact."""
from __future__ import annotations

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.compose import TensorReplacer
from hidet.ir.compute import GridCompute, ReduceCompute, TensorNode
from hidet.ir.dtypes import data_type
from hidet.ir.functors import rewrite
from hidet.ir.task import Task


def with_accumulation(task: Task, acc) -> Task:
    """``task`` with its reductions of 16-bit float values accumulated in ``acc``."""
    def fn(e):
        if isinstance(e, ReduceCompute) and e.value.dtype.name in ('float16', 'bfloat16') \
                and e.kind in ('sum', 'mean', 'prod') and e.acc_dtype != acc:
            return ReduceCompute(e.axes, e.shape, e.value, e.kind, acc, e.dtype)
        return None

    inputs = {id(t): t for t in task.inputs}

    class _Retype(TensorReplacer):
        def __call__(self, node: TensorNode) -> TensorNode:
            if id(node) in self.mapping:
                return self.mapping[id(node)]
            new = super().__call__(node)
            if new.is_input():
                return new
            value = rewrite(new.definition.value, fn)
            if value is not new.definition.value:
                new = TensorNode(new.name, new.dtype, new.shape, GridCompute(new.definition.axes, value))
                self.mapping[id(node)] = new
            return new

    replace = _Retype(inputs)
    outputs = [replace(o) for o in task.outputs]
    if all(a is b for a, b in zip(outputs, task.outputs)):
        return task
    return Task(task.name, task.inputs, outputs, task.attrs)


class ConvertReducePrecision(GraphPass):
    name = 'convert_reduce_precision'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        if ctx.reduce_precision is None:
            return graph
        acc = data_type(ctx.reduce_precision)

        def convert(node, inputs):
            task = with_accumulation(node.task, acc)
            if task is node.task:
                return None
            op = node.clone(inputs)
            op.task = task
            return op.outputs

        return rewrite_graph(graph, convert)
