"""The tensor-core template for a matmul whose m is symbolic (a linear layer on ``[batch, seq, k]``: m is
batch x seq): one kernel per range of m, chosen at build time.

Each range ``m <= bound`` is tuned as a static task — the task taken at m = bound (the top range at
``TOP_M``) — by the same tuner and cache as any static matmul, so level 0 takes each range's default and
levels 1-2 benchmark each range's candidates at build time. The library holds the kernel of each distinct
chosen config; its ``launch`` entry computes m from the dims and runs the kernel of the first range that
holds it. Ranges whose configs are the same share one kernel. Split-k kernels size their workspace for
their range's bound (the top range, unbounded, never splits).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from hidet.ir.expr import evaluate_dim, symbols_of
from hidet.ir.task import Task
from hidet.kernels.matmul.source import template_source

from .base import GemmTemplate
from .config import MmaConfig
from .spec import GemmSpec, NotGemm

BOUNDS = (16, 32, 64, 128, 256, 512, 1024, 2048)  # the ranges' largest m; above the last: the top range
TOP_M = 4096


def symbol_values_for_m(spec: GemmSpec, m: int) -> Optional[Dict[str, int]]:
    """Symbol values at which the task's m is ``m``: every symbol 1 but one, which takes the rest (m must be
    a product of symbols and an int), or None."""
    names = symbols_of([spec.m])
    ones = {name: 1 for name in names}
    base = evaluate_dim(spec.m, ones)
    if base <= 0 or m % base:
        return None
    for name in names:
        values = dict(ones)
        values[name] = m // base
        if evaluate_dim(spec.m, values) == m:
            return values
    return None


class SymbolicMmaTemplate(GemmTemplate):
    """The dispatch over ranges of a symbolic m (n, k and the batch static)."""

    name = 'matmul-mma-dispatch-v1'
    config_class = MmaConfig

    def __init__(self, spec: GemmSpec, target: str, static_template):
        """``static_template``: a static task → its template (or None). NotGemm unless every range's static
        task has one (the architecture, or a shape rule of the static template, may turn one down)."""
        super().__init__(spec)
        self.ranges: List[Optional[int]] = list(BOUNDS) + [None]
        self._points = []
        for bound in self.ranges:
            values = symbol_values_for_m(spec, bound or TOP_M)
            if values is None:
                raise NotGemm(f'm = {spec.m!r} is not a product of symbols')
            task = spec.task.instantiate(values)
            template = static_template(task)
            if template is None:
                raise NotGemm(f'{task.name} at m = {bound or TOP_M} is not a tensor-core GEMM')
            self._points.append((task, target, template))

    def points(self, task: Task, target: str) -> List[tuple]:
        return list(self._points)

    def source_of(self, configs: List[MmaConfig]) -> str:
        from dataclasses import replace

        ranges = []
        for bound, cfg in zip(self.ranges, configs):
            if bound is None and cfg.split_k > 1:  # unbounded: no workspace size to give it
                cfg = replace(cfg, split_k=1)
            if cfg.tma:  # (tuned at one m; tensor maps need static sizes): the same tiles, copied by cp.async
                cfg = replace(cfg, tma=False)
            if ranges and ranges[-1][1] == cfg:
                ranges[-1] = (bound, cfg)  # the same kernel: one range
            else:
                ranges.append((bound, cfg))
        return template_source(self.spec, ranges)

    def space(self, level: int) -> List[MmaConfig]:
        raise NotImplementedError('a dispatch is tuned through its points (one static task per range)')

    def source(self, config, fallback: bool = True) -> str:
        return self.source_of([config] * len(self.ranges))

    def check(self, config: MmaConfig) -> str:
        return ''


def symbolic_ok(spec: GemmSpec) -> bool:
    """Whether the dispatch serves the spec: m symbolic, n, k and the batch static."""
    return (not isinstance(spec.m, int) and isinstance(spec.n, int) and isinstance(spec.k, int)
            and all(isinstance(b, int) for b in spec.batch_shape))
