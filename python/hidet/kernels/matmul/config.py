"""The tensor-core matmul template's configs (mma.py builds their kernels): what a config is, the shared memory
and split-k workspace it needs, and whether it can run a GEMM (``check_config``)."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from .spec import GemmSpec
from .tma import BOX_K, tma_unsupported

STAGE_PAD = 8    # floats of padding per row of the epilogue's staging tile
MAX_SMEM = 227 * 1024
# Shared memory of an SM of the H100 / H200 (the GPUs of the wgmma configs); each resident block reserves 1 KB more
SM_SMEM = 228 * 1024
MAX_WORKSPACE_BYTES = 256 << 20



@dataclass(frozen=True)
class MmaConfig:
    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    stages: int
    split_k: int = 1
    wgmma: bool = False  # sm_90: warpgroups of 64 x wn (wm = 64) with wgmma instead of warps with mma.sync
    tma: bool = False  # (wgmma) tiles copied by TMA from a producer warp of their own instead of every thread's cp.async

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn) * (4 if self.wgmma else 1)

    @property
    def threads(self) -> int:
        """The threads computing the tile (a TMA config's block has a producer warp more)."""
        return self.warps * 32

    def name(self) -> str:
        s = f'_s{self.split_k}' if self.split_k > 1 else ''
        g = '_wg' if self.wgmma else ''
        t = '_tma' if self.tma else ''
        return f'{self.bm}x{self.bn}x{self.bk}_w{self.wm}x{self.wn}_p{self.stages}{s}{g}{t}'

    def as_dict(self) -> dict:
        return asdict(self)


def chunk(spec: GemmSpec) -> int:
    """Operand elements per 16 bytes: one cp.async copy, and the padding of a shared row (so ldmatrix reads
    8 rows from 8 bank groups)."""
    return 16 // spec.mma_dtype.nbytes


def is_tf32(spec: GemmSpec) -> bool:
    return spec.mma_dtype.name == 'float32'


WG_ALIGN = 1024  # the 128-byte swizzle's period: wgmma tiles start at multiples of it
WG_NS = (16, 32, 64, 128, 192, 256)  # a warpgroup's n: wgmma's shapes (hidet.lang.cuda.WGMMA_NS, kept light here)
WG_BK = BOX_K  # k of a wgmma config's tile: one 128-byte row of 16-bit values, as TMA's boxes


def stage_elements(spec: GemmSpec, cfg: MmaConfig):
    """Elements of one pipeline stage of A and of B in shared memory."""
    if cfg.wgmma:
        return cfg.bm * cfg.bk, cfg.bn * cfg.bk
    pad = chunk(spec)
    a = cfg.bm * (cfg.bk + pad) if spec.a.k_major else cfg.bk * (cfg.bm + pad)
    b = cfg.bn * (cfg.bk + pad) if spec.b.k_major else cfg.bk * (cfg.bn + pad)
    return a, b


def stage_buffers(spec: GemmSpec, cfg: MmaConfig) -> int:
    """The stages shared memory holds: a wgmma config's block of at most ``stages`` k-tiles (a static k) uses stages
    0 .. its k-tiles - 1 alone (tile kt in stage kt % stages, nothing loaded past its last tile), so it holds only
    those: resnet50's 1x1 convolutions of 64 input channels at batch 32 are one k-tile, and their 64 x 128 tiles
    in 3 stages took 72 KB, three blocks an SM, where one stage leaves the epilogue's staging tile the largest
    use. mma.sync's pipeline reads the next tile's first fragments at the end of each tile: all its stages."""
    if not (cfg.wgmma and isinstance(spec.k, int)):
        return cfg.stages
    return max(1, min(cfg.stages, cdiv(cdiv(spec.k, cfg.bk), cfg.split_k)))


def smem_bytes(spec: GemmSpec, cfg: MmaConfig) -> int:
    a, b = stage_elements(spec, cfg)
    pipeline = stage_buffers(spec, cfg) * (a + b) * spec.mma_dtype.nbytes + (WG_ALIGN - 16 if cfg.wgmma else 0)
    staging = cfg.bm * (cfg.bn + STAGE_PAD) * 4
    return max(pipeline, staging)


def cdiv(a, b):
    """ceil(a / b) of sizes, ints or symbolic."""
    return -(-a // b) if isinstance(a, int) and isinstance(b, int) else (a + (b - 1)) // b


def tiles(spec: GemmSpec, cfg: MmaConfig, m=None) -> int:
    """Output tiles (at ``m`` rows in place of the spec's m: the bound of a symbolic m's range)."""
    return -(-(spec.m if m is None else m) // cfg.bm) * -(-spec.n // cfg.bn) * spec.batch


CLUSTER_MAX = 8  # CTAs of a thread-block cluster, at most (the portable size)


def cluster_split(spec: GemmSpec, cfg: MmaConfig) -> bool:
    """Whether the ``split_k`` blocks of a tile form a thread-block cluster (sm_90) and sum their partial tiles
    through each other's shared memory (DSMEM): each block then sums and writes its share of the tile's rows, with
    no workspace, no counter and no last block doing all of it. Not for a paired epilogue (a block's share would
    need the sums of both columns of each of its pairs): its split-k runs through the workspace."""
    return cfg.wgmma and 1 < cfg.split_k <= CLUSTER_MAX and vector_width(spec) % 4 == 0 and not spec.pair


def workspace_floats(spec: GemmSpec, cfg: MmaConfig, m=None) -> int:
    """Floats of the split-k workspace (0: none, also for cluster_split)."""
    if cfg.split_k == 1 or cluster_split(spec, cfg):
        return 0
    return tiles(spec, cfg, m) * cfg.split_k * cfg.bm * cfg.bn


def check_config(spec: GemmSpec, cfg: MmaConfig) -> str:
    """'' when ``cfg`` can run ``spec``, else why not."""
    c = cfg
    if c.wgmma:
        if spec.mma_dtype.nbytes != 2:
            return 'wgmma configs multiply float16/bfloat16 operands'
        if c.wm != 64 or c.wn not in WG_NS or c.bm % 64 or c.bn % c.wn or c.bk != WG_BK:
            return 'a wgmma config has warpgroup tiles of 64 x (16, 32, 64, 128, 192 or 256), k-tiles of 64'
        if c.bn % 64 and not spec.b.k_major:
            return 'an n-major B is stored in blocks of 64 columns: tiles narrower than 64 need a k-major B'
        if not 1 <= c.warps // 4 <= 2:
            return 'a wgmma config has 1 or 2 warpgroups'
        if c.stages < 3:
            return 'a wgmma config has at least 3 stages (one wgmma group stays in flight)'
        if c.tma:
            why = tma_unsupported(spec)
            if why:
                return why
    elif c.tma:
        return 'TMA configs are wgmma configs'
    elif c.bm % c.wm or c.bn % c.wn or c.wm % 16 or c.wn % 16 or c.bk % 16:
        return 'tiles must be multiples of the warp tiles (m16, n16, k16)'
    if not 1 <= c.warps <= 8:
        return 'a block has 1 to 8 warps'
    if c.stages < 2:
        return 'at least 2 stages'
    for rows, cols, k_major in ((c.bm, c.bk, spec.a.k_major), (c.bn, c.bk, spec.b.k_major)) if not c.tma else ():
        if (rows * cols // chunk(spec)) % c.threads:
            return 'each thread copies whole 16-byte chunks of every tile'
        if c.threads % ((cols if k_major else rows) // chunk(spec)):
            return 'each thread copies chunks of one column of every tile'
    v = vector_width(spec)
    if spec.pair and (c.bn % (2 * spec.pair) or spec.pair % v):
        return 'a paired epilogue needs tiles of whole column pairs (n a multiple of twice the pair width)'
    if spec.pair and (c.bm * c.bn // 2 // v) % min(c.threads, c.bm * c.bn // 2 // v):
        return 'each thread stores whole vectors of the output tile, or at most one'
    if not spec.pair and (c.bm * c.bn // v) % c.threads:
        return 'each thread stores whole vectors of the output tile'
    if smem_bytes(spec, c) > MAX_SMEM:
        return 'too much shared memory'
    if c.split_k > 1 and not isinstance(spec.m, int):
        return 'split-k needs a static m (or a bounded range of a symbolic one: see dispatch.py)'
    if c.split_k > 1 and workspace_floats(spec, c) * 4 > MAX_WORKSPACE_BYTES:
        return 'the split-k workspace is too large'
    if c.split_k > 1:
        k_tiles = -(-spec.k // c.bk)
        per_split = -(-k_tiles // c.split_k)
        if per_split * (c.split_k - 1) >= k_tiles:
            return 'some k splits would get no k tiles'
    return ''


def vector_width(spec: GemmSpec) -> int:
    """Output elements per thread in the epilogue: 16 bytes of them where they divide n, else 8 bytes' (on the
    H100, 16-byte vectors took a residual epilogue of 100352 x 256 x 64 from 124 to 83 µs, 8-byte ones to 119,
    and the bare GEMM from 38 to 34)."""
    nbytes = spec.out_dtype.nbytes
    for vector_bytes in (16, 8):
        v = vector_bytes // nbytes
        if v > 1 and isinstance(spec.n, int) and spec.n % v == 0:
            return v
    return 8 // nbytes if nbytes <= 8 else 1


def vector_store(spec: GemmSpec) -> bool:
    v = vector_width(spec)
    return spec.out_n_contiguous and spec.n % v == 0 and v > 1


def kernel_name(spec: GemmSpec, cfg: MmaConfig) -> str:
    """The task's name (its first 40 characters), its GEMM shape and the config: a profile's rows of distinct tasks
    whose fused names begin alike (resnet50's convolutions with their batch-norm epilogues) stay apart."""
    shape = re.sub(r'\W+', '_', spec.shape_text()).strip('_')
    return f'mma_{spec.task.name[:40]}_{shape}_{cfg.name()}'
