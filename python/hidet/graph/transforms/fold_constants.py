"""Constant folding: a node whose inputs are all constants runs once, at optimization time, and
its outputs become constants (weight transposes, casts and reshapes happen once, not per call).

Folded nodes are evaluated on the host from their tasks' compute definitions (hidet.ir.evaluate, numpy):
no kernel is generated or compiled for them, and a chain of folded nodes stays in host arrays, each
result copied to the graph's device once. Only a task the evaluator refuses (a function it lacks, a
reduction too large to be worth it on the host) runs its kernel, compiled together with the other such
tasks (in parallel); the 'graph' log names each one and why."""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator
from hidet.graph.tensor import Tensor, _from_host_values, _host_values
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.evaluate import evaluate, evaluation_problem
from hidet.utils import logs

# Folding can grow memory (broadcasting a small constant into a big one): fold only while the
# outputs stay within this many bytes, or no larger than the inputs.
MAX_FOLDED_BYTES = 64 << 20


class FoldConstants(GraphPass):
    name = 'fold_constants'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        # (the drivers load at the first kernel built: import hidet stays light)
        from hidet.drivers.build_task import build_tasks

        log = logs.logger('graph')
        folded = set()  # ids of the tensors that will be constants
        on_host, by_kernel = set(), set()  # ids of the nodes that run now, on the host or by their kernels
        jobs = {}
        for node in graph.nodes:
            if all(not t.is_symbolic() or id(t) in folded for t in node.inputs) and _small_enough(node):
                folded.update(id(t) for t in node.outputs)
                problem = evaluation_problem(node.task)
                if problem is None:
                    on_host.add(id(node))
                    continue
                by_kernel.add(id(node))
                log.info('fold_constants: %s runs its kernel (the host evaluator: %s)', node.task.name, problem)
                if all(t.numel() > 0 for t in node.outputs):
                    jobs.setdefault(node.task.key(), (node.task, node.target))
        if not on_host and not by_kernel:
            return graph
        if jobs:
            build_tasks(list(jobs.values()), options=ctx.options)
        host = _HostValues(graph, on_host)

        def fold(node: Operator, inputs: List[Tensor]):
            if id(node) in on_host:
                return host.run(node, inputs)
            if id(node) in by_kernel:
                return node.compute(inputs, options=ctx.options)
            return None

        graph = rewrite_graph(graph, fold)
        log.info('fold_constants: %d operators evaluated on the host, %d by %d kernels', len(on_host) - host.fallbacks,
                 len(by_kernel) + host.fallbacks, len(jobs) + host.fallbacks)
        return graph


class _HostValues:
    """Host arrays of the folded tensors (by id) while host-evaluated nodes still read them, so a chain of
    folded nodes reads each constant from its device once and keeps its intermediates on the host."""

    def __init__(self, graph: FlowGraph, on_host: set):
        self.arrays: Dict[int, np.ndarray] = {}
        self.readers: Dict[int, int] = {}  # id(tensor) → host-evaluated nodes that still read it
        for node in graph.nodes:
            if id(node) in on_host:
                for t in node.inputs:
                    self.readers[id(t)] = self.readers.get(id(t), 0) + 1
        self.fallbacks = 0  # nodes evaluated by their kernels after the host evaluator failed

    def run(self, node: Operator, inputs: List[Tensor]) -> List[Tensor]:
        arrays = [self.arrays[id(t)] if id(t) in self.arrays else _host_values(t) for t in inputs]
        for old, t in zip(node.inputs, inputs):
            self.readers[id(old)] -= 1
            if self.readers[id(old)] == 0:
                self.arrays.pop(id(t), None)
        try:
            values = evaluate(node.task, arrays)
        except Exception as e:  # (a gap in the evaluator must not fail a compile: the kernel computes it)
            logs.logger('graph').warning('fold_constants: the host evaluator failed on %s (%s: %s); running its '
                                         'kernel', node.task.name, type(e).__name__, e)
            self.fallbacks += 1
            return node.compute(inputs)
        outputs = [_from_host_values(v, t.dtype, node.device) for v, t in zip(values, node.outputs)]
        for old, t, v in zip(node.outputs, outputs, values):
            if self.readers.get(id(old), 0):
                self.arrays[id(t)] = v
        return outputs


def _small_enough(node) -> bool:
    if node.task.symbols():  # constants in, a symbolic size out (a slice of a table to the sequence length)
        return False
    out_bytes = sum(t.nbytes for t in node.outputs)
    return out_bytes <= MAX_FOLDED_BYTES or out_bytes <= sum(t.nbytes for t in node.inputs)
