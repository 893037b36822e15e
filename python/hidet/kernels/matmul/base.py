"""What the matmul templates (mma.py on CUDA, cpu.py on the CPU) share beyond hidet.kernels.template.Template:
the task's GemmSpec and the title of progress bars. A subclass sets ``name`` and ``config_class`` and defines
``space``, ``source`` and ``check``."""
from __future__ import annotations

from hidet.kernels.template import Template

from .spec import GemmSpec


class GemmTemplate(Template):
    name = 'gemm'

    def __init__(self, spec: GemmSpec):
        self.spec = spec

    @property
    def title(self) -> str:
        return f'{self.spec.task.name} {self.spec.shape_text()}'
