"""Hidet Script on CUDA: the naive matmul of the Hidet announcement (behind a torch.autograd.Function), a
shared-memory tiled matmul, warp-shuffle reductions with atomics and dynamic shared memory, a tensor-core
tile (cp.async + ldmatrix + mma.sync) and a warpgroup tile (swizzled shared memory + wgmma, sm_90). The
kernels compile everywhere nvcc is found; they run on a GPU (`cuda` marker)."""
from __future__ import annotations  # annotations such as f32[m, k] use the kernels' scalar parameters

import pytest
import torch

import hidet
from hidet.lang import attr, bf16, boolean, cast, f16, f32, f64, i32, i64, register_tensor, unroll, view
from hidet.lang import math as hm
from hidet.lang.cuda import (activemask, atomic_add, atomic_cas, atomic_exchange, atomic_max, atomic_min, atomic_sub,
                             ballot_sync, blockDim, blockIdx, cp_async, cp_async_commit_group, cp_async_wait_all,
                             cp_async_wait_group, dynamic_shared_memory, ldmatrix, mma_sync, shared_tensor,
                             shfl_down_sync, shfl_sync, shfl_up_sync, shfl_xor_sync, syncthreads, syncthreads_and,
                             syncthreads_count, syncthreads_or, syncwarp, threadfence, threadfence_block, threadIdx,
                             fence_proxy_async, wgmma, wgmma_commit_group, wgmma_fence, wgmma_rs, wgmma_wait_group,
                             fence_mbarrier_init, mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait,
                             named_barrier_sync, tensor_map, tma_load_im2col, cluster_load_f32x4, cluster_rank,
                             cluster_sync, load_pair, store_pair)
from hidet.ir.type import Im2col


# ---------------------------------------------------------------------------------------------- kernels
def naive_matmul_module():
    with hidet.script_module() as script_module:
        @hidet.script
        def matmul(a: f32[m, k], b: f32[k, n], c: f32[m, n], m: i32, n: i32, k: i32):
            attr.cuda_grid_dim = (m + 31) // 32, (n + 31) // 32
            attr.cuda_block_dim = 32, 32
            i = threadIdx.x + blockIdx.x * 32
            j = threadIdx.y + blockIdx.y * 32
            if i < m and j < n:
                c[i, j] = 0.0
                for kk in range(k):
                    c[i, j] += a[i, kk] * b[kk, j]
    return script_module


def tiled_matmul_module(tile: int = 16):
    with hidet.script_module() as script_module:
        @hidet.script
        def tiled_matmul(a: f32[m, k], b: f32[k, n], c: f32[m, n], m: i32, n: i32, k: i32):
            attr.cuda_grid_dim = (n + tile - 1) // tile, (m + tile - 1) // tile
            attr.cuda_block_dim = tile, tile
            sa = shared_tensor(f32, [tile, tile])
            sb = shared_tensor(f32, [tile, tile])
            tx = threadIdx.x
            ty = threadIdx.y
            row = blockIdx.y * tile + ty
            col = blockIdx.x * tile + tx
            acc: f32 = 0.0
            for k0 in range(0, k, tile):
                sa[ty, tx] = a[row, k0 + tx] if row < m and k0 + tx < k else 0.0
                sb[ty, tx] = b[k0 + ty, col] if k0 + ty < k and col < n else 0.0
                syncthreads()
                for kk in unroll(range(tile)):
                    acc += sa[ty, kk] * sb[kk, tx]
                syncthreads()
            if row < m and col < n:
                c[row, col] = acc
    return script_module


def reduction_module(block: int = 256):
    warps = block // 32
    with hidet.script_module() as script_module:
        @hidet.script
        def warp_sum(v: f32) -> f32:
            attr.func_kind = 'cuda_device'
            for offset in [16, 8, 4, 2, 1]:  # a Python list: unrolled at compile time
                v += shfl_down_sync(0xFFFFFFFF, v, offset)
            return v

        @hidet.script
        def row_sum(x: f32[rows, cols], y: f32[rows], rows: i32, cols: i32):
            """One block per row: strided partial sums, warp shuffles, then the warps' sums through
            dynamic shared memory."""
            attr.cuda_grid_dim = rows
            attr.cuda_block_dim = block
            attr.cuda_dynamic_smem_bytes = warps * 4
            partial = view(dynamic_shared_memory(0, f32), f32[warps])
            r = blockIdx.x
            s = 0.0
            for j in range(threadIdx.x, cols, blockDim.x):
                s += x[r, j]
            s = warp_sum(s)
            lane = threadIdx.x % 32
            warp = threadIdx.x / 32
            if lane == 0:
                partial[warp] = s
            syncthreads()
            if warp == 0:
                t = partial[lane] if lane < warps else 0.0
                mask = 16
                while mask > 0:
                    t += shfl_xor_sync(0xFFFFFFFF, t, mask)
                    mask = mask // 2
                if lane == 0:
                    y[r] = t

        @hidet.script
        def sum_all(x: ~f32, out: ~f32, n: i32):
            attr.cuda_grid_dim = (n + block - 1) // block
            attr.cuda_block_dim = block
            i = blockIdx.x * block + threadIdx.x
            v = x[i] if i < n else 0.0
            v = warp_sum(v)
            if threadIdx.x % 32 == 0:
                atomic_add(~out[0], v)

        @hidet.script
        def reverse(x: f32[n], y: f32[n], n: i32):
            """Dynamic shared memory sized by a parameter (over 48 KiB for large n)."""
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = block
            attr.cuda_dynamic_smem_bytes = n * 4
            buf = dynamic_shared_memory(0, f32)
            for i in range(threadIdx.x, n, block):
                buf[i] = x[i]
            syncthreads()
            for i in range(threadIdx.x, n, block):
                y[i] = buf[n - 1 - i]
    return script_module


