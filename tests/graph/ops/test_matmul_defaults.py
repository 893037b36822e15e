"""Default configurations of the tensor-core matmul template (hidet/kernels/matmul/space.py): per shape class, the
wgmma cost model, convolutions, epilogue-bound and narrow GEMMs, split-k (on the CPU: configs only, no GPU)."""
from __future__ import annotations

import pytest

from hidet import ops
from hidet.kernels.matmul import MmaConfig, find_matmul_template, match_gemm
from hidet.kernels.matmul.config import check_config, kernel_name
from hidet.kernels.matmul.space import default_config

from .matmul_cases import conv_spec, fused_tasks, matmul_task


def test_default_configs_per_shape_class():
    big = default_config(match_gemm(matmul_task([4096, 4096], [4096, 4096])), sms=132)
    assert (big.bm, big.bn, big.bk, big.stages, big.split_k) == (256, 128, 64, 3, 1)  # the level-2 pick on an H100
    mid = default_config(match_gemm(matmul_task([1024, 2048], [2048, 2048])), sms=132)
    assert (mid.bm, mid.bn, mid.split_k) == (128, 128, 1)
    gemv = default_config(match_gemm(matmul_task([1, 4096], [4096, 4096])), sms=132)
    assert gemv.bm == 16 and gemv.split_k > 1  # M·N too small to fill the GPU: split K
    thin = default_config(match_gemm(matmul_task([128, 4096], [4096, 4096])), sms=132)
    assert thin.split_k > 1


def test_convolutions_copied_by_cp_async_keep_two_tiles_in_flight():
    """A convolution whose channels TMA cannot copy (a network's first layer: 3 channels padded to 8) defaults to
    at least 4 stages (cp.async keeps S - 2 tiles in flight); one TMA copies keeps its own depth."""
    stem = conv_spec([1, 224, 224, 8], [64, 7, 7, 8], 2, 3, 1)
    cfg = default_config(stem, 132, wgmma=True)
    assert cfg.wgmma and not cfg.tma and cfg.stages >= 4, cfg.name()
    layer = conv_spec([1, 56, 56, 64], [64, 3, 3, 64], 1, 1, 1)
    assert default_config(layer, 132, wgmma=True).tma


@pytest.mark.parametrize('shape,config', [
    ((128, 3072, 768), '64x64x64_w64x64_p6_wg_tma'),  # 96 tiles in one wave, no split-k, 6 stages
    ((128, 768, 3072), '64x64x64_w64x64_p6_s4_wg_tma'),  # 24 tiles: split 4 fills the GPU
    ((197, 3072, 768), '64x128x64_w64x128_p4_wg_tma'),  # (6.0 µs against 6.2 in 128 x 64, H100)
    # between SKINNY_M and the large tiles: long k on wide tiles (ViT at batch 8: 18.8 µs against 26.5 in 64 x 64,
    # the rates fitted at 197 rows alone; 394 rows of a Llama MLP: 23.0 against 48.7 in 128 x 64)
    ((1576, 768, 3072), '64x256x64_w64x256_p4_wg_tma'),
    ((394, 5632, 2048), '128x192x64_w64x192_p4_wg_tma'),
    ((128, 5632, 2048), '64x64x64_w64x64_p6_wg_tma'),  # at most 128 rows: 64 x 64 tiles (SKINNY_M), not 128 x 64
    ((128, 11264, 2048), '64x64x64_w64x64_p4_wg_tma'),  # 352 blocks: 4 stages, three an SM, all at once
    ((4096, 4096, 4096), '128x256x64_w64x256_p4_wg_tma'),
    # GPT-2 at batch 8 x 512: 128 x 192 where the last wave of 128 x 256 tiles leaves more SMs idle (768: 128 tiles
    # in one wave, not 96; 2304: 384 in 2.9 waves, not 288 in 2.2); 3072: 384 tiles of 128 x 256 in 2.9 waves
    ((4096, 768, 3072), '128x192x64_w64x192_p4_wg_tma'),
    ((4096, 2304, 768), '128x192x64_w64x192_p4_wg_tma'),
    ((4096, 3072, 768), '128x256x64_w64x256_p4_wg_tma'),
    ((128, 16, 96), '64x64x64_w64x64_p6_wg_tma'),  # narrower than every tile of an n-major B (TMA zero-fills)
])
def test_wgmma_defaults_follow_the_cost_model(shape, config):
    m, n, k = shape
    spec = match_gemm(matmul_task([m, k], [k, n]))
    assert default_config(spec, 132, wgmma=True).name() == config


@pytest.mark.parametrize('x_shape,w_shape,stride,config', [
    ([32, 28, 28, 128], [512, 1, 1, 128], 1, '64x128x64_w64x128_p3_wg_tma'),  # k x n up to 512 x 512: epilogue-bound
    ([32, 14, 14, 256], [1024, 1, 1, 256], 1, '64x128x64_w64x128_p3_wg_tma'),
    ([32, 56, 56, 256], [512, 1, 1, 256], 2, '64x128x64_w64x128_p3_wg_tma'),  # (strided: its input gathered)
    ([32, 14, 14, 1024], [512, 1, 1, 1024], 1, '128x256x64_w64x256_p4_wg_tma'),  # larger k x n: the large tiles
    ([32, 56, 56, 64], [64, 1, 1, 64], 1, '128x64x64_w64x64_p4_wg_tma'),  # 64 columns
    ([1, 28, 28, 128], [512, 1, 1, 128], 1, '64x64x64_w64x64_p6_wg_tma'),  # batch 1: under two waves of 64 x 128
], ids=str)
def test_epilogue_bound_gemms_take_tiles_three_blocks_an_sm_hold(x_shape, w_shape, stride, config):
    """resnet50's 1x1 convolutions at batch 32: small k x n over many rows spend their time in the epilogue, so
    64 x 128 tiles in 3 stages (three blocks an SM: one's epilogue overlaps the others' mainloops)."""
    spec = conv_spec(x_shape, w_shape, stride, 0, 1)
    assert default_config(spec, 132, wgmma=True).name() == config


