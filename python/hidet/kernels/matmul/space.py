"""Search spaces of the tensor-core matmul template: level 0 is one default per shape class, level 1 a
handful of tile shapes around it, level 2 the tile shapes x k-tile x pipeline depth x split-k. On sm_90
(``wgmma=True``) the spaces also hold warpgroup (wgmma) configs, and large GEMMs default to one."""
from __future__ import annotations

from dataclasses import replace
from typing import List, Tuple

from hidet.ir.schedulers.lowering import pow2_ceil

from hidet.kernels.template import sm_count

from .config import MAX_SMEM, SM_SMEM, WG_BK, MmaConfig, check_config, smem_bytes, tiles
from .tma import tma_unsupported
from .spec import GemmSpec

LEVEL1_MAX, LEVEL2_MAX = 8, 40
LEVEL2_WG_MAX = 24  # (wgmma spaces: see _wgmma_space)
LEVEL1_TMA, LEVEL2_TMA = 4, 8  # TMA twins of the first candidates, in place of the last cp.async ones (a
# space's size is its tuning time: max-autotune of resnet50 took 273 s cold of the 300 allowed)

# (BM, BN, WM, WN): block tile and warp tile
LARGE_SHAPES = [(128, 256, 64, 64), (256, 128, 64, 64), (128, 128, 64, 64), (128, 128, 64, 32), (128, 64, 64, 32),
                (64, 128, 32, 64), (64, 64, 32, 32)]
SMALL_SHAPES = [(16, 64, 16, 16), (16, 128, 16, 32), (16, 256, 16, 64), (32, 64, 32, 16), (32, 128, 32, 32),
                (64, 128, 32, 32)]
# (BM, BN, WN) of wgmma configs: warpgroups of 64 x WN
WG_SHAPES = [(128, 256, 256), (128, 192, 192), (128, 128, 128), (64, 256, 256), (64, 128, 128), (128, 64, 64),
             (64, 256, 128), (64, 64, 64), (64, 32, 32), (64, 16, 16)]  # (the last two: GEMMs narrower than 64 alone)
WG_MAX_STAGES = 4
# 64 x 64 wgmma tiles (16 KB a stage) of a dense GEMM keep 6 stages in flight: the skinny GEMMs of transformers at
# batch 1 stream their weights from DRAM, and 4 stages left them waiting (H100, weights read cold, as in a model:
# 128x2304x768 5.7 µs in 4 stages, 4.9 in 6, cuBLAS 5.2; 128x3072x768 5.9, 4.8, 5.5; 128x768x768 5.3, 4.4, 4.3;
# 128x768x3072 split 4: 9.4, 8.5, 7.2. `bench_matmul.py --cold --linear --configs`)
WG_SMALL_TILE_STAGES = 6


def _fits(spec: GemmSpec, bm: int, bn: int) -> bool:
    """Tiles no larger than the problem needs (rounded up to a power of two)."""
    return bm <= max(16, pow2_ceil(spec.m)) and bn <= max(16, pow2_ceil(spec.n))