def mma_module(dtype=f16):
    with hidet.script_module() as script_module:
        @hidet.script
        def mma_tile(a: dtype[16, 16], b: dtype[16, 8], c: f32[16, 8]):
            """One warp: C = A @ B on tensor cores. cp.async stages A and B in shared memory, ldmatrix loads
            the fragments, mma.sync multiplies with f32 accumulators."""
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 32
            sa = shared_tensor(dtype, [16, 16])
            sb = shared_tensor(dtype, [16, 8])
            lane = threadIdx.x
            cp_async(~sa[lane // 2, lane % 2 * 8], ~a[lane // 2, lane % 2 * 8], 16)  # 32 chunks of 16 bytes
            cp_async_commit_group()
            if lane < 16:
                cp_async(~sb[lane, 0], ~b[lane, 0], cp_size=16)
            cp_async_commit_group()
            cp_async_wait_group(1)
            cp_async_wait_all()
            syncthreads()
            ra = register_tensor(dtype, [8])
            rb = register_tensor(dtype, [4])
            rc = register_tensor(f32, [4])
            ldmatrix(~ra[0], ~sa[lane % 16, lane // 16 * 8], num=4)
            ldmatrix(~rb[0], ~sb[lane % 16, 0], num=2, trans=True)
            for i in unroll(range(4)):
                rc[i] = 0.0
            mma_sync(~ra[0], ~rb[0], ~rc[0])
            g = lane // 4
            t = lane % 4
            c[g, 2 * t] = rc[0]
            c[g, 2 * t + 1] = rc[1]
            c[g + 8, 2 * t] = rc[2]
            c[g + 8, 2 * t + 1] = rc[3]
    return script_module


def intrinsics_module():
    """Every other intrinsic once (atomics of each type, shuffles, votes, barriers, fences, math)."""
    with hidet.script_module() as script_module:
        @hidet.script
        def intrinsics(fo: f32[8], io: i32[8], lo: i64[2], ho: f16[1], bo: bf16[1], do: f64[1]):
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 64
            t = threadIdx.x
            lane = t % 32
            atomic_add(~fo[0], 1.0)
            atomic_sub(fo[1], 0.5)  # an element stands for its address too
            atomic_max(~fo[2], cast(t, f32))
            atomic_min(~fo[3], -cast(t, f32))
            atomic_add(~io[0], 1)
            atomic_max(~io[1], t)
            atomic_min(~io[2], -t)
            atomic_exchange(~io[3], 7)
            atomic_cas(~io[4], 0, 5)
            atomic_add(~lo[0], i64(1) << 40)
            atomic_max(~lo[1], cast(t, i64))
            atomic_add(~ho[0], 0.5)
            atomic_add(~bo[0], 1.0)
            atomic_add(~do[0], 0.25)
            v = shfl_sync(0xFFFFFFFF, lane, 3)
            u = shfl_up_sync(0xFFFFFFFF, lane, 1)
            vote = ballot_sync(activemask(), lane < 4)
            count = syncthreads_count(t < 10)
            every = syncthreads_and(t < 64)
            some = syncthreads_or(t == 63)
            syncwarp()
            threadfence()
            threadfence_block()
            if t == 5:
                io[5] = v * 1000 + u
                io[6] = vote
                io[7] = count * 100 + (10 if every != 0 else 0) + (1 if some != 0 else 0)
                x = fo[7]  # 0.5, set by the caller
                fo[4] = hm.exp(x) + hm.sqrt(x) + hm.tanh(x) + max(x, 0.25) + hm.pow(x, 2.0)
                fo[5] = hm.floor(x * 3.0) + hm.ceil(x) + hm.rsqrt(x) + abs(-x)
                bits = cast(~fo[7], ~i32)  # the bits of 0.5 as an integer
                fo[6] = cast(bits[0], f32)
    return script_module


def wgmma_module(dtype=f16, b_k_major: bool = True, a_registers: bool = False):
    """One warpgroup: C[64, 64] = A[64, 64] @ B with wgmma from 128-byte-swizzled shared memory. A is k-major
    (rows of 64 k); B is given k-major (``bt[n, k]``) or n-major (``b[k, n]``): the same swizzled rows, read
    transposed or not. ``a_registers``: A from registers (wgmma_rs), each warp's m16n8k16 A fragments of its 16
    rows loaded from global memory."""
    def at(r, c):  # element offset of (row r, column c) in a tile of 64-element (128-byte) swizzled rows
        return r * 64 + ((c // 8) ^ (r % 8)) * 8 + c % 8

    with hidet.script_module() as script_module:
        @hidet.script
        def wgmma_tile(a: dtype[64, 64], b: dtype[64, 64], c: f32[64, 64]):
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 128
            attr.cuda_dynamic_smem_bytes = 2 * 64 * 64 * 2 + 1008
            sa = view(dynamic_shared_memory(0, dtype, 1024), dtype[64 * 64])
            sb = view(dynamic_shared_memory(64 * 64 * 2, dtype, 1024), dtype[64 * 64])
            tid = threadIdx.x
            for i in unroll(range(4)):  # 512 chunks of 16 bytes per operand
                q = tid + i * 128
                r = q // 8
                c8 = q % 8 * 8
                cp_async(~sa[at(r, c8)], ~a[r, c8], 16)
                cp_async(~sb[at(r, c8)], ~b[r, c8], 16)
            cp_async_commit_group()
            cp_async_wait_all()
            fence_proxy_async()
            syncthreads()
            acc = register_tensor(f32, [32])
            w = tid // 32
            g = tid % 32 // 4
            t = tid % 4
            af = register_tensor(dtype, [4, 8])  # (a_registers) the warp's A fragments of the 4 k16 steps
            if a_registers:
                for ks in unroll(range(4)):
                    for e in unroll(range(8)):  # rows g, g + 8 (e / 2 % 2); k 2t, 2t + 1 (e % 2), + 8 (e / 4)
                        af[ks, e] = a[w * 16 + g + e // 2 % 2 * 8, ks * 16 + e // 4 * 8 + 2 * t + e % 2]
            wgmma_fence()
            for ks in unroll(range(4)):
                if a_registers:
                    wgmma_rs(~acc[0], ~af[ks, 0], ~sb[ks * 16 if b_k_major else ks * 16 * 64], 64, not b_k_major,
                             0 if b_k_major else 64 * 64 * 2, ks > 0)
                else:
                    wgmma(~acc[0], ~sa[ks * 16], ~sb[ks * 16 if b_k_major else ks * 16 * 64], 64, False,
                          not b_k_major, 0, 0 if b_k_major else 64 * 64 * 2, ks > 0)
            wgmma_commit_group()
            wgmma_wait_group(0)
            for j in unroll(range(8)):  # per warp: rows 16w.., the layout of 8 mma m16n8 tiles
                c[w * 16 + g, j * 8 + 2 * t] = acc[j * 4]
                c[w * 16 + g, j * 8 + 2 * t + 1] = acc[j * 4 + 1]
                c[w * 16 + g + 8, j * 8 + 2 * t] = acc[j * 4 + 2]
                c[w * 16 + g + 8, j * 8 + 2 * t + 1] = acc[j * 4 + 3]
    return script_module


def im2col_module(shape, lower, upper, strides, pixels: int, coords, offsets):
    """One TMA im2col copy (sm_90): ``pixels`` pixels x 64 channels of a channels-last float16 x[n, h, w, c]
    (bounding box corners ``lower`` / ``upper`` and traversal ``strides`` of the tensor map, window origin
    ``coords`` (c, w, h, n), window offsets (w, h)) into 128-byte swizzled shared memory, then out[pixels, 64]
    unswizzled. The tensor map is a kernel parameter over x (built by the launch entry: callers pass x, out)."""
    n, h, w, c = shape
    coords, offsets = list(coords), list(offsets)

    with hidet.script_module() as script_module:
        @hidet.script
        def im2col_copy(x: f16[n, h, w, c], out: f16[pixels, 64],
                        tmap: tensor_map(x, [c, w, h, n], [c * 2, w * c * 2, h * w * c * 2], [64, pixels],
                                         im2col=Im2col(lower, upper, strides))):
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 128
            attr.cuda_dynamic_smem_bytes = pixels * 128 + 1008
            s = view(dynamic_shared_memory(0, f16, 1024), f16[pixels * 64])
            bar = shared_tensor(i64, [1])
            tid = threadIdx.x
            if tid == 0:
                mbarrier_init(~bar[0], 1)
                fence_mbarrier_init()
            syncthreads()
            if tid == 0:
                mbarrier_arrive_expect_tx(~bar[0], pixels * 128)
                tma_load_im2col(~s[0], tmap, ~bar[0], coords, offsets)
            mbarrier_wait(~bar[0], 0)
            for i in range(pixels * 64 // 128):
                q = tid + i * 128
                r = q // 64
                col = q % 64
                out[r, col] = s[r * 64 + (col // 8 ^ r % 8) * 8 + col % 8]
    return script_module


def cluster_exchange_module(size: int = 4):
    """Clusters of ``size`` CTAs (sm_90): CTA r of a cluster writes 4 floats (block, rank, 2 * rank, 3) to its
    shared memory; after cluster_sync each reads every CTA of its cluster's by DSMEM and writes the sums."""
    with hidet.script_module() as script_module:
        @hidet.script
        def cluster_exchange(out: f32[blocks, 4], blocks: i32):
            attr.cuda_grid_dim = blocks
            attr.cuda_block_dim = 32
            attr.cuda_cluster_dim = size
            s = shared_tensor(f32, [4])
            rank = cluster_rank()
            if threadIdx.x == 0:
                s[0] = cast(blockIdx.x, f32)
                s[1] = cast(rank, f32)
                s[2] = cast(rank * 2, f32)
                s[3] = 3.0
            cluster_sync()
            if threadIdx.x == 0:
                part = register_tensor(f32, [4])
                total = register_tensor(f32, [4])
                for e in range(4):
                    total[e] = 0.0
                for peer in range(size):
                    cluster_load_f32x4(~part[0], ~s[0], peer)
                    for e in range(4):
                        total[e] += part[e]
                for e in range(4):
                    out[blockIdx.x, e] = total[e]
            cluster_sync()  # (no CTA leaves while another may read its shared memory)
    return script_module


def im2col_reference(x, lower, upper, strides, pixels, coords, offsets):
    """What TMA's im2col mode copies: the window origins of the bounding box (w, then h, then n, by the
    traversal strides) from ``coords`` on, each shifted by ``offsets``, 64 channels from c; zeros outside x."""
    n, h, w, c = x.shape
    c0, w0, h0, n0 = coords
    ow, oh = offsets
    hs = range(lower[1], h + upper[1], strides[2])
    ws = range(lower[0], w + upper[0], strides[1])
    origins = [(b, i, j) for b in range(n0, n0 + pixels + 1) for i in hs for j in ws]
    start = origins.index((n0, h0, w0))
    out = torch.zeros(pixels, 64, dtype=x.dtype, device=x.device)
    for p, (b, i, j) in enumerate(origins[start:start + pixels]):
        if b < n and 0 <= i + oh < h and 0 <= j + ow < w:
            out[p] = x[b, i + oh, j + ow, c0:c0 + 64]
    return out


# (shape, lower (w, h), upper (w, h), traversal strides (c, w, h, n), pixels, coords (c, w, h, n), offsets (w, h))
IM2COL_CASES = {
    'padded_strided': ((2, 5, 7, 128), (-2, -1), (0, -1), (1, 2, 1, 1), 64, (64, -2, -1, 0), (1, 2)),
    'across_images': ((3, 4, 5, 64), (0, 0), (0, 0), (1, 1, 1, 1), 64, (0, 3, 2, 0), (0, 0)),
    'conv3x3_s2': ((2, 9, 8, 64), (-1, -1), (-2, -1), (1, 2, 2, 1), 128, (0, -1, 1, 0), (2, 1)),  # 5 x 4 outputs
}


ALL_MODULES = {'naive_matmul': naive_matmul_module, 'tiled_matmul': tiled_matmul_module,
               'reduction': reduction_module, 'mma_f16': lambda: mma_module(f16), 'mma_bf16': lambda: mma_module(bf16),
               'intrinsics': intrinsics_module}
WGMMA_MODULES = {'wgmma_f16_k_major': lambda: wgmma_module(f16, True),
                 'wgmma_bf16_n_major': lambda: wgmma_module(bf16, False),
                 'wgmma_rs_f16_n_major': lambda: wgmma_module(f16, False, True),
                 'wgmma_rs_bf16_k_major': lambda: wgmma_module(bf16, True, True)}


# ---------------------------------------------------------------------------------------------- compile (no GPU)
def _nvcc_or_skip():
    from hidet.backend.compiler import CompilerNotFoundError, find_nvcc

    try:
        find_nvcc()
    except CompilerNotFoundError:
        pytest.skip('nvcc not found')


@pytest.mark.parametrize('name', list(ALL_MODULES))
def test_cuda_script_compiles(name):
    _nvcc_or_skip()
    arch = None if hidet.cuda.available() else 'sm_90'
    with hidet.option.context(cuda_arch=arch):
        built = ALL_MODULES[name]().build()
    assert built.ir_module.target == 'cuda'
    assert '__global__' in built.source


@pytest.mark.parametrize('name', list(WGMMA_MODULES))
def test_wgmma_script_compiles_for_sm90(name):
    _nvcc_or_skip()
    with hidet.option.context(cuda_arch='sm_90'):
        built = WGMMA_MODULES[name]().build()
    call = 'hidet::lang::wgmma_m64k16_rs<64, ' if '_rs_' in name else 'hidet::lang::wgmma_m64k16<64, 0, '
    assert call in built.source and 'dynamic_smem_aligned<1024>' in built.source


@pytest.mark.parametrize('case', list(IM2COL_CASES))
def test_tma_im2col_script_compiles_for_sm90(case):
    _nvcc_or_skip()
    with hidet.option.context(cuda_arch='sm_90'):
        built = im2col_module(*IM2COL_CASES[case]).build()
    assert 'hidet::lang::tma_load_im2col(' in built.source and 'make_im2col_tensor_map<__half>' in built.source
    assert [name for name, _, _ in built['im2col_copy'].params] == ['x', 'out']  # (the launch builds the map)


def test_cluster_script_compiles_for_sm90():
    _nvcc_or_skip()
    with hidet.option.context(cuda_arch='sm_90'):
        built = cluster_exchange_module().build()
    assert '__cluster_dims__(4) ' in built.source and 'hidet::lang::cluster_load_f32x4(' in built.source


def pair_store_module(dtype):
    """out[2 i], out[2 i + 1] = i + 0.25, -i, one store_pair a thread."""
    with hidet.script_module() as script_module:
        @hidet.script
        def pairs(out: dtype[64]):
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 32
            i = threadIdx.x
            store_pair(~out[2 * i], cast(i, f32) + 0.25, -cast(i, f32))
    return script_module


def test_store_pair_source_and_its_types():
    """store_pair is one call of hidet::lang::store_pair (a half2 / bfloat162 / float2 store); other types are
    refused by name."""
    _nvcc_or_skip()
    with hidet.option.context(cuda_arch='sm_80'):
        for dtype in (f16, bf16, f32):
            assert 'hidet::lang::store_pair(' in pair_store_module(dtype).build().source
    from hidet.lang.errors import HidetScriptError

    with pytest.raises(HidetScriptError, match='store_pair stores float16, bfloat16 or float32 pairs, not int32'):
        pair_store_module(i32)


@pytest.mark.cuda
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16', 'float32'])
def test_store_pair_writes_two_neighbours(dtype):
    out = torch.full((64,), float('nan'), dtype=getattr(torch, dtype), device='cuda')
    pair_store_module({'float16': f16, 'bfloat16': bf16, 'float32': f32}[dtype]).build()(out)
    i = torch.arange(32, device='cuda', dtype=torch.float32)
    assert torch.equal(out.float(), torch.stack([i + 0.25, -i], 1).flatten().to(out.dtype).float())


def pair_load_module(dtype):
    """out[2 i + 1], out[2 i] = src[2 i], src[2 i + 1] through a register tensor, one load_pair a thread."""
    with hidet.script_module() as script_module:
        @hidet.script
        def pairs(src: dtype[64], out: dtype[64]):
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 32
            i = threadIdx.x
            regs = register_tensor(dtype, [2])
            load_pair(~regs[0], ~src[2 * i])
            out[2 * i] = regs[1]
            out[2 * i + 1] = regs[0]
    return script_module


def test_load_pair_source_and_its_types():
    """load_pair is one call of hidet::lang::load_pair; a destination of another element type is refused."""
    _nvcc_or_skip()
    with hidet.option.context(cuda_arch='sm_80'):
        for dtype in (f16, bf16, f32, boolean):
            assert 'hidet::lang::load_pair(' in pair_load_module(dtype).build().source
    from hidet.lang.errors import HidetScriptError

    with pytest.raises(HidetScriptError, match='load_pair copies between one element type, not float16 into float32'):
        with hidet.script_module():
            @hidet.script
            def mixed(src: f16[2]):
                attr.cuda_grid_dim = 1
                attr.cuda_block_dim = 1
                regs = register_tensor(f32, [2])
                load_pair(~regs[0], ~src[0])


@pytest.mark.cuda
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16', 'float32', 'bool'])
def test_load_pair_reads_two_neighbours(dtype):
    src = (torch.arange(64, device='cuda') % 3 == 0) if dtype == 'bool' else \
        torch.arange(64, device='cuda').to(getattr(torch, dtype))
    out = torch.empty_like(src)
    pair_load_module({'float16': f16, 'bfloat16': bf16, 'float32': f32, 'bool': boolean}[dtype]).build()(src, out)
    assert torch.equal(out, src.view(32, 2).flip(1).flatten())


def test_max_registers_caps_a_thread_with_maxnreg():
    """attr.cuda_max_registers is __maxnreg__ (in place of __launch_bounds__: nvcc takes one of the two); without it
    the bound names the block's threads."""
    from hidet.backend.codegen import generate

    sources, module_with_cap = [], None
    for regs in (112, None):
        with hidet.script_module() as module:
            @hidet.script
            def fill(out: f32[128]):
                attr.cuda_grid_dim = 1
                attr.cuda_block_dim = 128
                if regs:
                    attr.cuda_max_registers = regs
                out[threadIdx.x] = 1.0
        sources.append(generate(module.ir_module()))
        module_with_cap = module_with_cap or module
    assert '__maxnreg__(112) ' in sources[0] and '__launch_bounds__' not in sources[0]
    assert '__launch_bounds__(128) ' in sources[1] and '__maxnreg__' not in sources[1]
    _nvcc_or_skip()
    with hidet.option.context(cuda_arch='sm_80'):
        assert '__maxnreg__(112) ' in module_with_cap.build().source  # (nvcc takes it: CUDA 12.4 and newer)


def test_tensor_map_parameters_in_any_order():
    """A tensor-map parameter may come before the tensor it maps; the launch entry takes the tensors alone."""
    from hidet.ir.type import TensorMapType

    with hidet.script_module() as script_module:
        @hidet.script
        def first_tile(tmap: tensor_map(a, [k, m], [k * 2], [64, 64]), a: f16[m, k], out: f16[64, 64], m: i32,
                       k: i32):
            attr.cuda_grid_dim = 1
            attr.cuda_block_dim = 32
            out[0, 0] = a[0, 0]
    kernel = script_module.ir_module().functions[-1]
    assert [p.name for p in kernel.params] == ['tmap', 'a', 'out', 'm', 'k']
    assert isinstance(kernel.params[0].type, TensorMapType) and kernel.params[0].type.tensor is kernel.params[1]
    source = script_module.source()
    assert 'const __grid_constant__ CUtensorMap tmap' in source and 'make_tensor_map<__half>' in source
    assert 'expected 2 tensor/pointer and 2 scalar arguments' in source


def test_wgmma_argument_errors():
    sa = hidet.ir.expr.Var('sa', f16, type=hidet.ir.type.TensorType(f16, [64], 'pointer'))
    acc = hidet.ir.expr.Var('acc', f32, type=hidet.ir.type.TensorType(f32, [32], 'pointer'))
    with pytest.raises(ValueError, match='wgmma: n must be one of'):
        wgmma(acc, sa, sa, 48)
    with pytest.raises(TypeError, match='float32 accumulators'):
        wgmma(sa, sa, sa, 64)
    with pytest.raises(ValueError, match='wgmma_rs: n must be one of'):
        wgmma_rs(acc, sa, sa, 256)
    with pytest.raises(TypeError, match='trans_b must be a Python bool'):
        wgmma_rs(acc, sa, sa, 64, 1)
    with pytest.raises(ValueError, match='align must be a power of two'):
        dynamic_shared_memory(0, f16, 1000)
    with pytest.raises(ValueError, match='barrier must be 1 to 15'):
        named_barrier_sync(0, 128)
    with pytest.raises(ValueError, match='multiple of 32'):
        named_barrier_sync(1, 100)
    with pytest.raises(TypeError, match='16-bit floats'):
        tensor_map(acc, [32], [], [32])
    with pytest.raises(TypeError, match='tensor parameter'):
        tensor_map(hidet.ir.expr.Var('n', i32), [32, 2], [64], [32, 2])


def test_cuda_script_source():
    source = reduction_module().source()
    assert '__device__ __forceinline__ float warp_sum(float v_' in source
    assert 'hidet::lang::shfl_down_sync' in source and 'hidet::lang::atomic_add' in source
    for name in ('row_sum', 'sum_all', 'reverse'):
        assert f'HIDET_KERNEL_EXPORT int32_t {name}(void* const* buffers' in source
    assert 'warp_sum(void* const*' not in source  # device functions are not exported
    mma = mma_module().source()
    assert 'hidet::lang::ldmatrix<2, true>' in mma and 'hidet::lang::cp_async_wait_group<1>()' in mma
    assert '__shared__ __align__(16) __half' in mma


# ---------------------------------------------------------------------------------------------- on the GPU
class NaiveMatmul(torch.autograd.Function):
    """torch.autograd.Function around the Hidet Script kernel (forward and backward)."""

    kernel = None

    @staticmethod
    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if NaiveMatmul.kernel is None:
            NaiveMatmul.kernel = naive_matmul_module().build()
        a, b = a.contiguous(), b.contiguous()
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
        NaiveMatmul.kernel(a, b, c, m, n, k)
        return c

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return NaiveMatmul.run(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return NaiveMatmul.run(grad, b.t()), NaiveMatmul.run(a.t(), grad)


@pytest.mark.cuda
@pytest.mark.parametrize('m,n,k', [(1, 1, 1), (37, 45, 29), (128, 96, 200)])
def test_naive_matmul_autograd(m, n, k):
    a = torch.randn(m, k, device='cuda', requires_grad=True)
    b = torch.randn(k, n, device='cuda', requires_grad=True)
    c = NaiveMatmul.apply(a, b)
    ref = torch.matmul(a.double(), b.double())
    torch.testing.assert_close(c.double(), ref, rtol=1e-4, atol=1e-4)
    grad = torch.randn(m, n, device='cuda')
    c.backward(grad)
    torch.testing.assert_close(a.grad.double(), grad.double() @ b.detach().double().t(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(b.grad.double(), a.detach().double().t() @ grad.double(), rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
def test_naive_matmul_on_a_side_stream():
    a, b = torch.randn(64, 48, device='cuda'), torch.randn(48, 80, device='cuda')
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # the kernel launches on torch's current stream
        c = NaiveMatmul.run(a, b)
    torch.cuda.current_stream().wait_stream(stream)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.parametrize('m,n,k', [(16, 16, 16), (100, 70, 33), (257, 129, 300)])
def test_tiled_matmul(m, n, k):
    built = tiled_matmul_module().build()
    a, b = torch.randn(m, k, device='cuda'), torch.randn(k, n, device='cuda')
    c = torch.empty(m, n, device='cuda')
    built(a, b, c, m, n, k)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)
    # hidet tensors work as well
    ha, hb, hc = hidet.from_torch(a), hidet.from_torch(b), hidet.empty([m, n], device='cuda')
    torch.cuda.synchronize()
    built(ha, hb, hc, m, n, k)  # on hidet's current stream
    hidet.cuda.synchronize()
    torch.testing.assert_close(hc.torch(), c)


@pytest.mark.cuda
def test_warp_shuffle_reductions():
    built = reduction_module().build()
    x = torch.randn(37, 1000, device='cuda')
    y = torch.empty(37, device='cuda')
    built['row_sum'](x, y, 37, 1000)
    torch.testing.assert_close(y.double(), x.double().sum(1), rtol=1e-4, atol=1e-3)
    flat = torch.randn(5000, device='cuda')
    out = torch.zeros(1, device='cuda')
    built.sum_all(flat, out, 5000)
    torch.testing.assert_close(out.double(), flat.double().sum().reshape(1), rtol=1e-4, atol=1e-3)
    for n in (1000, 20000):  # 80 KB of dynamic shared memory for the larger
        v = torch.randn(n, device='cuda')
        r = torch.empty(n, device='cuda')
        built.reverse(v, r, n)
        torch.testing.assert_close(r, v.flip(0))


@pytest.mark.cuda
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_mma_sync_tile(dtype):
    if dtype == 'bfloat16' and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip('bf16 mma needs sm_80')
    torch_dtype = getattr(torch, dtype)
    built = mma_module(f16 if dtype == 'float16' else bf16).build()
    a = torch.randn(16, 16, device='cuda').to(torch_dtype)
    b = torch.randn(16, 8, device='cuda').to(torch_dtype)
    c = torch.empty(16, 8, device='cuda')
    built(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)


@pytest.mark.cuda
@pytest.mark.parametrize('name', list(WGMMA_MODULES))
def test_wgmma_tile(name):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip('wgmma needs an sm_90 GPU')
    dtype = torch.bfloat16 if 'bf16' in name else torch.float16
    built = WGMMA_MODULES[name]().build()
    a = torch.randn(64, 64, device='cuda').to(dtype)
    b = torch.randn(64, 64, device='cuda').to(dtype)  # [n, k] (k-major) or [k, n] (n-major)
    c = torch.full((64, 64), float('nan'), device='cuda')
    built(a, b, c)
    expected = a.double() @ (b.double().t() if 'k_major' in name else b.double())
    torch.testing.assert_close(c.double(), expected, rtol=1e-3, atol=1e-3)


@pytest.mark.cuda
def test_cuda_argument_checks():
    built = naive_matmul_module().build()
    a = torch.randn(4, 4, device='cuda')
    with pytest.raises(ValueError, match='must be on the GPU'):
        built(a.cpu(), a, a, 4, 4, 4)
    with pytest.raises(TypeError, match='must hold float32'):
        built(a.half(), a, a, 4, 4, 4)
    with pytest.raises(TypeError, match='takes 6 arguments'):
        built(a, a, a, 4, 4)


@pytest.mark.cuda
def test_intrinsics():
    import math
    import struct

    built = intrinsics_module().build()
    fo = torch.zeros(8, device='cuda')
    fo[7] = 0.5
    io = torch.zeros(8, dtype=torch.int32, device='cuda')
    lo = torch.zeros(2, dtype=torch.int64, device='cuda')
    ho = torch.zeros(1, dtype=torch.float16, device='cuda')
    bo = torch.zeros(1, dtype=torch.bfloat16, device='cuda')
    do = torch.zeros(1, dtype=torch.float64, device='cuda')
    built(fo, io, lo, ho, bo, do)
    x = 0.5
    assert fo[:4].tolist() == [64.0, -32.0, 63.0, -63.0]
    assert fo[4].item() == pytest.approx(math.exp(x) + math.sqrt(x) + math.tanh(x) + x + x ** 2, rel=1e-5)
    assert fo[5].item() == pytest.approx(1 + 1 + 1 / math.sqrt(x) + x, rel=1e-5)
    assert fo[6].item() == float(struct.unpack('<i', struct.pack('<f', x))[0])
    assert io.tolist() == [64, 63, -63, 7, 5, 3 * 1000 + 4, 0xF, 10 * 100 + 1 * 10 + 1]
    assert lo.tolist() == [64 << 40, 63]
    assert ho.item() == 32.0 and bo.item() == 64.0 and do.item() == 16.0


@pytest.mark.cuda
@pytest.mark.parametrize('case', list(IM2COL_CASES))
def test_tma_im2col_copies_windows(case):
    """TMA's im2col mode as the matmul template uses it: the corners' order (w, h), traversal strides, window
    offsets, zeros in the padding and past the last image, the 128-byte swizzle of each pixel's row."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip('TMA im2col needs an sm_90 GPU')
    shape, lower, upper, strides, pixels, coords, offsets = IM2COL_CASES[case]
    x = torch.randn(*shape, device='cuda').half()
    out = torch.full((pixels, 64), float('nan'), device='cuda').half()
    im2col_module(*IM2COL_CASES[case]).build()(x, out)
    expected = im2col_reference(x, lower, upper, strides, pixels, coords, offsets)
    assert torch.equal(out, expected), _im2col_diagnosis(x, out, IM2COL_CASES[case])


@pytest.mark.cuda
def test_clusters_share_shared_memory():
    """Each CTA of a cluster reads all its cluster's shared memory (DSMEM): the sums of blocks and ranks."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip('thread-block clusters need an sm_90 GPU')
    blocks = 16
    out = torch.full((blocks, 4), float('nan'), device='cuda')
    cluster_exchange_module(4).build()(out, blocks)
    first = torch.arange(blocks, device='cuda') // 4 * 4  # each block's cluster's first block
    expected = torch.stack([first * 4 + 6, torch.full_like(first, 6), torch.full_like(first, 12),
                            torch.full_like(first, 12)], 1).float()
    assert torch.equal(out, expected), out


def _im2col_diagnosis(x, out, case) -> str:
    """Which reading of the tensor map's (w, h) pairs the hardware's copy matches, if another one does."""
    import itertools

    shape, lower, upper, strides, pixels, coords, offsets = case
    swap = lambda pair: tuple(reversed(pair))  # noqa: E731
    for corners, offs, steps in itertools.product((False, True), repeat=3):
        lo, up = (swap(lower), swap(upper)) if corners else (lower, upper)
        st = (strides[0], strides[2], strides[1], strides[3]) if steps else strides
        try:
            want = im2col_reference(x, lo, up, st, pixels, coords, swap(offsets) if offs else offsets)
        except ValueError:  # (the origin is not on that reading's grid)
            continue
        if torch.equal(out, want):
            return f'the copy matches the reference with (w, h) swapped in: corners {corners}, offsets {offs}, ' \
                   f'traversal strides {steps}'
    rows = [p for p in range(pixels) if not torch.equal(out[p], im2col_reference(
        x, lower, upper, strides, pixels, coords, offsets)[p])]
    return f'no reading of the (w, h) pairs matches; pixels that differ: {rows[:16]}'
