"""The PassContext's kernel options as attributes of the tasks they concern, where the schedule
templates read them at build time: ``parallel_k`` (the split-k policy) on every matmul task (a MatmulOp,
or a fused operator with one among its members).

``use_tensor_core`` asks for TF32 tensor cores in float32 matmuls (16-bit matmuls always use tensor
cores, as torch's do). There is no TF32 kernel yet: the pass says so with a warning, and float32
matmuls stay exact.

A task's attributes are part of its key (``Task.text``), so kernels and tuning results made under
other options are cached apart. Runs after fusion, on the operators that will become kernels."""
from __future__ import annotations

import warnings
from typing import List

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator
from hidet.graph.tensor import Tensor
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.task import Task


def _has_matmul(op: Operator) -> bool:
    from hidet.graph.ops.matmul import MatmulOp

    members = getattr(op, 'members', None)
    return isinstance(op, MatmulOp) or bool(members) and any(isinstance(m, MatmulOp) for m in members)


def kernel_options(ctx: PassContext) -> dict:
    """The attributes ``ctx`` gives matmul tasks (none for the defaults, so default builds share keys)."""
    return {'parallel_k': ctx.parallel_k} if ctx.parallel_k != 'default' else {}


def _warn_no_tf32(graph: FlowGraph) -> None:
    float32_matmuls = [n for n in graph.nodes if _has_matmul(n) and any(t.dtype.name == 'float32' for t in n.inputs)
                       and n.device.is_cuda()]
    if float32_matmuls:
        warnings.warn(f'use_tensor_core: TF32 matmul kernels are not implemented yet; the {len(float32_matmuls)} '
                      'float32 matmul(s) of this graph run in full float32 (use float16/bfloat16, or use_fp16, for '
                      'tensor cores)', stacklevel=3)


class AnnotateKernelOptions(GraphPass):
    name = 'annotate_kernel_options'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        if ctx.use_tensor_core:
            _warn_no_tf32(graph)
        options = kernel_options(ctx)
        if not options:
            return graph

        def rewrite(node: Operator, inputs: List[Tensor]):
            if not _has_matmul(node):
                return None
            op = node.clone(inputs)
            task = node.task
            op.task = Task(task.name, task.inputs, task.outputs, {**task.attrs, **options})
            return op.outputs

        return rewrite_graph(graph, rewrite)
