"""What the matmul templates (mma.py on CUDA, cpu.py on the CPU) share as templates of
hidet.drivers.templates: the task's GemmSpec, the title of progress bars, the default config and configs'
JSON form. A subclass sets ``name`` and ``config_class`` and defines ``space``, ``source`` and ``check``."""
from __future__ import annotations

from typing import Any, List, Optional

from .spec import GemmSpec


class GemmTemplate:
    name = 'gemm'
    config_class: type = object

    def __init__(self, spec: GemmSpec):
        self.spec = spec

    @property
    def title(self) -> str:
        return f'{self.spec.task.name} {self.spec.shape_text()}'

    def space(self, level: int) -> List[Any]:
        raise NotImplementedError

    def source(self, config, fallback: bool = True) -> str:
        raise NotImplementedError

    def check(self, config) -> str:
        """Why ``config`` cannot run the task ('' when it can)."""
        raise NotImplementedError

    def default(self):
        return self.space(0)[0]

    @staticmethod
    def config_to_json(config) -> dict:
        return config.as_dict()

    def config_from_json(self, obj: dict) -> Optional[Any]:
        """The stored config, or None when it is no longer one this template takes for the task."""
        try:
            cfg = self.config_class(**obj)
        except TypeError:
            return None
        return None if self.check(cfg) else cfg
