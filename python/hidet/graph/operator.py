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

    def run(self) -> List[Tensor]:
        """Compute the outputs from concrete inputs."""
        from hidet.drivers import build_task

        outputs = [_empty(t.shape, t.dtype, self.device) for t in self.outputs]
        # Empty inputs still launch: a kernel reads only the elements its outputs need (a matmul with
        # k = 0 writes zeros, a constant pad of an empty tensor writes the padding).
        if all(t.numel() > 0 for t in outputs):
            module = build_task(self.task, 'cuda' if self.device.is_cuda() else 'cpu')
            module['launch'](*self.inputs, *outputs)
        return outputs

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
