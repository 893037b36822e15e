"""The PassContext's kernel options as attributes of the tasks they concern, where the schedule
templates read them at build time, on every GEMM task (a matmul or a convolution, or a fused operator
with one among its members): ``parallel_k`` (the split-k policy) and ``tf32`` (``use_tensor_core``: float32
GEMMs may run on tensor cores in TF32, 10-bit mantissas with float32 accumulation, as torch's
``allow_tf32``; 16-bit GEMMs always use tensor cores).

A task's attributes are part of its key (``Task.text``), so kernels and tuning results made under
other options are cached apart. Runs after fusion, on the operators that will become kernels."""
from __future__ import annotations

from typing import List

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator
from hidet.graph.ops.conv import ConvChannelsLastOp, ConvOp
from hidet.graph.ops.matmul import MatmulOp
from hidet.graph.tensor import Tensor
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.task import Task


def _has_gemm(op: Operator) -> bool:
    kinds = (MatmulOp, ConvOp, ConvChannelsLastOp)
    members = getattr(op, 'members', None)
    return isinstance(op, kinds) or bool(members) and any(isinstance(m, kinds) for m in members)


def kernel_options(ctx: PassContext) -> dict:
    """The attributes ``ctx`` gives GEMM tasks (none for the defaults, so default builds share keys)."""
    options = {'parallel_k': ctx.parallel_k} if ctx.parallel_k != 'default' else {}
    if ctx.use_tensor_core:
        options['tf32'] = True
    return options


class AnnotateKernelOptions(GraphPass):
    name = 'annotate_kernel_options'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        options = kernel_options(ctx)
        if not options:
            return graph

        def rewrite(node: Operator, inputs: List[Tensor]):
            if not _has_gemm(node):
                return None
            mine = dict(options)
            if not any(t.dtype.name == 'float32' for t in node.inputs):
                mine.pop('tf32', None)  # 16-bit GEMMs use tensor cores anyway: their keys stay the defaults'
            if not mine:
                return None
            op = node.clone(inputs)
            task = node.task
            op.task = Task(task.name, task.inputs, task.outputs, {**task.attrs, **mine})
            return op.outputs

        return rewrite_graph(graph, rewrite)
