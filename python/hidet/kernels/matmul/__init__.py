"""Matmul schedule templates (one file per template): the tensor-core template for float16/bfloat16 on
sm_80+ (mma.py) with its configs (config.py), search spaces (space.py) and TMA copies on sm_90 (tma.py), the
CPU template (cpu.py), what both compute with (values.py) and share as templates (base.py), and the split of a
task into prologue → matmul → epilogue that lets fused operators use them (spec.py).

``find_matmul_template(task, target)`` (in hidet.kernels' table): a matmul task (a
MatmulOp, or a fused operator anchored by one) gets the tensor-core template on CUDA with 16-bit float
operands, and the CPU template on the CPU with float32/float16/bfloat16 operands; ungrouped convolutions
get them too, as implicit GEMMs (k folded from the channels and the window), but not matrix-vector
products (grouped and depthwise convolutions); everything else (float32 on CUDA — full fp32 by default —,
non-elementwise prologues or epilogues, pre-sm_80 GPUs) stays with the auto-scheduler. Float32 tasks
with the ``tf32`` attribute (PassContext.set_use_tensor_core) get the tensor-core template in TF32.
"""
from __future__ import annotations

from typing import List, Optional

from hidet.ir.task import Task
from hidet.kernels.template import WGMMA_ARCH, arch_number

from .base import GemmTemplate
from .config import MmaConfig, check_config
from .spec import GemmSpec, MMA_DTYPES, NotGemm, explain, match_gemm, operand_modes, paired_epilogue

MIN_ARCH = 80


class MmaMatmulTemplate(GemmTemplate):
    """The tensor-core matmul template applied to one task."""

    name = 'matmul-mma-v3'  # v3: warp-specialized TMA, convolutions' TMA (im2col) configs (v2: TMA from thread 0)
    config_class = MmaConfig

    def __init__(self, spec: GemmSpec, wgmma: bool = False):
        super().__init__(spec)
        self.wgmma = wgmma  # an sm_90 GPU: the spaces hold warpgroup (wgmma) configs

    def space(self, level: int) -> List[MmaConfig]:
        # (loads when a kernel is built, so import hidet stays light)
        from .space import space

        return space(self.spec, level, wgmma=self.wgmma)

    def source(self, config: MmaConfig, fallback: bool = True) -> str:
        # (loads when a kernel is built, so import hidet stays light)
        from .source import template_source

        return template_source(self.spec, config, fallback)

    def candidates_source(self, configs: List[MmaConfig]) -> str:
        # (loads when a kernel is built, so import hidet stays light)
        from .source import candidates_source

        return candidates_source(self.spec, configs)

    def check(self, config: MmaConfig) -> str:
        return check_config(self.spec, config)


CPU_DTYPES = ('float32', 'float16', 'bfloat16')


def find_matmul_template(task: Task, target: str, arch: Optional[str] = None):
    """The matmul template of ``task`` on ``target``, or None. ``arch``: the CUDA arch the kernels are built for;
    None (a direct call, an API edge) takes the current options' (or the GPU's)."""
    if task.symbols():
        return _find_symbolic(task, target, arch)
    if target == 'cpu':
        # (loads when a kernel is built, so import hidet stays light)
        from .cpu import CpuMatmulTemplate

        try:
            spec = match_gemm(task, CPU_DTYPES, fold_k=True)
        except NotGemm:
            return None
        # a matrix-vector product (or a depthwise convolution: a batch of them) is memory-bound: the
        # auto-scheduler's row reductions suit it better than 16-wide register blocks
        return CpuMatmulTemplate(spec) if spec.n > 1 else None
    if target != 'cuda':
        return None
    dtypes = MMA_DTYPES + ('float32',) if task.attrs.get('tf32') else MMA_DTYPES  # TF32 where allowed
    try:
        spec = match_gemm(task, dtypes)
    except NotGemm:
        try:  # an implicit GEMM (a convolution)
            spec = match_gemm(task, dtypes, fold_k=True)
        except NotGemm:
            return None
        if spec.n < 16 or spec.k < 16:  # a batch of matrix-vector products: the auto-scheduler's reductions
            return None
    if arch is None:
        # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
        # templates through the fusion policy, stays light)
        from hidet.backend.compiler import cuda_arch

        try:
            arch = cuda_arch()
        except Exception:  # noqa: BLE001 - no GPU and no arch set: the build fails later with a clear error
            return None
    if arch_number(arch) < MIN_ARCH:
        return None
    if spec.merged_epilogue:  # not yet run on a GPU with this template: the auto-scheduler keeps these
        return None
    return MmaMatmulTemplate(spec, wgmma=arch_number(arch) == WGMMA_ARCH)


def _find_symbolic(task: Task, target: str, arch: Optional[str]):
    """A symbolic m (the rows of a linear layer on [batch, seq, k]) on CUDA: the dispatch over ranges of m
    (dispatch.py); other symbolic GEMMs take the auto-scheduler."""
    # (loads when a kernel is built, so import hidet stays light)
    from .dispatch import SymbolicMmaTemplate, symbolic_ok

    if target != 'cuda':
        return None
    dtypes = MMA_DTYPES + ('float32',) if task.attrs.get('tf32') else MMA_DTYPES
    try:
        spec = match_gemm(task, dtypes)
    except NotGemm:
        return None
    except TypeError:  # a shape rule written for static sizes met a symbolic one: the auto-scheduler's
        return None
    if not symbolic_ok(spec) or spec.merged_epilogue:
        return None
    try:
        return SymbolicMmaTemplate(spec, target, lambda t: find_matmul_template(t, target, arch))
    except NotGemm:
        return None


__all__ = ['MmaMatmulTemplate', 'MmaConfig', 'GemmSpec', 'NotGemm', 'match_gemm', 'explain', 'find_matmul_template',
           'paired_epilogue']
