"""Kernel templates: how a task runs fast. Hand-written kernels (Hidet Script) that replace the auto-scheduler
for the tasks they recognize, one folder per family; operators (hidet.graph.ops) describe what is computed
and know nothing of them; the build drivers ask ``find`` for each task.

    matmul/     tensor-core GEMMs and implicit-GEMM convolutions on CUDA (mma.py, tma.py, dispatch.py for a
                symbolic m), the CPU GEMM (cpu.py), and the split of a fused task into prologue → GEMM →
                epilogue (spec.py) that the other families reuse
    depthwise/  depthwise 2-D convolutions (CUDA, CPU)
    attention/  the fused attention task (CUDA, CPU)

What a template object provides is in template.py.
"""
from __future__ import annotations

from typing import Optional

from hidet.ir.task import Task
from hidet.kernels.attention import find_attention_template
from hidet.kernels.depthwise import find_depthwise_template
from hidet.kernels.matmul import find_matmul_template
from hidet.kernels.template import Template

# Which family a task may belong to, asked in order; each finder ``(task, target, arch)`` returns a template for
# the task or None (the symbolic tasks its template cannot serve among them). A new family adds its finder here.
FINDERS = (find_matmul_template, find_attention_template, find_depthwise_template)


def find(task: Task, target: str, arch: Optional[str] = None) -> Optional[Template]:
    """The template for ``task`` on ``target``, or None (the auto-scheduler runs it). ``arch``: the CUDA arch
    the kernels are built for (the build drivers pass their options'); None: the current options' (or the GPU's),
    where a family depends on it."""
    for finder in FINDERS:
        template = finder(task, target, arch)
        if template is not None:
            return template
    return None


__all__ = ['FINDERS', 'Template', 'find']
