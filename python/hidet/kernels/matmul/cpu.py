"""The CPU GEMM template, in Hidet Script: float32 / float16 / bfloat16 operands, float32 accumulation.

The output is cut into MC x NC tiles, run in parallel (OpenMP) over (batch, tile). For each KC-deep slice
of K a tile packs its operands into contiguous float32 buffers — ``a`` as [KC][MC], ``b`` as [KC][NC],
zero past the edges — evaluating any prologue (a cast, a transpose, an activation) once per element
there; then MR x NR register blocks of the tile accumulate over the slice: each k step broadcasts MR
values of ``a`` and multiplies them with NR consecutive values of ``b``, a loop the C compiler turns
into vector FMAs with the accumulators in registers. After the last slice the epilogue (bias, activation,
residual, cast) runs per output element.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import List

from .base import GemmTemplate
from .spec import GemmSpec
from .values import GemmValues

MAX_LOCAL_FLOATS = 64 * 1024  # floats of the packed buffers and the accumulator tile, on the thread's stack (256 KiB)


@dataclass(frozen=True)
class CpuConfig:
    mc: int  # tile rows
    nc: int  # tile columns
    kc: int  # depth of a packed slice
    mr: int  # register block rows
    nr: int  # register block columns

    def name(self) -> str:
        return f'{self.mc}x{self.nc}x{self.kc}_r{self.mr}x{self.nr}'

    def as_dict(self) -> dict:
        return asdict(self)


def check_config(spec: GemmSpec, c: CpuConfig) -> str:
    """Why ``c`` cannot run ``spec`` ('' when it can)."""
    if min(c.mc, c.nc, c.kc, c.mr, c.nr) <= 0:
        return 'sizes must be positive'
    if c.mc % c.mr or c.nc % c.nr:
        return 'the tile is not a whole number of register blocks'
    if c.kc * (c.mc + c.nc) + c.mc * c.nc > MAX_LOCAL_FLOATS:
        return 'the packed buffers do not fit the stack budget'
    if spec.pair and c.nc % (2 * spec.pair):
        return 'a paired epilogue needs tiles of whole column pairs (a multiple of twice the pair width)'
    return ''


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def default_config(spec: GemmSpec) -> CpuConfig:
    """8 x 16 register blocks (the level-2 winner for 1024^3 float32 on an AVX-512 machine: 80 GFLOP/s on 2
    cores), in 32 x 128 tiles, 256-deep slices; no larger than the problem (a GEMV gets an 8-row tile)."""
    mr, nr = 8, 16
    nc = min(128, _round_up(spec.n, nr))
    if spec.pair:  # (whole column pairs: a multiple of 2 x the pair width, itself a multiple of nr)
        nc = min(_round_up(nc, math.lcm(2 * spec.pair, nr)), _round_up(spec.n, 2 * spec.pair))
    return CpuConfig(min(32, _round_up(spec.m, mr)), nc, min(256, spec.k), mr, nr)


def space(spec: GemmSpec, level: int) -> List[CpuConfig]:
    first = default_config(spec)
    if level == 0:
        return [first]
    cfgs = [first]
    for mr, nr in ((8, 16), (4, 32), (4, 64), (6, 32), (2, 64)):
        for mc, nc in ((32, 128), (64, 256), (96, 128), (128, 64)):
            for kc in ((256, 128) if level == 2 else (256,)):
                mc2, nc2 = min(mc, _round_up(spec.m, mr)), min(nc, _round_up(spec.n, nr))
                cfgs.append(CpuConfig(_round_up(mc2, mr), _round_up(nc2, nr), min(kc, spec.k), mr, nr))
    seen, out = set(), []
    for c in cfgs:
        if c not in seen and not check_config(spec, c):
            seen.add(c)
            out.append(c)
    return out[:8 if level == 1 else 40]


def kernel_name(spec: GemmSpec, cfg: CpuConfig) -> str:
    return f'gemm_{spec.task.name[:40]}_{cfg.name()}'


def build_script_module(spec: GemmSpec, cfg: CpuConfig):
    """The Hidet Script module of the kernel; its parameters: the task's inputs, then the output."""
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    import hidet
    from hidet.lang import attr, f32, grid, register_tensor

    why = check_config(spec, cfg)
    if why:
        raise ValueError(f'CPU matmul config {cfg.name()} for {spec.shape_text()}: {why}')
    values = GemmValues(spec)
    a_value, b_value, epilogue, out_index = values.a_value, values.b_value, values.epilogue, values.out_index
    M, N, K = spec.m, spec.n, spec.k
    MC, NC, KC, MR, NR = cfg.mc, cfg.nc, cfg.kc, cfg.mr, cfg.nr
    TM, TN = -(-M // MC), -(-N // NC)
    TILES = spec.batch * TM * TN
    RS = list(range(MR))
    PAIR = spec.pair
    out = values.out
    name = kernel_name(spec, cfg)

    with hidet.script_module() as module:
        @hidet.script
        def cpu_gemm():
            attr.func_kind = 'cpu_kernel'
            attr.func_name = name
            for t in grid(TILES, attrs='p'):
                bz = t / (TM * TN)
                m0 = (t / TN) % TM * MC
                n0 = t % TN * NC
                ap = register_tensor(f32, [KC, MC])
                bp = register_tensor(f32, [KC, NC])
                acc = register_tensor(f32, [MC, NC])
                for i, j in grid(MC, NC):
                    acc[i, j] = 0.0
                for k0 in range(0, K, KC):
                    kc = min(KC, K - k0)
                    # pack: the prologue evaluated once per element, zero past the edges
                    for kk in range(kc):
                        for i in range(MC):
                            v: f32 = 0.0
                            if m0 + i < M:
                                v = f32(a_value(bz, m0 + i, k0 + kk))
                            ap[kk, i] = v
                    for kk in range(kc):
                        for j in range(NC):
                            w: f32 = 0.0
                            if n0 + j < N:
                                w = f32(b_value(bz, n0 + j, k0 + kk))
                            bp[kk, j] = w
                    # register blocks: MR broadcasts x NR-wide vector FMAs per k step
                    for i0 in range(0, MC, MR):
                        for j0 in range(0, NC, NR):
                            c = register_tensor(f32, [MR, NR])
                            for r in RS:
                                for j in range(NR):
                                    c[r, j] = acc[i0 + r, j0 + j]
                            for kk in range(kc):
                                for r in RS:
                                    x = ap[kk, i0 + r]
                                    for j in range(NR):
                                        c[r, j] += x * bp[kk, j0 + j]
                            for r in RS:
                                for j in range(NR):
                                    acc[i0 + r, j0 + j] = c[r, j]
                for i in range(MC):
                    if m0 + i < M:
                        if PAIR:  # (the first column of each pair: j % 2P < P)
                            for jp in range(NC // 2):
                                j = jp / PAIR * (2 * PAIR) + jp % PAIR
                                if n0 + j < N:
                                    out[out_index(bz, m0 + i, n0 + j)] = epilogue(bz, m0 + i, n0 + j, acc[i, j],
                                                                                  acc[i, j + PAIR])
                        else:
                            for j in range(NC):
                                if n0 + j < N:
                                    out[out_index(bz, m0 + i, n0 + j)] = epilogue(bz, m0 + i, n0 + j, acc[i, j])

    kernel = module.functions[-1]
    kernel.params[:0] = values.ins + [values.out]
    return module


def template_source(spec: GemmSpec, cfg: CpuConfig) -> str:
    """C++ source of the kernel library: the kernel and the ``launch`` entry of the kernel ABI."""
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    from hidet.backend.codegen import forwarding_launch, generate

    script = generate(build_script_module(spec, cfg).ir_module())
    entry = forwarding_launch(spec.task.name, kernel_name(spec, cfg), len(spec.task.inputs) + 1, spec.task.signature())
    return '\n'.join([script, ''] + entry)


class CpuMatmulTemplate(GemmTemplate):
    """The CPU matmul template applied to one task."""

    name = 'matmul-cpu-v1'
    config_class = CpuConfig

    def space(self, level: int) -> List[CpuConfig]:
        return space(self.spec, level)

    def source(self, config: CpuConfig, fallback: bool = True) -> str:
        return template_source(self.spec, config)

    def check(self, config: CpuConfig) -> str:
        return check_config(self.spec, config)
