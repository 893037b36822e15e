"""The tensor-core GEMM template (sm_80+), in Hidet Script: fp16/bf16 operands (mma m16n8k16, or on sm_90
warpgroup wgmma m64nNk16), or fp32 operands rounded to TF32 where the task allows it (``tf32`` attribute, from
PassContext.set_use_tensor_core; mma m16n8k8), fp32 accumulation.

A block computes a BM x BN tile of C (its warps WM x WN tiles each) over its share of K:

- global → shared: a ``stages``-deep cp.async pipeline of 16-byte copies (8 fp16/bf16 or 4 fp32 elements),
  zero-filled past the edges. A thread's chunks of a tile share one column: direct operands step one pointer
  per tile by constant strides (no bounds test where tiles divide the shape); gathered operands (an implicit
  GEMM's channels-last input) keep the row parts of their offsets and padding tests in registers and add the
  k parts once per tile (values.RowSplit); a computed operand (a prologue such as a cast) is evaluated per
  element and stored by the threads. Shared rows are padded by 16 bytes, so ldmatrix reads 8 rows from 8
  bank groups.
- shared → registers: ldmatrix (``.trans`` where the operand's contiguous dimension is m or n); TF32
  fragments are read element by element. ``mma.sync`` with fp32 accumulators.
- wgmma configs (``wgmma=True``, sm_90): a warpgroup (4 warps) computes 64 x WN of the tile with
  ``wgmma.mma_async`` reading both operands from shared memory, where the tiles are stored with the 128-byte
  swizzle (k-tile of 64: rows of 128 bytes; see hidet.lang.cuda.wgmma) instead of padded rows. The pipeline keeps
  one wgmma group in flight, so a stage is refilled two tiles after its use: S - 2 tiles are loaded ahead.
  TMA configs (``tma=True``, direct aligned operands, or a convolution's input by im2col columns) are
  warp-specialized: a producer warp after the warpgroups copies a stage's tiles with TMA boxes of tensor maps
  (kernel parameters built by the launch entry), up to S tiles ahead, each stage refilled once every
  warpgroup has released it (an "empty" mbarrier per stage, arrived once the warpgroup's wgmmas of it
  completed); the warpgroups wait on a stage's "full" mbarrier, never for each other. (On the H100 this beat
  thread 0 of the block issuing the copies between block barriers on 20 of 29 tile shapes of resnet50's 3x3
  convolutions and 4096^3, by up to 24%, and lost 4% on 4096^3's 128 x 256 tiles; that mechanism is gone.)
- split-k (``split_k > 1``): on sm_90 (wgmma configs, at most CLUSTER_MAX splits) the split blocks of a tile are
  one thread-block cluster: each stages its partial tile in its shared memory as the epilogue does, then each sums
  its share of the tile's vectors from every block's shared memory (DSMEM, in split order: deterministic) and runs
  the epilogue of that share. Otherwise the blocks write fp32 partial tiles to a workspace; the last to finish
  (a counter per tile) sums them in split order, resets the counter and runs the epilogue.
- epilogue: the accumulators go through shared memory (fp32, padded) so that each thread then computes
  consecutive outputs of a row: the epilogue expression (bias, activation, residual, cast) per element, and
  one 16-byte (else 8-byte) store per thread when the output row is contiguous; then the accumulators and the
  epilogue's reads contiguous along n (a residual, a bias) are vector loads too (values.GemmValues.vector_epilogue).
  A paired epilogue (epilogue.Pair: SwiGLU on the interleaved gate / up GEMM) takes each output from the staged
  columns c and c + PAIR, its threads walking the half-width output tile.
"""
from __future__ import annotations

import functools
from typing import Optional

from hidet.ir.expr import BufferLoad, SymbolVar, Var, binary
from hidet.ir.stmt import Seq

from .config import (STAGE_PAD, WG_ALIGN, MmaConfig, cdiv, check_config, chunk, cluster_split, is_tf32, kernel_name,
                     smem_bytes, stage_buffers, stage_elements, vector_store, vector_width)
from .spec import GemmSpec
from .tma import im2col_map, im2col_window, tensor_map
from .values import GemmValues, _prod, row_split

GROUP_M = 8      # tiles of M visited together (L2 reuse of B)


