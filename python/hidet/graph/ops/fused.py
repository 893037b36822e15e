"""FusedOperator: several operators run as one, its task the composition of theirs (made by the
fusion pass, hidet/graph/transforms/fuse_operators.py)."""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Sequence

from hidet.graph.flow_graph import display_name
from hidet.graph.operator import Operator
from hidet.graph.tensor import Tensor
from hidet.ir.compose import TensorReplacer, has_reduction
from hidet.ir.compute import TensorNode, tensor_input
from hidet.ir.task import Task


def is_anchor(op: Operator) -> bool:
    """Operators with a reduction anchor a fused group; the others are injective."""
    return _task_has_reduction(op.task)


@lru_cache(maxsize=4096)
def _task_has_reduction(task: Task) -> bool:
    return has_reduction(task.outputs)


class FusedOperator(Operator):
    def __init__(self, members: Sequence[Operator], group_inputs: Sequence[Tensor], inputs: Sequence[Tensor]):
        """``members`` in topological order; ``group_inputs`` the tensors they read from outside the
        group, and ``inputs`` what those are bound to in the graph being built."""
        self.members = list(members)
        task = self.compose(self.members, group_inputs)
        super().__init__(inputs, {'fused': [m.task.name for m in self.members]}, task,
                         device=self.members[0].device)  # (a group of creations has no inputs)

    @property
    def display_name(self) -> str:
        return f'Fused[{", ".join(display_name(m) for m in self.members)}]'

    @staticmethod
    def compose(members: Sequence[Operator], group_inputs: Sequence[Tensor]) -> Task:
        """One task computing the last member's outputs from ``group_inputs``."""
        nodes: Dict[int, TensorNode] = {id(t): tensor_input(f'in{i}', t.dtype, t.shape) for i, t in enumerate(group_inputs)}
        for member in members:
            replace = TensorReplacer({id(param): nodes[id(arg)] for param, arg in zip(member.task.inputs, member.inputs)})
            for t, out in zip(member.outputs, member.task.outputs):
                nodes[id(t)] = replace(out)
        sink = members[-1]
        name = 'fused_' + '_'.join(m.task.name for m in members)
        if len(name) > 64:
            name = f'{name[:56]}_{len(members)}ops'
        return Task(name, [nodes[id(t)] for t in group_inputs], [nodes[id(t)] for t in sink.outputs])

    def clone(self, inputs: Sequence[Tensor]) -> 'Operator':
        op = super().clone(inputs)
        op.members = self.members
        return op