def _k_tiles(spec: GemmSpec, bk: int) -> int:
    return -(-spec.k // bk)


def default_split(spec: GemmSpec, bm: int, bn: int, bk: int, sms: int) -> int:
    """Split K when the tiles fill less than one wave: aim at one block per SM (two for the small tiles of
    GEMV-like shapes), keeping at least four k-tiles per split and every split some k-tiles (72 k-tiles do not
    split 16 ways: 15 splits of 5 take them all)."""
    t = -(-spec.m // bm) * -(-spec.n // bn) * spec.batch
    target = 2 * sms if bm <= 32 else sms
    k_tiles = _k_tiles(spec, bk)
    split = 1
    while t * split * 2 <= target and k_tiles // (split * 2) >= 4 and split < 16 \
            and -(-k_tiles // (split * 2)) * (split * 2 - 1) < k_tiles:
        split *= 2
    return split


def _valid(spec: GemmSpec, cfgs) -> List[MmaConfig]:
    seen, out = set(), []
    for c in cfgs:
        if c not in seen and not check_config(spec, c):
            seen.add(c)
            out.append(c)
    return out


def _shape_class(spec: GemmSpec, sms: int) -> Tuple[int, int, int, int]:
    m, n = spec.m, spec.n
    if m <= 16:
        return 16, 64, 16, 16
    if m <= 32:
        return (32, 128, 32, 32) if n >= 128 else (32, 64, 32, 16)
    if m <= 64 and n >= 128:  # 16-row tiles, so m gives several (49 x 512 x 4608, resnet's 7x7 convolutions
        return 16, 64, 16, 16  # at batch 1: 7.9 µs in 32 x 64 split 8 or 16 x 64, 12.1 in 64 x 128, H100)
    if m <= 64 or n <= 64:
        return (64, 128, 32, 32) if n >= 128 else (64, 64, 32, 32)
    if _tiles(spec, 256, 128) >= 2 * sms:  # large: the biggest tiles (least traffic per FLOP), 8 warps
        return 256, 128, 64, 64
    if _tiles(spec, 128, 128) < sms:  # too few tiles for one wave: 8 warps per block, split K
        return 128, 128, 64, 32
    return 128, 128, 64, 64


def _tiles(spec: GemmSpec, bm: int, bn: int) -> int:
    return -(-spec.m // bm) * -(-spec.n // bn) * spec.batch


def wg_config(spec: GemmSpec, bm: int, bn: int, wn: int, sms: int, stages: int = WG_MAX_STAGES) -> MmaConfig:
    """A wgmma config with as many stages as fit (at most ``stages``) and the default split."""
    cfg = MmaConfig(bm, bn, WG_BK, 64, wn, stages, default_split(spec, bm, bn, WG_BK, sms), True)
    while cfg.stages > 3 and smem_bytes(spec, cfg) > MAX_SMEM:
        cfg = replace(cfg, stages=cfg.stages - 1)
    return cfg


# A GEMM of k x n at most EPILOGUE_BOUND_KN, 128 columns or more, whose 64 x 128 tiles make two waves or more
# (resnet50's 1x1 convolutions at batch 32) spends its time in the epilogue's stores (and a residual's reads):
# 64 x 128 tiles in 3 stages (72 KB) fit three blocks an SM, so one block's epilogue overlaps the others'
# mainloops, where a 128 x 256 tile (its 133 KB float32 staging) runs alone. H100, batch 32, with resnet's residual
# epilogue (µs, 64 x 128 against the cost model's tiles): 56x56 64→256 57.6 / 74.3, 28x28 128→512 31.7 / 40.4,
# 28x28 512→256 27.4 / 34.2, 14x14 256→1024 16.6 / 21.7, 56x56 256→128 43.3 / 45.1, 28x28 512→128 16.6 / 18.3; bare
# GEMMs equal or faster too. Where k x n passes 512 x 512 the larger tiles stay ahead (14x14 1024→512: 21.7 / 18.7;
# 28x28 512→1024 stride 2: 23.9 / 22.9; bare 7x7 512→2048: 11.6 / 10.5). (Fitted on those 15 layers alone.)
EPILOGUE_BOUND_KN = 512 * 512


def _epilogue_bound(spec: GemmSpec, sms: int) -> bool:
    return spec.n >= 128 and spec.k * spec.n <= EPILOGUE_BOUND_KN and _tiles(spec, 64, 128) >= 2 * sms


def _wg_default(spec: GemmSpec, sms: int):
    """The wgmma config of a GEMM with m > 64: the largest tiles (128 x 256, 128 x 128) that fill the GPU, else
    one warpgroup's 64 x 128 tiles, deeply pipelined and split along k (128 x 4096 x 4096 on the H100: 18.7 µs
    against 22.1 for 128 x 128 split 4); 64 x 128 tiles in 3 stages for an epilogue-bound GEMM."""
    if spec.m <= 64:
        return None
    if _epilogue_bound(spec, sms):
        cfg = wg_config(spec, 64, 128, 128, sms, stages=3)
        tma = replace(cfg, tma=True)
        return tma if not tma_unsupported(spec) and not check_config(spec, tma) else cfg
    if any(op.gather is not None and op.gather.window is not None for op in (spec.a, spec.b)):
        # a convolution (resnet50's 3x3 layers at batch 32 on the H100, level 0 against the best of level 2)
        bn = min(256, pow2_ceil(spec.n))
        # The same tiles whether the input is copied by TMA's im2col (channels a multiple of 64) or by cp.async,
        # split along k as default_split says. 64 channels: 128 x 64 tiles of 3 stages where they fill two waves
        # (56x56x64: TMA 0.84x cuDNN, the best of level 2; cp.async 0.83x, as level 2, 64 x 64: 0.75x).
        # 128 channels: 64 x 128 (28x28x128: TMA 0.88x, the best; cp.async 0.85x, as level 2). 256 and more:
        # 128 x 128 tiles of 4 stages where they keep half the SMs busy (14x14x256: TMA 0.99x, the best 1.02x;
        # cp.async 0.77x, 64 x 256 in 3 stages 0.69x), else 64 x 128 (7x7x512: TMA 0.83x, the best). Under half
        # a wave of 64-row tiles (resnet18 at batch 1), 64 x 64 tiles split along k: the best of level 2 at
        # 28x28x128 (6.9 µs against 8.8 for 64 x 128 split 4) and 14x14x256 (8.5 against 11.3)
        if bn >= 256 and _tiles(spec, 128, 128) >= sms // 2:
            cfg = wg_config(spec, 128, 128, 128, sms, stages=4)
        elif bn == 64 and _tiles(spec, 128, 64) >= 2 * sms:
            cfg = wg_config(spec, 128, 64, 64, sms, stages=3)
        elif _tiles(spec, 64, min(bn, 128)) < sms // 2:
            cfg = wg_config(spec, 64, 64, 64, sms, stages=4)
        else:
            cfg = wg_config(spec, 64, min(bn, 128), min(bn, 128), sms, stages=3)
        if not tma_unsupported(spec):
            return replace(cfg, tma=True)
        # copied by cp.async (channels not a multiple of 64: a network's first layer, mobile networks), which keeps
        # S - 2 tiles in flight: 3 stages leave one, too few to hide the gather's latency (resnet's 7x7 first
        # layer at batch 1 on the H100: 64 x 64 tiles 9.3 µs in 3 stages, 8.4 in 4; 128 x 64: 8.9 and 7.3)
        deeper = replace(cfg, stages=max(cfg.stages, 4))
        return deeper if not check_config(spec, deeper) else cfg
    return _wg_dense_default(spec, sms)


# The cost model of a dense wgmma GEMM: a launch, then per wave of tiles a pipeline fill, the tile's FLOPs at the
# SM's sustained rate for that tile shape and the tile's epilogue (its warpgroups each write 64 rows x bn: a time per
# warpgroup proportional to bn), and the reduction of split-k's partial sums (a fixed cost and their float32
# traffic, written and read). Fitted on the H100 so that the model's pick among the shapes and splits of
# WG_DENSE_SHAPES is the fastest of those timed, or within 5% of it, on each of 90 GEMMs of 197 to 6272 rows under
# 0.7 of a wave of 128 x 256 tiles (weights cold; every 4-stage TMA candidate at 22 transformer layers of GPT-2,
# BERT, ViT and a Llama-style model, the old and the new pick at 86 more, with 1x1 convolutions of resnet50,
# mobilenet_v2, efficientnet_b0 and convnext_tiny at batch 1 and 8; calls A1, A2, A9, C1 and C3 of 2026-11-27,
# each pair timed side by side). The rates fitted at 128 and 197 rows alone, without the epilogue term, put
# 1576x768x3072 on 64 x 64 tiles (26.5 µs against 18.8 in 64 x 256), 394x5632x2048 on 128 x 64 (48.7 against 23.0
# in 128 x 192); the epilogue term keeps short-k convolutions on two warpgroups' 128 x 64 tiles (3136x144x24: 3.1
# µs against 3.8 in 64 x 128). The rates rank tiles more than they measure them.
LAUNCH_US, WAVE_FILL_US, SPLIT_US = 2.0, 0.9, 2.5
EPILOGUE_US_PER_128_COLUMNS = 0.4
PARTIALS_BYTES_PER_US = 2.5e6
SM_TFLOPS = 4.5  # an SM's wgmma rate (TFLOP/s) at efficiency 1.0, which TILE_EFFICIENCY scales per tile shape
TILE_EFFICIENCY = {(128, 256): 1.35, (128, 192): 1.05, (128, 128): 1.3, (128, 64): 0.68, (64, 256): 1.35,
                   (64, 128): 0.73, (64, 64): 0.8, (64, 32): 0.6, (64, 16): 0.4}  # (the last two guessed, not fitted)
WG_DENSE_SHAPES = ((128, 256, 256), (128, 192, 192), (128, 128, 128), (128, 64, 64), (64, 256, 256), (64, 128, 128),
                   (64, 64, 64))
# A GEMM of at most SKINNY_M rows (a transformer's layers at batch 1: 128 tokens) streams its weights: 64 x 64
# tiles in 6 stages, two blocks an SM where there are more tiles than SMs, keep the most bytes in flight. They won
# every such shape measured (H100, weights cold, the best of level 2 and named configs: 128 x {2304, 3072} x 768,
# 128 x 768 x {768, 3072}, 128 x {3072, 2048, 1024, 5632} x 2048, 128 x 2048 x 5632), where the model put one
# shape on 128 x 64 tiles: 128x5632x2048, 88 blocks on 88 SMs, 14.2 µs against 12.4 in 64 x 64 (cuBLAS 11.8)
SKINNY_M = 128
WG_SKINNY_SHAPES = ((64, 64, 64),)
# GEMMs narrower than 64 (1x1 convolutions to 16-32 channels in mobile networks) with a k-major B: one
# warpgroup's 64 x 32 or 64 x 16 tiles, more blocks than 64 x 64 tiles of which half or more is padding (cuBLAS
# runs such layers in 64 x 8 tiles). H100, batch 1, 1x1 convolutions 144 → 24 at 56 x 56, 192 → 32 at 28 x 28,
# 96 → 24 at 56 x 56: 2.7, 2.6, 2.5 µs in 64 x 16 tiles against 2.9, 2.8, 2.7 in 64 x 64 (cuDNN 2.9, 2.8, 2.7);
# with a bias-and-activation epilogue 3.0, 2.8, 2.8 against 3.6, 3.4, 3.4
WG_NARROW_SHAPES = ((64, 32, 32), (64, 16, 16))
# A dense GEMM with 128 x 256 tiles for at least this fraction of a wave takes them, whatever the cost model says: it
# was fitted at m = 128 and 197, and it puts large tiles too low (H100, cold weights, GPT-2's layers at batch 8 x 512:
# 4096x768x3072 34.3 µs in 128 x 256 tiles, 0.73 of a wave, against 41.8 in 128 x 128 and 53.3 in the modelled
# 128 x 64; cuBLAS 27.9)
LARGE_TILES_MIN_WAVE = 0.7
# The tiles of a large GEMM: 128 x 256, or 128 x 192 where they leave fewer SMs idle in the last wave (GPT-2 at
# batch 8 x 512: 4096x2304 is 288 tiles of 128 x 256, 2.2 waves of 132 SMs, or 384 of 128 x 192, 2.9 waves;
# 4096x768 is 96 tiles, 0.73 of a wave, or 128, 0.97)
LARGE_WG_SHAPES = ((128, 256, 256), (128, 192, 192))
LARGE_TILE_EFFICIENCY = {(128, 256): 1.0, (128, 192): 0.98}  # (their rates at 4096 rows: the last wave decides)


def wg_cost_us(spec: GemmSpec, bm: int, bn: int, split: int, sms: int, efficiency=None) -> float:
    """The modelled time of ``spec`` in bm x bn wgmma tiles split ``split`` ways along k (at the tile rates of
    ``efficiency``, default TILE_EFFICIENCY)."""
    waves = -(-_tiles(spec, bm, bn) * split // sms)
    k = -(-_k_tiles(spec, WG_BK) // split) * WG_BK
    tile_us = 2.0 * bm * bn * k / (SM_TFLOPS * 1e6 * (efficiency or TILE_EFFICIENCY)[(bm, bn)]) + \
        EPILOGUE_US_PER_128_COLUMNS * bn / 128
    partials_us = SPLIT_US + split * spec.m * spec.n * spec.batch * 8 / PARTIALS_BYTES_PER_US if split > 1 else 0.0
    return LAUNCH_US + waves * (WAVE_FILL_US + tile_us) + partials_us


def _wg_dense_default(spec: GemmSpec, sms: int) -> MmaConfig:
    """The tile shape and split-k of least modelled time (wg_cost_us; larger tiles first among equals): among
    LARGE_WG_SHAPES, unsplit, for a large GEMM (LARGE_TILES_MIN_WAVE), else among WG_DENSE_SHAPES (WG_SKINNY_SHAPES
    at most SKINNY_M rows); 4 stages (64 x 64 tiles: WG_SMALL_TILE_STAGES, fewer where that lets all blocks run at
    once), copied by TMA where it can (e.g. 128 x 3072 x 768: 64 x 64 tiles, 96 blocks, 4.7 µs against 8.1 for
    64 x 128 split 2; 128 x 768 x 3072: 64 x 64 split 4)."""
    large = _fits(spec, 128, 256) and _tiles(spec, 128, 256) >= LARGE_TILES_MIN_WAVE * sms
    narrow = WG_NARROW_SHAPES if spec.n < 64 and spec.b.k_major else ()
    best = None
    shapes = LARGE_WG_SHAPES if large else WG_SKINNY_SHAPES if spec.m <= SKINNY_M else WG_DENSE_SHAPES
    for bm, bn, wn in shapes + narrow:
        if not _fits(spec, bm, bn):
            continue
        for split in (1,) if large else (1, 2, 4, 8):
            if split > 1 and _k_tiles(spec, WG_BK) // split < 4:
                break
            cost = wg_cost_us(spec, bm, bn, split, sms, LARGE_TILE_EFFICIENCY if large else None)
            if best is None or cost < best[0] - 1e-9:
                best = (cost, bm, bn, wn, split)
    if best is None:  # narrower than every tile (n or m < 64): the smallest, if check_config takes it at all
        best = (0.0, 64, 64, 64, default_split(spec, 64, 64, WG_BK, sms))
    _, bm, bn, wn, split = best
    cfg = MmaConfig(bm, bn, WG_BK, 64, wn, WG_SMALL_TILE_STAGES if bm * bn <= 64 * 64 else WG_MAX_STAGES, split,
                    True)
    while cfg.stages > 3 and smem_bytes(spec, cfg) > MAX_SMEM:
        cfg = replace(cfg, stages=cfg.stages - 1)
    if bm * bn <= 64 * 64:
        cfg = _all_blocks_at_once(spec, cfg, sms)
    if not tma_unsupported(spec) and not check_config(spec, replace(cfg, tma=True)):
        cfg = replace(cfg, tma=True)
    return cfg


def _all_blocks_at_once(spec: GemmSpec, cfg: MmaConfig, sms: int) -> MmaConfig:
    """Small tiles in the deepest pipeline (from cfg.stages down to WG_MAX_STAGES) whose blocks all fit on the GPU
    at once, as many an SM as shared memory holds: a second round of blocks costs more than the stages give (H100,
    weights cold, 128x11264x2048, 352 blocks of 64 x 64: 24.7 µs in 6 stages, two blocks an SM, 20.8 in 4, three;
    128x5632x2048, 176 blocks: 12.4 in 6, 14.1 in 4). ``cfg`` where no depth lets them."""
    blocks = tiles(spec, cfg) * cfg.split_k
    for stages in range(cfg.stages, WG_MAX_STAGES - 1, -1):
        shallower = replace(cfg, stages=stages)
        if SM_SMEM // (smem_bytes(spec, shallower) + 1024) * sms >= blocks:
            return shallower
    return cfg


def default_config(spec: GemmSpec, sms: int = None, wgmma: bool = False) -> MmaConfig:
    """Level 0: a good config for the shape class of ``spec`` (``wgmma``: the GPU is an sm_90)."""
    sms = sms or sm_count()
    if wgmma:
        cfg = _wg_default(spec, sms)
        if cfg is not None and not check_config(spec, cfg):
            return cfg
    bm, bn, wm, wn = _shape_class(spec, sms)
    split = default_split(spec, bm, bn, 64, sms)
    bk = 64 if bm <= 32 or split > 1 or bm * bn >= 256 * 128 else 32
    stages = 4 if bk == 32 or bm <= 32 else 3
    split = default_split(spec, bm, bn, bk, sms)
    cands = _valid(spec, [MmaConfig(bm, bn, bk, wm, wn, stages, split), MmaConfig(bm, bn, bk, wm, wn, stages, 1),
                          MmaConfig(64, 64, 32, 32, 32, 3, 1), MmaConfig(16, 64, 64, 16, 16, 3, 1)])
    if not cands:
        raise ValueError(f'no matmul template config fits {spec.shape_text()}')
    return cands[0]


def space(spec: GemmSpec, level: int, sms: int = None, wgmma: bool = False) -> List[MmaConfig]:
    """The candidates of ``level`` (0: the default alone), default first, under the task's split-k policy
    (its ``parallel_k`` attribute, from PassContext.set_parallel_k); ``wgmma``: with the sm_90 configs."""
    policy = str(spec.task.attrs.get('parallel_k', 'default'))
    cfgs = _space(spec, level, sms or sm_count(), wgmma)
    if policy == 'default':
        return cfgs
    if policy == 'search':
        if level == 0:
            return cfgs
        first = cfgs[0]
        splits = [replace(first, split_k=s) for s in (1, 2, 4, 8, 16)]
        limit = LEVEL1_MAX if level == 1 else LEVEL2_MAX
        return _valid(spec, [first] + splits + cfgs[1:])[:limit + len(splits)]
    split = 1 if policy == 'disabled' else int(policy)
    forced = _valid(spec, [replace(c, split_k=split) for c in cfgs])
    if not forced and split > 1:  # K too short for that many parts: as close as K allows
        for s in (8, 4, 2, 1):
            forced = _valid(spec, [replace(c, split_k=s) for c in cfgs if s < split])
            if forced:
                break
    if not forced:
        raise ValueError(f'no matmul template config fits {spec.shape_text()} with parallel_k={policy}')
    return forced


def _space(spec: GemmSpec, level: int, sms: int, wgmma: bool = False) -> List[MmaConfig]:
    first = default_config(spec, sms, wgmma)
    if level == 0:
        return [first]
    wg_shapes = [s for s in WG_SHAPES if _fits(spec, s[0], s[1]) and (s[1] >= 64 or spec.n < 64)] \
        if wgmma and spec.mma_dtype.nbytes == 2 else []
    if wg_shapes and spec.m > 64:
        return _wgmma_space(spec, level, sms, first, wg_shapes)
    shapes = [s for s in (SMALL_SHAPES if spec.m <= 64 else LARGE_SHAPES) + (LARGE_SHAPES if spec.m <= 64 else [])
              if _fits(spec, s[0], s[1])]
    cfgs = [first] + [wg_config(spec, bm, bn, wn, sms) for bm, bn, wn in wg_shapes[:3]]
    for bm, bn, wm, wn in shapes:  # level 1: each tile shape with its usual k-tile and depth
        bk = 64 if bm <= 32 else 32
        stages = 3 if bm * bn >= 128 * 256 else 4
        cfgs.append(MmaConfig(bm, bn, bk, wm, wn, stages, default_split(spec, bm, bn, bk, sms)))
    cfgs = _valid(spec, cfgs)[:LEVEL1_MAX]
    if level == 1:
        return cfgs
    for bm, bn, wn in wg_shapes:
        for stages in (3, 4, 5, 6):
            split = default_split(spec, bm, bn, WG_BK, sms)
            for s in sorted({split, max(1, split // 2)}):
                cfgs.append(MmaConfig(bm, bn, WG_BK, 64, wn, stages, s, True))
    for bm, bn, wm, wn in shapes:
        for bk in (32, 64):
            for stages in ((3, 4, 5) if bm * bn * bk <= 64 * 128 * 64 else (3, 4) if bm * bn * bk <= 128 * 128 * 64
                           else (2, 3)):
                split = default_split(spec, bm, bn, bk, sms)
                for s in sorted({split, max(1, split // 2)}):
                    cfgs.append(MmaConfig(bm, bn, bk, wm, wn, stages, s))
    return _valid(spec, cfgs)[:LEVEL2_MAX]


def _wgmma_space(spec: GemmSpec, level: int, sms: int, first: MmaConfig, wg_shapes) -> List[MmaConfig]:
    """sm_90, 16-bit operands, m > 64: wgmma configs alone (no mma.sync config won a GEMM or convolution of
    those measured on the H100, and compiling fewer candidates keeps max-autotune builds short). Level 1: each
    tile shape at its default depth; level 2: depths 3, 6 and 4, at the default split, half and twice it.
    Where TMA can copy the operands, the first candidates' TMA twins take the place of the last ones."""
    cfgs = [first] + [wg_config(spec, bm, bn, wn, sms) for bm, bn, wn in wg_shapes]
    tma = not tma_unsupported(spec)
    if level == 1:
        return _with_tma_twins(spec, _valid(spec, cfgs), LEVEL1_MAX, LEVEL1_TMA if tma else 0)
    for stages in (3, 6, 4):
        for bm, bn, wn in wg_shapes:
            split = default_split(spec, bm, bn, WG_BK, sms)
            # (twice the default split too: 2-3 blocks of a shallow pipeline share an SM)
            for s in sorted({split, max(1, split // 2), split * 2}):
                if _k_tiles(spec, WG_BK) // s >= 4:
                    cfgs.append(MmaConfig(bm, bn, WG_BK, 64, wn, stages, s, True))
    return _with_tma_twins(spec, _valid(spec, cfgs), LEVEL2_WG_MAX, LEVEL2_TMA if tma else 0)


def _with_tma_twins(spec: GemmSpec, cfgs: List[MmaConfig], limit: int, twins: int) -> List[MmaConfig]:
    """``limit`` candidates: the TMA twins of the first ``twins`` configs (those not TMA already) in place of
    the last ones."""
    twin_of = [replace(c, tma=True) for c in cfgs[:twins] if not c.tma]
    plain = cfgs[:limit - len(twin_of)]
    return _valid(spec, plain + twin_of)[:limit]


def describe_candidates(spec: GemmSpec, cfgs: List[MmaConfig]) -> str:
    return ', '.join(f'{c.name()} ({tiles(spec, c) * c.split_k} blocks)' for c in cfgs)