@pytest.mark.parametrize('wgmma', [False, True])
def test_default_split_gives_every_split_k_tiles(wgmma):
    """resnet18's last 3x3 convolutions at batch 1 (49 x 512 x 4608 as an implicit GEMM): 4 tiles, so split-k
    should fill the GPU; 72 k-tiles cannot split 16 ways (15 splits of 5 take them all), so the default is
    split 8, not the unsplit fall-back that ran on 4 SMs (47 µs on the H100 against cuDNN's 7)."""
    spec = conv_spec([1, 7, 7, 512], [512, 3, 3, 512], 1, 1, 1)
    assert (spec.m, spec.n, spec.k) == (49, 512, 4608)
    cfg = default_config(spec, 132, wgmma=wgmma)
    assert cfg.split_k == 8 and not check_config(spec, cfg), cfg.name()


@pytest.mark.parametrize('shape,config', [
    ((3136, 24, 144), '64x16x64_w64x16_p6_wg_tma'),  # mobilenet_v2's 1x1 convolution 144 -> 24 at 56 x 56
    ((784, 32, 192), '64x16x64_w64x16_p6_wg_tma'),
    ((3136, 144, 24), '128x64x64_w64x64_p4_wg_tma'),  # 64 or more columns: the dense tiles
])
def test_narrow_gemms_take_narrow_wgmma_tiles(shape, config):
    """A GEMM narrower than 64 columns with a k-major B (a channels-last 1x1 convolution's weight) takes one
    warpgroup's 64 x 16 or 64 x 32 tiles (more blocks than 64 x 64 tiles that are mostly padding); an n-major B
    cannot (its shared tile is blocks of 64 columns), and wider GEMMs keep the dense shapes."""
    m, n, k = shape
    (task,) = fused_tasks(lambda a, b: ops.matmul(a, ops.transpose(b, [1, 0])), ([m, k], 'float16'),
                          ([n, k], 'float16'))
    spec = find_matmul_template(task, 'cuda', 'sm_90').spec
    assert spec.b.k_major
    assert default_config(spec, 132, wgmma=True).name() == config
    assert 'n-major B' in check_config(match_gemm(matmul_task([m, k], [k, n])), MmaConfig(64, 16, 64, 64, 16, 6, 1,
                                                                                          True))


def test_wgmma_blocks_hold_only_the_stages_their_k_tiles_use():
    """A wgmma block of fewer k-tiles than stages holds those alone in shared memory (tile kt in stage kt % S,
    nothing loaded past the last): resnet50's 1x1 convolution 64 → 256 at batch 32 is one k-tile, so its 64 x 128
    tiles need the epilogue's staging tile (34 KB), not three stages (72 KB); mma.sync keeps all its stages."""
    from dataclasses import replace

    from hidet.kernels.matmul.config import STAGE_PAD, WG_ALIGN, smem_bytes, stage_buffers

    one = conv_spec([32, 56, 56, 64], [256, 1, 1, 64], 1, 0, 1)
    cfg = default_config(one, 132, wgmma=True)
    assert (cfg.bm, cfg.bn, cfg.stages, cfg.wgmma) == (64, 128, 3, True) and stage_buffers(one, cfg) == 1
    assert smem_bytes(one, cfg) == 64 * (128 + STAGE_PAD) * 4  # the staging tile is the largest use
    four = conv_spec([32, 56, 56, 256], [64, 1, 1, 256], 1, 0, 1)  # 4 k-tiles: every stage
    assert stage_buffers(four, replace(cfg, bn=64, wn=64)) == 3
    split = replace(cfg, split_k=2)  # 2 k-tiles a split block
    assert stage_buffers(conv_spec([32, 56, 56, 256], [128, 1, 1, 256], 1, 0, 1), split) == 2
    assert stage_buffers(one, replace(cfg, wgmma=False, bk=32, wm=32, wn=32)) == 3
    assert smem_bytes(four, replace(cfg, bn=64, wn=64)) == 3 * (64 * 64 + 64 * 64) * 2 + WG_ALIGN - 16


def test_kernel_names_tell_tasks_of_one_fused_name_apart():
    """A kernel's name holds its GEMM shape: resnet50's 1x1 convolutions (one fused name, their tasks' first 40
    characters alike) stay apart in a profile."""
    specs = [conv_spec([32, 56, 56, 64], [256, 1, 1, 64], 1, 0, 1),
             conv_spec([32, 28, 28, 128], [512, 1, 1, 128], 1, 0, 1)]
    names = [kernel_name(s, default_config(s, 132, True)) for s in specs]
    assert names == ['mma_conv2d_channels_last_100352x256x64_64x128x64_w64x128_p3_wg_tma',
                     'mma_conv2d_channels_last_25088x512x128_64x128x64_w64x128_p3_wg_tma'], names
