"""Operator: a Task applied to tensors. On concrete inputs it runs at once (compiling its kernel on
first use); on symbolic inputs it records itself in its outputs' ``trace``."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from hidet.graph.tensor import Tensor, _empty
from hidet.ir.task import Task


class Operator:
    def __init__(self, inputs: Sequence[Tensor], attrs: Dict[str, Any], task: Task):
        self.inputs: List[Tensor] = list(inputs)
        self.attrs = attrs
        self.task = task
        devices = {t.device for t in self.inputs}
        if len(devices) > 1:
            raise ValueError(f'{task.name}: inputs are on different devices ({", ".join(sorted(map(str, devices)))}); '
                             'move them to one device with .to(device)')
        if not devices:
            raise ValueError(f'{task.name}: an operator needs at least one input tensor')
        self.device = devices.pop()
        self.outputs: List[Tensor] = [
            Tensor(out.shape, out.dtype, self.device, None, trace=(self, i)) for i, out in enumerate(task.outputs)
        ]

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def target(self) -> str:
        return 'cuda' if self.device.is_cuda() else 'cpu'

    def run(self) -> List[Tensor]:
        """Compute the outputs from concrete inputs."""
        return self.compute(self.inputs)

    def compute(self, inputs: Sequence[Tensor]) -> List[Tensor]:
        """Run this operator's kernel on concrete ``inputs`` (shaped like ``self.inputs``) into new tensors."""
        from hidet.drivers import build_task

        outputs = [_empty(t.shape, t.dtype, self.device) for t in self.outputs]
        # Empty inputs still launch: a kernel reads only the elements its outputs need (a matmul with
        # k = 0 writes zeros, a constant pad of an empty tensor writes the padding).
        if all(t.numel() > 0 for t in outputs):
            build_task(self.task, self.target)['launch'](*inputs, *outputs)
        return outputs

    def clone(self, inputs: Sequence[Tensor]) -> 'Operator':
        """The same operator (task and attributes) applied to other inputs of the same shapes and dtypes;
        graph passes rebuild graphs with it."""
        for old, new in zip(self.inputs, inputs):
            if old.shape != new.shape or old.dtype != new.dtype:
                raise ValueError(f'{self.name}.clone: input {new.signature()} does not match {old.signature()}')
        op = object.__new__(type(self))
        op.inputs, op.attrs, op.task, op.device = list(inputs), self.attrs, self.task, self.device
        op.outputs = [Tensor(t.shape, t.dtype, self.device, None, trace=(op, i)) for i, t in enumerate(self.outputs)]
        return op

    def get_outputs(self) -> List[Tensor]:
        """All outputs: computed at once for concrete inputs, symbolic otherwise."""
        if any(t.is_symbolic() for t in self.inputs):
            return list(self.outputs)
        return self.run()

    def get_output(self, index: int = 0) -> Tensor:
        return self.get_outputs()[index]

    def __repr__(self) -> str:
        attrs = ', '.join(f'{k}={v!r}' for k, v in self.attrs.items())
        return f'{self.name}({attrs})'
