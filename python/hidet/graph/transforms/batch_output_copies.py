"""Injective kernels whose outputs only leave the graph run as one kernel.

After fusion, a kernel whose one output is a graph output read by no other kernel (GPT-2's present keys and
values: 24 copies of 1.6 µs each, a launch each) waits for nothing that comes after it. Such kernels of one CUDA
graph, with outputs of one shape and dtype, become one operator (``BatchedOperator``) with an output each; the
auto-scheduler computes all of them in one kernel (hidet/ir/schedulers/auto.py), so one launch replaces many.
Their inputs stay alive until it runs, at the end of the graph.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator
from hidet.graph.ops.fused import is_anchor
from hidet.graph.tensor import Tensor
from hidet.graph.transforms.base import GraphPass
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.compose import TensorReplacer
from hidet.ir.compute import tensor_input
from hidet.ir.expr import is_static
from hidet.ir.task import Task

MAX_BATCH = 32  # kernels batched into one, at most (each brings its inputs as parameters)


class BatchedOperator(Operator):
    """Several single-output injective operators as one: an output each, the union of their inputs."""

    fusible = False

    def __init__(self, members: Sequence[Operator]):
        self.members = list(members)
        inputs: List[Tensor] = []
        for m in self.members:
            for t in m.inputs:
                if all(t is not u for u in inputs):
                    inputs.append(t)
        nodes = {id(t): tensor_input(f'in{i}', t.dtype, t.shape) for i, t in enumerate(inputs)}
        outputs = []
        for m in self.members:
            replace = TensorReplacer({id(p): nodes[id(a)] for p, a in zip(m.task.inputs, m.inputs)})
            outputs.append(replace(m.task.outputs[0]))
        name = f'batched_{self.members[0].task.name}'[:56] + f'_x{len(self.members)}'
        task = Task(name, [nodes[id(t)] for t in inputs], outputs)
        super().__init__(inputs, {'batched': [m.task.name for m in self.members]}, task,
                         device=self.members[0].device)


class BatchOutputCopies(GraphPass):
    name = 'batch_output_copies'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        read = {id(t) for node in graph.nodes for t in node.inputs}
        leaving = {id(t) for t in graph.outputs}
        groups: Dict[Tuple, List[Operator]] = {}
        for node in graph.nodes:
            if len(node.outputs) != 1 or is_anchor(node) or not node.fusible:
                continue
            out = node.outputs[0]
            if id(out) in read or id(out) not in leaving or out.device.kind != 'cuda':
                continue
            if not all(is_static(d) for d in out.shape) or any(d == 0 for d in out.shape):
                continue
            groups.setdefault((tuple(out.shape), out.dtype.name, str(out.device)), []).append(node)
        mapping: Dict[int, Tensor] = {}
        for members in groups.values():
            for start in range(0, len(members), MAX_BATCH):
                chunk = members[start:start + MAX_BATCH]
                if len(chunk) < 2:
                    continue
                batched = BatchedOperator(chunk)
                for m, new in zip(chunk, batched.outputs):
                    mapping[id(m.outputs[0])] = new
        if not mapping:
            return graph
        return FlowGraph([mapping.get(id(t), t) for t in graph.outputs], graph.inputs)
