"""Devices: ``'cpu'``, ``'cuda'`` (the current CUDA device) and ``'cuda:N'``."""
from __future__ import annotations

from dataclasses import dataclass

CPU_KIND, CUDA_KIND = 1, 2  # DLPack device codes, as the C++ runtime takes them


@dataclass(frozen=True)
class Device:
    kind: str  # 'cpu' or 'cuda'
    id: int = 0

    def __str__(self) -> str:
        return 'cpu' if self.kind == 'cpu' else f'cuda:{self.id}'

    def __repr__(self) -> str:
        return f"device('{self}')"

    def is_cpu(self) -> bool:
        return self.kind == 'cpu'

    def is_cuda(self) -> bool:
        return self.kind == 'cuda'

    @property
    def dl_kind(self) -> int:
        return CPU_KIND if self.is_cpu() else CUDA_KIND


def device(spec) -> Device:
    """The Device named by ``spec``: a Device, ``'cpu'``, ``'cuda'``, ``'cuda:N'``, or a ``torch.device``."""
    if isinstance(spec, Device):
        return spec
    if type(spec).__name__ == 'device' and type(spec).__module__ == 'torch':
        spec = str(spec)
    if isinstance(spec, str):
        kind, _, index = spec.partition(':')
        if kind == 'cpu' and not index:
            return Device('cpu', 0)
        if kind == 'cuda':
            if not index:
                # (a circle at import time: hidet.runtime.cuda reads devices)
                from hidet.runtime.cuda import current_device

                return Device('cuda', current_device())
            if index.isdigit():
                return Device('cuda', int(index))
    raise ValueError(f"invalid device {spec!r}: expected 'cpu', 'cuda' or 'cuda:N'")