def tile_offset(spec: GemmSpec, cfg: MmaConfig, k_major: bool, rows: int):
    """``at(r, c, e=0)``: the element offset, in a stage of an operand tile, of element ``e`` of the 16-byte
    chunk at (row ``r``, column ``c``, a multiple of the chunk) of its shared layout (rows: m or n for a
    k-major operand, k otherwise; ``rows`` m/n values per stage). mma: padded rows. wgmma: the 128-byte
    swizzle — k-major rows of 64 k values, chunk c / 8 at (c / 8) ^ (r % 8); m/n-major blocks of
    [k rows][64 values], one per 64 of m/n."""
    ch = chunk(spec)
    if not cfg.wgmma:
        row = (cfg.bk if k_major else rows) + ch
        return lambda r, c, e=0: r * row + c + e

    def swizzle(r, c):
        return (c // ch ^ r % 8) * ch

    if k_major:
        return lambda r, c, e=0: r * cfg.bk + swizzle(r, c) + e
    return lambda r, c, e=0: c // 64 * (cfg.bk * 64) + r * 64 + swizzle(r, c % 64) + e


def _chunk_step(at, rstep: int, shape, ch: int) -> Optional[int]:
    """The shared offset between a thread's consecutive chunks of a stage tile (``rstep`` rows apart) in layout
    ``at`` where it is the same for every row and column (padded rows; the swizzle when rows a multiple of 8
    apart), so a thread adds multiples of it to its first chunk's offset; else None."""
    rows, cols = shape
    steps = {at(r + rstep, c) - at(r, c) for r in range(rows - rstep) for c in range(0, cols, ch)}
    return steps.pop() if len(steps) == 1 else None


# 32-bit registers a thread may hold for the epilogue reads it issues ahead of their use (GemmValues.epilogue_reads):
# GPT-2's residual and bias at batch 8 (8 a vector) for 12 vectors in 128 x 192 tiles
PREFETCH_REGS = 96
# ... and for tiles of at most 64 x 128, which share an SM with other blocks: registers are occupancy there (resnet50's
# residual epilogues at batch 32 in 64 x 128 tiles: 4 vectors' reads ahead, 104 registers a thread, three blocks an
# SM; all 8 ahead took 138, two blocks)
PREFETCH_REGS_SHARED_SM = 16


def read_registers(plan, vectors) -> int:
    """32-bit registers that the reads of one vector of a vector epilogue (a LanePlan) hold: its broadcast reads and
    the vector reads of ``vectors`` (placeholders)."""
    return (sum(-(-plan.lanes * e.dtype.nbytes // 4) for v, e, _ in plan.vectors if any(v is w for w in vectors))
            + sum(-(-e.dtype.nbytes // 4) for _, e in plan.broadcasts))


def build_script_module(spec: GemmSpec, cfg: MmaConfig, m_bound=None):
    """The Hidet Script module of the kernel. Its parameters: the task's inputs, the output, then (split-k)
    the workspace and the tile counters, then the task's symbolic dimensions (scalars, in the order of the
    kernel ABI's dims). A symbolic m runs in grids computed from the dims; ``m_bound`` (the largest m of the
    range this kernel serves) is what split-k is checked at."""
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    import hidet
    from hidet.lang import attr, f32, i32, i64, register_tensor, view
    from hidet.lang.cuda import (atomic_add, blockIdx, cp_async, cp_async_commit_group, cp_async_wait_all,
                                 cp_async_wait_group, dynamic_shared_memory, fence_mbarrier_init, fence_proxy_async,
                                 ldmatrix, mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait, mma_sync,
                                 mbarrier_arrive, named_barrier_sync, shared_tensor, syncthreads, threadfence,
                                 threadIdx, tma_load, tma_load_im2col, wgmma, wgmma_commit_group, wgmma_fence,
                                 wgmma_wait_group, cluster_load_f32x4, cluster_sync)

    why = check_config(spec if m_bound is None else _at_m(spec, m_bound), cfg)
    if why:
        raise ValueError(f'matmul template config {cfg.name()} for {spec.shape_text()}: {why}')
    values = GemmValues(spec)
    ins, out = values.ins, values.out
    a_value, b_value, epilogue, out_index = values.a_value, values.b_value, values.epilogue, values.out_index
    direct_base = values.direct_base

    dt = spec.mma_dtype
    M, N, K = spec.m, spec.n, spec.k
    BM, BN, BK, WM, WN, S, SPLIT = cfg.bm, cfg.bn, cfg.bk, cfg.wm, cfg.wn, cfg.stages, cfg.split_k
    THREADS = cfg.threads
    WG = cfg.wgmma
    WARPS_N = BN // WN  # warps (mma) or warpgroups (wgmma) along n
    MT, NT = (1, WN // 8) if WG else (WM // 16, WN // 8)  # a warp's mma m16n8 tiles (wgmma: as its share)
    TM, TN = cdiv(M, BM), cdiv(N, BN)
    BATCH = spec.batch
    A_KM, B_KM = spec.a.k_major, spec.b.k_major
    A_DIRECT, B_DIRECT = spec.a.vector_ok, spec.b.vector_ok
    A_GATHER, B_GATHER = spec.a.gather is not None, spec.b.gather is not None
    gather_offset, gather_valid = values.gather_offset, values.gather_valid
    CH = chunk(spec)  # elements per 16-byte copy
    TF32 = is_tf32(spec)
    KSTEP = 8 if TF32 else 16  # k of one mma
    A_STAGE, B_STAGE = stage_elements(spec, cfg)
    BUFFERS = stage_buffers(spec, cfg)  # (tile kt in stage kt % S)
    A_SHAPE, B_SHAPE = [BUFFERS, A_STAGE], [BUFFERS, B_STAGE]
    A_BYTES = _prod(A_SHAPE) * dt.nbytes
    a_at, b_at = tile_offset(spec, cfg, A_KM, BM), tile_offset(spec, cfg, B_KM, BN)
    ALIGN = WG_ALIGN if WG else 16
    LEAD = S - 2 if WG else S - 1  # tiles loaded ahead of the one multiplied
    # wgmma: where a warpgroup's operands start in a stage (its m / n offset), the step of k16, the block stride
    A_K16, B_K16 = (16 if A_KM else 16 * 64), (16 if B_KM else 16 * 64)
    A_LBO, B_LBO = (0 if A_KM else BK * 64 * dt.nbytes), (0 if B_KM else BK * 64 * dt.nbytes)
    SMEM = smem_bytes(spec, cfg)
    # 16-byte chunks of a stage tile, in its shared layout: rows x (cols / CH)
    A_CPR = (BK if A_KM else BM) // CH
    B_CPR = (BK if B_KM else BN) // CH
    A_ITERS = [] if cfg.tma else list(range(BM * BK // CH // THREADS))  # (TMA: no per-thread copies)
    B_ITERS = [] if cfg.tma else list(range(BN * BK // CH // THREADS))
    A_RSTEP, B_RSTEP = THREADS // A_CPR, THREADS // B_CPR  # tile rows between a thread's chunks
    FULL_K = isinstance(K, int) and K % BK == 0  # every k-tile whole (a split's k is a multiple of BK)
    A_FULL = isinstance(M, int) and M % BM == 0  # every tile's rows inside the operand: no test
    B_FULL = isinstance(N, int) and N % BN == 0
    KC = -(-(-(-K // BK)) // SPLIT) * BK  # k per split, a multiple of BK
    KSTEPS = list(range(BK // KSTEP))
    K16S = list(range(BK // 16))
    MTS, NTS, NT2S = list(range(MT)), list(range(NT)), list(range(NT // 2))
    CHS, FOUR = list(range(CH)), list(range(4))
    MMA_SHAPE = 'm16n8k8' if TF32 else 'm16n8k16'
    A_FRAG, B_FRAG = (4, 2) if TF32 else (8, 4)  # operand values per lane of one mma
    LD_MTS, LD_NT2S = ([], []) if TF32 else (MTS, NT2S)  # ldmatrix loops (16-bit operands only)
    A_TF32 = [(q, q % 2 * 8, q // 2 * 4) for q in range(4)]  # (value, m offset, k offset) of a TF32 A fragment
    B_TF32 = [(q, q * 4) for q in range(2)]  # (value, k offset) of a TF32 B fragment
    V = vector_width(spec)
    VEC = vector_store(spec)
    PLAN = values.epilogue_plan(V) if VEC else None

    VS = list(range(V))
    PAIR = spec.pair  # a paired epilogue: outputs at the tile's columns c % (2 PAIR) < PAIR, from c and c + PAIR
    OUT_BN = BN // 2 if PAIR else BN  # outputs of a tile row
    VPR = OUT_BN // V
    # (a paired epilogue's half-width tile may have fewer vectors than a skinny tile has threads: those idle)
    E_ITERS = cdiv(BM * OUT_BN // V, THREADS)
    IDLE = BM * OUT_BN // V % THREADS != 0  # threads without a vector in the last iteration
    DSMEM = cluster_split(spec, cfg)  # the split blocks of a tile: one cluster, summing through shared memory
    PARTIAL = DSMEM or IDLE  # some threads' vector index passes the tile's vectors (idx < BM * VPR tells)
    # a transposed output (consecutive m consecutive in memory): a warp's threads take consecutive rows of the
    # staged tile, so each of their scalar stores covers 64 contiguous bytes (walking n, 32 scattered 2-byte
    # stores: mobile networks' expansion convolutions written NCHW for their depthwise ones); the staging rows
    # are then an odd number of words apart, so those column reads hit 32 banks
    M_WALK = spec.out_m_contiguous and not VEC and not DSMEM and not PAIR
    PITCH = BN + (1 if M_WALK else STAGE_PAD)
    RANK_ITERS = -(-E_ITERS // SPLIT)  # (DSMEM) epilogue iterations of each block of the cluster
    ITERS = RANK_ITERS if DSMEM else E_ITERS  # a thread's epilogue iterations (vectors of outputs)
    # The vector epilogue's reads (a residual, a bias) issued ahead of the stores, a group of iterations at a time
    # (GemmValues.epilogue_reads): the first group's while the tile is staged, each later one before its stores
    # A thread's vectors all lie in one column of the tile (its rows THREADS / VPR apart): the per-column reads (a
    # bias, a batch norm's float32 scale and shift) are loaded once, not with each vector (resnet's batch-norm
    # epilogues: 16 of a vector's 20 registers of reads, which cut the vectors read ahead to 4 of 8)
    COLUMN_VECS = values.column_vectors(PLAN) if VEC and not M_WALK and not DSMEM and THREADS % VPR == 0 else []
    ROW_VECS = [v for v, _, _ in PLAN.vectors if not any(v is w for w in COLUMN_VECS)] if VEC else []
    READ_REGS = read_registers(PLAN, ROW_VECS) if VEC else 0
    BUDGET = PREFETCH_REGS_SHARED_SM if BM * BN <= 64 * 128 else PREFETCH_REGS
    GROUP = min(ITERS, max(1, BUDGET // READ_REGS)) if READ_REGS else ITERS if COLUMN_VECS else 0
    PREFETCH = GROUP > 0
    GROUPS = [list(range(g, min(g + GROUP, ITERS))) for g in range(0, ITERS, GROUP)] if PREFETCH else [[]]
    READS = {}  # iteration → its reads' registers (epilogue_reads)
    COLUMN_READS = {}  # the per-column reads' registers (column_reads)
    ITER_LIST = list(range(ITERS))

    def epilogue_vector(tid, split, it):
        """(index of the thread's vector ``it`` in the tile, its row, its column)."""
        idx = tid + (split * RANK_ITERS + it if DSMEM else it) * THREADS
        if M_WALK:
            return idx, idx % BM, idx / BM * V
        if PAIR:  # (the vector's output column → the first column of its pairs: V divides PAIR)
            return idx, idx / VPR, idx % VPR * V / PAIR * (2 * PAIR) + idx % VPR * V % PAIR
        return idx, idx / VPR, idx % VPR * V

    def epilogue_reads(tid, split, bz, m0, n0, it):
        """The statements issuing iteration ``it``'s epilogue reads (where its outputs exist)."""
        idx, r, c = epilogue_vector(tid, split, it)
        gm, gn = m0 + r, n0 + c
        cond = all_of(True if A_FULL else gm < M, True if B_FULL else gn < N,
                      idx < BM * VPR if PARTIAL else True)
        stmt, READS[it] = values.epilogue_reads(PLAN, bz, gm, gn, cond, it, ROW_VECS if COLUMN_VECS else None)
        READS[it].update(COLUMN_READS)
        return stmt

    def column_reads(tid, bz, n0):
        """The statements loading the thread's per-column reads once (COLUMN_VECS; none without them)."""
        if not COLUMN_VECS:
            return Seq([])
        _, _, c = epilogue_vector(tid, 0, 0)
        stmt, regs = values.column_reads(PLAN, bz, n0 + c, True if B_FULL else n0 + c < N)
        COLUMN_READS.update(regs)
        return stmt

    def vector_epilogue(bz, gm, gn, cst, r, c, it):
        """A thread's vector of outputs (gn a multiple of V): the epilogue's vector reads (issued ahead, as
        iteration ``it``'s, when PREFETCH), its lanes, one store."""
        return values.vector_epilogue(PLAN, bz, gm, gn, cst, r * PITCH + c,
                                      READS[it] if PREFETCH else None)
    ACC_N = MT * NT * 4
    ACCS = [(mi, ni, e) for mi in MTS for ni in NTS for e in FOUR]
    A_PTR = ins[spec.a.direct[0]] if A_DIRECT else ins[spec.a.gather.pos] if A_GATHER else None
    B_PTR = ins[spec.b.direct[0]] if B_DIRECT else ins[spec.b.gather.pos] if B_GATHER else None
    A_SMN, A_SK = values.direct_strides(spec.a, spec.m_var) if A_DIRECT else (0, 0)
    B_SMN, B_SK = values.direct_strides(spec.b, spec.n_var) if B_DIRECT else (0, 0)
    A_SSTEP = _chunk_step(a_at, A_RSTEP, (BM, BK) if A_KM else (BK, BM), CH)
    B_SSTEP = _chunk_step(b_at, B_RSTEP, (BN, BK) if B_KM else (BK, BN), CH)
    A_STEP = A_RSTEP * (A_SMN if A_KM else A_SK)  # elements between a thread's chunks of a direct operand
    B_STEP = B_RSTEP * (B_SMN if B_KM else B_SK)
    A_SPLIT, B_SPLIT = (row_split(op.gather.offset, op.gather.valid, spec.k_var) if op.gather is not None else None
                        for op in (spec.a, spec.b))
    A_IDX, B_IDX = (values.index_dtype(op) if op.gather is not None else i32 for op in (spec.a, spec.b))
    A_NT, B_NT = (len(x.row_terms) if x is not None else 0 for x in (A_SPLIT, B_SPLIT))
    A_TERMS, B_TERMS = list(range(A_NT)), list(range(B_NT))

    def all_of(*conds):
        """The conjunction of conditions (Python True: statically true), without && (no branches)."""
        conds = [c for c in conds if c is not True]
        return functools.reduce(lambda x, y: binary('&', x, y), conds) if conds else True

    def split_row(op, split, bz, gmn, j):
        """A chunk row's part of a split gather: its offset (j = -1) or row term j."""
        offset, terms = values.gather_row(op, split, bz, gmn)
        return offset if j < 0 else terms[j]

    def split_ok(op, split, rt, it, gk):
        """The padding test of chunk ``it`` at ``gk``: its row terms (in ``rt``) against the k sides."""
        sides = values.gather_k(op, split, gk)[1]
        nt = len(split.row_terms)
        conds = [binary(o, BufferLoad(rt, it * nt + i, rt.type.dtype), side)
                 for (i, o, _), side in zip(split.conds, sides)]
        return all_of(*conds)

    def split_offset(op, split, ro, it, gk):
        return BufferLoad(ro, it, ro.type.dtype) + values.gather_k(op, split, gk)[0]

    TMA = cfg.tma  # (wgmma) a producer warp copies a stage's tiles with TMA; the warpgroups wait on its mbarrier
    STAGE_BYTES = (BM + BN) * BK * dt.nbytes
    MAPS, A_MAP, B_MAP, A_BOXES, B_BOXES, A_3D, B_3D = [], None, None, [], [], False, False
    WIN = im2col_window(spec) if TMA and not A_DIRECT else None  # A: a convolution's input, copied by im2col
    if WIN is not None:
        # a tile's pixels (rows m = (n, oh, ow)) from their first's window origin, one column per k-tile at window
        # position k0 / channels (offsets (kw * dw, kh * dh)), channels k0 % channels onwards
        IM_C, (IM_OH, IM_OW), IM_KW = WIN.input[3], WIN.out, WIN.kernel[1]
        (IM_SH, IM_SW), (IM_PH, IM_PW), (IM_DH, IM_DW) = WIN.stride, WIN.padding, WIN.dilation
    if TMA:
        if WIN is not None:
            a_map_type, A_3D = im2col_map(values, WIN, BM), False
        else:
            a_map_type, A_3D = tensor_map(values, spec.a, M, BM)
        b_map_type, B_3D = tensor_map(values, spec.b, N, BN)
        A_MAP, B_MAP = Var('tmap_a', dt, type=a_map_type), Var('tmap_b', dt, type=b_map_type)
        MAPS = [A_MAP, B_MAP]
        # (box, its m/n offset in the tile, its element offset in the stage): one box, or one per 64 of m/n
        A_BOXES = [] if WIN is not None else [(0, 0)] if A_KM else [(j * 64, j * 64 * BK) for j in range(BM // 64)]
        B_BOXES = [(0, 0)] if B_KM else [(j * 64, j * 64 * BK) for j in range(BN // 64)]

    def tma_copy(tmap, batched, k_major, dst, bar, mn, k, bz):
        coords = [k, mn] if k_major else [mn, k]
        return tma_load(dst, tmap, bar, *(coords + [bz] if batched else coords))

    def im2col_origin(k0, m0):
        """The im2col column of tile m0 at k0: its first pixel's window origin (c, w, h, n)."""
        pix = m0 % (IM_OH * IM_OW)
        return [k0 % IM_C, pix % IM_OW * IM_SW - IM_PW, pix / IM_OW * IM_SH - IM_PH, m0 / (IM_OH * IM_OW)]

    def im2col_offsets(k0):
        """The window position (kw * dw, kh * dh) of k0's channels."""
        win = k0 / IM_C
        return [win % IM_KW * IM_DW, win / IM_KW * IM_DH]

    BLOCK = THREADS + 32 if TMA else THREADS  # (TMA: the producer warp after the warpgroups)

    def block_sync():
        """A barrier of the threads computing the tile (TMA: not the producer warp, gone by then)."""
        return named_barrier_sync(1, THREADS) if TMA else syncthreads()

    name = kernel_name(spec, cfg)

    def warp_m0(warp):
        return (warp / 4 / WARPS_N) * 64 + warp % 4 * 16 if WG else (warp / WARPS_N) * WM

    def warp_n0(warp):
        return (warp / 4 % WARPS_N) * WN if WG else (warp % WARPS_N) * WN

    with hidet.script_module() as module:
        @hidet.script
        def mma_gemm(ws: ~f32, locks: ~i32):
            attr.func_name = name
            attr.cuda_grid_dim = TM * TN, SPLIT, BATCH
            attr.cuda_block_dim = BLOCK
            attr.cuda_dynamic_smem_bytes = SMEM
            if DSMEM:
                attr.cuda_cluster_dim = 1, SPLIT, 1
            sa = view(dynamic_shared_memory(0, dt, ALIGN), dt[A_SHAPE])
            sb = view(dynamic_shared_memory(A_BYTES, dt, ALIGN), dt[B_SHAPE])
            flag = shared_tensor(i32, [1])
            bars = shared_tensor(i64, [S])  # TMA: a stage's tiles have landed
            empty = shared_tensor(i64, [S])  # TMA: every warpgroup is done with a stage's tiles
            tid = threadIdx.x
            if TMA:
                if tid == 0:
                    for s in range(S):
                        mbarrier_init(~bars[s], 1)
                        mbarrier_init(~empty[s], THREADS // 128)
                    fence_mbarrier_init()
                syncthreads()
            lane = tid % 32
            warp = tid / 32
            fg = lane / 4  # the lane's group and index in it, in the mma fragment layouts
            ft = lane % 4
            wm0 = warp_m0(warp)  # the warp's first row and column in the tile
            wn0 = warp_n0(warp)
            wg = warp / 4  # wgmma: the warpgroup and its offsets into the operand tiles of a stage
            wg_a = (wg / WARPS_N) * 64 * BK  # (64 rows of k, or one 64-wide block of [k][m], per warpgroup)
            wg_b = (wg % WARPS_N) * WN * BK
            # tile of this block: groups of GROUP_M tile rows, column by column (L2 reuse)
            pid = blockIdx.x
            group = pid / (GROUP_M * TN)
            first_m = group * GROUP_M
            gsize = min(TM - first_m, GROUP_M)
            pm = first_m + (pid % (GROUP_M * TN)) % gsize
            pn = (pid % (GROUP_M * TN)) / gsize
            m0 = pm * BM
            n0 = pn * BN
            split = blockIdx.y
            bz = blockIdx.z
            k_begin = split * KC
            k_end = min(K, k_begin + KC)
            k_tiles = (k_end - k_begin + BK - 1) / BK
            a_base: i64 = 0
            b_base: i64 = 0
            if A_DIRECT:
                a_base = direct_base(spec.a, bz)
            if B_DIRECT:
                b_base = direct_base(spec.b, bz)

            # this thread's chunks of a stage tile: rows r0 + it * RSTEP of column c0 (its k decoded once per tile)
            a_r0 = tid / A_CPR
            a_c0 = tid % A_CPR * CH
            a_mn0 = m0 + (a_r0 if A_KM else a_c0)  # the m of its first chunk, and its k in a tile
            a_k0 = a_c0 if A_KM else a_r0
            a_left = M - a_mn0
            b_r0 = tid / B_CPR
            b_c0 = tid % B_CPR * CH
            b_mn0 = n0 + (b_r0 if B_KM else b_c0)
            b_k0 = b_c0 if B_KM else b_r0
            b_left = N - b_mn0
            a_s0 = a_at(a_r0, a_c0)  # the shared offset of its first chunk in a stage (the others: + it * SSTEP)
            b_s0 = b_at(b_r0, b_c0)
            # gathered operands: the row parts of each chunk's offset and padding tests, once (see RowSplit)
            a_ro = register_tensor(A_IDX, [max(1, len(A_ITERS))])
            a_rt = register_tensor(A_IDX, [max(1, len(A_ITERS) * A_NT)])
            b_ro = register_tensor(B_IDX, [max(1, len(B_ITERS))])
            b_rt = register_tensor(B_IDX, [max(1, len(B_ITERS) * B_NT)])
            if A_SPLIT is not None:
                for it in A_ITERS:
                    a_ro[it] = split_row(spec.a, A_SPLIT, bz, a_mn0 + it * A_RSTEP, -1)
                    for j in A_TERMS:
                        a_rt[it * A_NT + j] = split_row(spec.a, A_SPLIT, bz, a_mn0 + it * A_RSTEP, j)
            if B_SPLIT is not None:
                for it in B_ITERS:
                    b_ro[it] = split_row(spec.b, B_SPLIT, bz, b_mn0 + it * B_RSTEP, -1)
                    for j in B_TERMS:
                        b_rt[it * B_NT + j] = split_row(spec.b, B_SPLIT, bz, b_mn0 + it * B_RSTEP, j)

            acc = register_tensor(f32, [MT, NT, 4])
            af = register_tensor(dt, [2, MT, A_FRAG])  # fragments of two k-steps: load the next, multiply this one
            bf = register_tensor(dt, [2, NT, B_FRAG])
            if not WG:  # (wgmma: the first k-step overwrites them)
                for mi, ni, e in ACCS:
                    acc[mi, ni, e] = 0.0

            if TMA:
                if tid >= THREADS:  # the producer warp: one lane copies tile kt once its stage is free
                    if tid == THREADS:
                        for kt in range(k_tiles):
                            st = kt % S
                            k0 = k_begin + kt * BK
                            if kt >= S:
                                mbarrier_wait(~empty[st], (kt / S + 1) % 2)  # (released for tile kt - S)
                            mbarrier_arrive_expect_tx(~bars[st], STAGE_BYTES)
                            if WIN is not None:
                                tma_load_im2col(~sa[st, 0], A_MAP, ~bars[st], im2col_origin(k0, m0), im2col_offsets(k0))
                            for dmn, so in A_BOXES:
                                tma_copy(A_MAP, A_3D, A_KM, ~sa[st, so], ~bars[st], m0 + dmn, k0, bz)
                            for dmn, so in B_BOXES:
                                tma_copy(B_MAP, B_3D, B_KM, ~sb[st, so], ~bars[st], n0 + dmn, k0, bz)
                    if DSMEM:  # (the warp arrives at the cluster's two barriers of the epilogue, then exits)
                        cluster_sync()
                        cluster_sync()
                    return
                for kt in range(k_tiles):
                    mbarrier_wait(~bars[kt % S], (kt / S) % 2)
                    wgmma_fence()
                    for ks in K16S:
                        wgmma(~acc[0, 0, 0], ~sa[kt % S, wg_a + ks * A_K16], ~sb[kt % S, wg_b + ks * B_K16], WN,
                              not A_KM, not B_KM, A_LBO, B_LBO, kt > 0 or ks > 0)
                    wgmma_commit_group()
                    wgmma_wait_group(1)  # (tile kt - 1's wgmmas are complete: its stage is released)
                    if kt > 0 and tid % 128 == 0:
                        mbarrier_arrive(~empty[(kt - 1) % S])
            else:
                # iterations kt < 0 fill the pipeline; at kt = -1 the first tile's first fragments are loaded (mma)
                for kt in range(-LEAD, k_tiles):
                    if WG:
                        if kt >= 0:
                            # tile kt has landed (the copies of every thread: fence and barrier), and every
                            # warpgroup is done with tile kt - 2, whose stage the copies below refill
                            cp_async_wait_group(S - 3)
                            fence_proxy_async()
                            syncthreads()
                    nxt = kt + LEAD
                    if nxt < k_tiles:
                        st = nxt % S
                        k0 = k_begin + nxt * BK
                        # ---- A tile (chunk it of this thread: tile row a_r0 + it * A_RSTEP, column a_c0)
                        a_off = a_base + i64(a_mn0) * A_SMN + i64(k0 + a_k0) * A_SK  # (direct: its first chunk)
                        for it in A_ITERS:
                            r = a_r0 + it * A_RSTEP
                            so = a_s0 + it * A_SSTEP if A_SSTEP is not None else a_at(r, a_c0)
                            if A_DIRECT:
                                ok = all_of(A_FULL or (it * A_RSTEP < a_left if A_KM else a_left > 0),
                                            FULL_K or k0 + a_k0 + (0 if A_KM else it * A_RSTEP) < k_end)
                                cp_async(~sa[st, so], A_PTR + (a_off + it * A_STEP), 16, 16 if ok else 0)
                            elif A_SPLIT is not None:  # k-major: a_c0 runs along k, 8 channels of one window position
                                gk = k0 + a_k0
                                ok = all_of(A_FULL or it * A_RSTEP < a_left, FULL_K or gk < k_end,
                                            split_ok(spec.a, A_SPLIT, a_rt, it, gk))
                                cp_async(~sa[st, so], A_PTR + i64(split_offset(spec.a, A_SPLIT, a_ro, it, gk)),
                                         16, 16 if ok else 0)
                            elif A_GATHER:
                                gm = m0 + r
                                gk = k0 + a_c0
                                ok = gm < M and gk < k_end and gather_valid(spec.a, bz, gm, gk)
                                off = gather_offset(spec.a, bz, gm, gk)
                                cp_async(~sa[st, so], A_PTR + (off if ok else i64(0)), 16, 16 if ok else 0)
                            else:
                                gm = m0 + (r if A_KM else a_c0)
                                gk = k0 + (a_c0 if A_KM else r)
                                for e in CHS:
                                    v: f32 = 0.0
                                    if A_KM:
                                        if gm < M and gk + e < k_end:
                                            v = a_value(bz, gm, gk + e)
                                    else:
                                        if gk < k_end and gm + e < M:
                                            v = a_value(bz, gm + e, gk)
                                    sa[st, a_at(r, a_c0, e)] = v
                        # ---- B tile
                        b_off = b_base + i64(b_mn0) * B_SMN + i64(k0 + b_k0) * B_SK
                        for it in B_ITERS:
                            r = b_r0 + it * B_RSTEP
                            so = b_s0 + it * B_SSTEP if B_SSTEP is not None else b_at(r, b_c0)
                            if B_DIRECT:
                                ok = all_of(B_FULL or (it * B_RSTEP < b_left if B_KM else b_left > 0),
                                            FULL_K or k0 + b_k0 + (0 if B_KM else it * B_RSTEP) < k_end)
                                cp_async(~sb[st, so], B_PTR + (b_off + it * B_STEP), 16, 16 if ok else 0)
                            elif B_SPLIT is not None:
                                gk = k0 + b_k0
                                ok = all_of(B_FULL or it * B_RSTEP < b_left, FULL_K or gk < k_end,
                                            split_ok(spec.b, B_SPLIT, b_rt, it, gk))
                                cp_async(~sb[st, so], B_PTR + i64(split_offset(spec.b, B_SPLIT, b_ro, it, gk)),
                                         16, 16 if ok else 0)
                            elif B_GATHER:
                                gn = n0 + r
                                gk = k0 + b_c0
                                ok = gn < N and gk < k_end and gather_valid(spec.b, bz, gn, gk)
                                off = gather_offset(spec.b, bz, gn, gk)
                                cp_async(~sb[st, so], B_PTR + (off if ok else i64(0)), 16, 16 if ok else 0)
                            else:
                                gn = n0 + (r if B_KM else b_c0)
                                gk = k0 + (b_c0 if B_KM else r)
                                for e in CHS:
                                    v: f32 = 0.0
                                    if B_KM:
                                        if gn < N and gk + e < k_end:
                                            v = b_value(bz, gn, gk + e)
                                    else:
                                        if gk < k_end and gn + e < N:
                                            v = b_value(bz, gn + e, gk)
                                    sb[st, b_at(r, b_c0, e)] = v
                    cp_async_commit_group()
                    if WG:
                        if kt >= 0:
                            # (after the copies: issuing a wgmma waits for the tensor cores, which would delay them)
                            wgmma_fence()
                            for ks in K16S:
                                wgmma(~acc[0, 0, 0], ~sa[kt % S, wg_a + ks * A_K16], ~sb[kt % S, wg_b + ks * B_K16], WN,
                                      not A_KM, not B_KM, A_LBO, B_LBO, kt > 0 or ks > 0)
                            wgmma_commit_group()
                            wgmma_wait_group(1)
                    elif kt == -1:
                        cp_async_wait_group(S - 2)
                        syncthreads()
                        if TF32:  # fragments element by element (A[g|g+8, t|t+4], B[t|t+4, g])
                            for mi in MTS:
                                for q, dm, dk in A_TF32:
                                    if A_KM:
                                        af[0, mi, q] = sa[0, a_at(wm0 + mi * 16 + fg + dm, ft + dk)]
                                    else:
                                        af[0, mi, q] = sa[0, a_at(ft + dk, wm0 + mi * 16 + fg + dm)]
                            for ni in NTS:
                                for q, dk in B_TF32:
                                    if B_KM:
                                        bf[0, ni, q] = sb[0, b_at(wn0 + ni * 8 + fg, ft + dk)]
                                    else:
                                        bf[0, ni, q] = sb[0, b_at(ft + dk, wn0 + ni * 8 + fg)]
                        for mi in LD_MTS:
                            if A_KM:
                                ldmatrix(~af[0, mi, 0], ~sa[0, a_at(wm0 + mi * 16 + lane % 16, lane / 16 * 8)], 4)
                            else:
                                ldmatrix(~af[0, mi, 0],
                                         ~sa[0, a_at(lane % 8 + lane / 16 * 8, wm0 + mi * 16 + lane / 8 % 2 * 8)], 4,
                                         True)
                        for nj in LD_NT2S:
                            if B_KM:
                                ldmatrix(~bf[0, 2 * nj, 0],
                                         ~sb[0, b_at(wn0 + nj * 16 + lane / 16 * 8 + lane % 8, lane / 8 % 2 * 8)], 4)
                            else:
                                ldmatrix(~bf[0, 2 * nj, 0], ~sb[0, b_at(lane % 16, wn0 + nj * 16 + lane / 16 * 8)], 4,
                                         True)
                    if not WG and kt >= 0:
                        for ks in KSTEPS:
                            # the fragments of the next k-step: of this tile, or (last step) of the next tile, once
                            # it has landed and every warp is done with the stage the next copies overwrite
                            if ks == len(KSTEPS) - 1:
                                cp_async_wait_group(S - 2)
                                syncthreads()
                            ls = (kt + 1) % S if ks == len(KSTEPS) - 1 else kt % S
                            lk = 0 if ks == len(KSTEPS) - 1 else (ks + 1) * KSTEP
                            nb = (ks + 1) % 2
                            if TF32:
                                for mi in MTS:
                                    for q, dm, dk in A_TF32:
                                        if A_KM:
                                            af[nb, mi, q] = sa[ls, a_at(wm0 + mi * 16 + fg + dm, lk + ft + dk)]
                                        else:
                                            af[nb, mi, q] = sa[ls, a_at(lk + ft + dk, wm0 + mi * 16 + fg + dm)]
                                for ni in NTS:
                                    for q, dk in B_TF32:
                                        if B_KM:
                                            bf[nb, ni, q] = sb[ls, b_at(wn0 + ni * 8 + fg, lk + ft + dk)]
                                        else:
                                            bf[nb, ni, q] = sb[ls, b_at(lk + ft + dk, wn0 + ni * 8 + fg)]
                            for mi in LD_MTS:
                                if A_KM:
                                    ldmatrix(~af[nb, mi, 0],
                                             ~sa[ls, a_at(wm0 + mi * 16 + lane % 16, lk + lane / 16 * 8)], 4)
                                else:
                                    ldmatrix(~af[nb, mi, 0],
                                             ~sa[ls, a_at(lk + lane % 8 + lane / 16 * 8,
                                                          wm0 + mi * 16 + lane / 8 % 2 * 8)],
                                             4, True)
                            for nj in LD_NT2S:
                                if B_KM:
                                    ldmatrix(~bf[nb, 2 * nj, 0],
                                             ~sb[ls, b_at(wn0 + nj * 16 + lane / 16 * 8 + lane % 8,
                                                          lk + lane / 8 % 2 * 8)],
                                             4)
                                else:
                                    ldmatrix(~bf[nb, 2 * nj, 0],
                                             ~sb[ls, b_at(lk + lane % 16, wn0 + nj * 16 + lane / 16 * 8)], 4, True)
                            for mi in MTS:
                                for ni in NTS:
                                    mma_sync(~af[ks % 2, mi, 0], ~bf[ks % 2, ni, 0], ~acc[mi, ni, 0], MMA_SHAPE)
            if WG:
                wgmma_wait_group(0)
            cp_async_wait_all()

            if SPLIT > 1 and not DSMEM:
                # partial tiles → workspace; the last block of the tile sums them in split order
                tile = (bz * TM + pm) * TN + pn
                for mi, ni, e in ACCS:
                    ws[(i64(tile * SPLIT + split) * ACC_N + (mi * NT + ni) * 4 + e) * THREADS + tid] = acc[mi, ni, e]
                threadfence()
                block_sync()
                if tid == 0:
                    flag[0] = atomic_add(~locks[tile], 1)
                block_sync()
                if flag[0] != SPLIT - 1:
                    return
                threadfence()
                for mi, ni, e in ACCS:
                    total: f32 = 0.0
                    for s in range(SPLIT):
                        total += ws[(i64(tile * SPLIT + s) * ACC_N + (mi * NT + ni) * 4 + e) * THREADS + tid]
                    acc[mi, ni, e] = total
                if tid == 0:
                    locks[tile] = 0

            # ---- epilogue: accumulators → shared (fp32) → outputs
            block_sync()
            cst = view(dynamic_shared_memory(0, f32), f32[BM, PITCH])
            g = lane / 4
            t4 = lane % 4
            for mi in MTS:
                for ni in NTS:
                    r = wm0 + mi * 16 + g
                    c = wn0 + ni * 8 + t4 * 2
                    cst[r, c] = acc[mi, ni, 0]
                    cst[r, c + 1] = acc[mi, ni, 1]
                    cst[r + 8, c] = acc[mi, ni, 2]
                    cst[r + 8, c + 1] = acc[mi, ni, 3]
            column_reads(tid, bz, n0)
            for it in GROUPS[0]:
                epilogue_reads(tid, split, bz, m0, n0, it)
            if DSMEM:
                # every block of the cluster has its partial tile in its shared memory; block `split` sums its
                # share of the tile's vectors (rows split * RANK_ITERS * THREADS / VPR onwards) from all of them
                cluster_sync()
            else:
                block_sync()
            for it in ITER_LIST if PREFETCH else range(ITERS):  # (PREFETCH: unrolled)
                if PREFETCH and it % GROUP == 0 and it > 0:
                    for later in GROUPS[it // GROUP]:
                        epilogue_reads(tid, split, bz, m0, n0, later)
                idx, r, c = epilogue_vector(tid, split, it)
                if DSMEM:
                    if idx < BM * VPR:
                        part = register_tensor(f32, [4])  # 4 floats of a block's partial tile
                        total = register_tensor(f32, [4])
                        for q in range(V // 4):
                            for e in FOUR:
                                total[e] = 0.0
                            for s in range(SPLIT):  # (in split order: deterministic)
                                cluster_load_f32x4(~part[0], ~cst[r, c + q * 4], s)
                                for e in FOUR:
                                    total[e] += part[e]
                            for e in FOUR:  # (rows of this block's share: no other block reads them here)
                                cst[r, c + q * 4 + e] = total[e]
                gm = m0 + r
                gn = n0 + c
                if gm < M and idx < BM * VPR if PARTIAL else gm < M:
                    if VEC:
                        if gn < N:
                            vector_epilogue(bz, gm, gn, cst, r, c, it)
                    else:
                        for e in VS:
                            if gn + e < N:
                                if PAIR:
                                    out[out_index(bz, gm, gn + e)] = epilogue(bz, gm, gn + e, cst[r, c + e],
                                                                              cst[r, c + PAIR + e])
                                else:
                                    out[out_index(bz, gm, gn + e)] = epilogue(bz, gm, gn + e, cst[r, c + e])
            if DSMEM:
                cluster_sync()  # no block exits while another may read its shared memory

    kernel = module.functions[-1]
    kernel.params[:0] = ins + [out]
    kernel.params += [SymbolVar(name) for name in spec.task.symbols()] + MAPS
    return module


def _at_m(spec: GemmSpec, m: int) -> GemmSpec:
    """The spec with a symbolic m taken at ``m`` (what a config is checked at)."""
    from dataclasses import replace

    return replace(spec, m=m)
