"""Attention on tensor cores (sm_80+, fp16 / bf16), flash-attention style, in Hidet Script.

A block owns ``rows`` query rows of one (flattened) batch entry, a warp 16 of them, and walks the keys in
tiles of ``keys``:

- global → shared: 16-byte cp.async copies, zero-filled past the sequence ends. q's tile once; k's and v's
  tiles double-buffered (the next tile's copies are in flight while the warps compute on this one). Shared
  rows are padded by 16 bytes, so ldmatrix reads 8 rows from 8 bank groups.
- scores: a warp's 16 x keys tile of q kᵀ with ``mma.sync m16n8k16`` (q's fragments loaded once with ldmatrix;
  k's rows are the B operand's columns, ldmatrix without ``.trans``), fp32 accumulators.
- the online softmax on the accumulators in registers: scale, mask (additive or boolean, read at each score's
  (batch, row, key)), causal and sequence-end tests, the row maximum across the four lanes holding a row
  (two shuffles), ``exp2`` with log2(e) folded into the scale, the running maximum's correction applied to
  the output accumulators. Scores never reach shared memory.
- p v: the probabilities, rounded to the input dtype, are already laid out as mma A fragments (the C fragments
  of two neighbouring n8 tiles are one k16 A fragment); v's tile is the B operand through ``ldmatrix.trans``.
- the output: divided by the row sums (reduced across the four lanes once, at the end), two elements per
  store, rows past the end left alone.

Causal attention (key j visible from query i when j <= i) stops at the block's last row; key 0 is always
visible, so a processed row always has a finite maximum.
"""
from __future__ import annotations

from hidet.ir.dtypes import float32
from hidet.ir.expr import SymbolVar, cast, select

MAX_HEAD = 128  # head sizes (of q·k and of v) the kernel takes: multiples of 16 up to this
MMA_DTYPES = ('float16', 'bfloat16')
LOWEST = -3.4028234663852886e38
LOG2E = 1.4426950408889634
PAD = 8  # elements of padding per shared row (16 bytes)
MAX_SMEM = 163 * 1024  # dynamic shared memory a block may opt into on sm_80 (sm_90: 227 KiB)


def unsupported(shape) -> str:
    """Why the tensor-core kernel cannot run ``shape`` (an AttentionShape); '' when it can."""
    dtypes = {t.dtype.name for t in shape.task.inputs[:3]}
    if len(dtypes) != 1 or next(iter(dtypes)) not in MMA_DTYPES:
        return f'q, k, v are {sorted(dtypes)}, not all float16 or all bfloat16'
    for what, n in (('head size', shape.d), ('value head size', shape.dv)):
        if n % 16 or n > MAX_HEAD:
            return f'{what} {n} is not a multiple of 16 up to {MAX_HEAD}'
    if not shape.aligned(8):
        return 'a row of q, k, v or the output does not start at a multiple of 8 elements (16-byte copies)'
    return ''


def smem_bytes(shape, rows: int, keys: int) -> int:
    return (rows * (shape.d + PAD) + 2 * keys * (shape.d + PAD) + 2 * keys * (shape.dv + PAD)) * 2


FULL = 0xFFFFFFFF  # every lane of a warp (shuffles)


def block_order(shape, rows: int):
    """The grid of a kernel of ``rows`` query rows a block, and (as functions called in its script) the block's
    flat batch entry and first query row. Causal attention's blocks take the query tiles from the last (the most
    keys) to the first, every batch entry's longest tile before any shorter one: the blocks that run last are
    short, not a whole row of keys (FlashAttention's order; with equal work per block, the order of a batch
    entry's tiles together)."""
    from hidet.lang.cuda import blockIdx  # (Hidet Script loads when a kernel is built)

    tiles = (shape.sq + (rows - 1)) // rows
    if shape.causal:
        return (shape.batch, tiles), lambda: blockIdx.x, lambda: (tiles - 1 - blockIdx.y) * rows
    return (tiles, shape.batch), lambda: blockIdx.y, lambda: blockIdx.x * rows


def online_softmax(shape, keys: int):
    """The online softmax of a warp's 16 query rows, as Hidet Script macros that both kernels take (this module's
    and wgmma.py's: their scores lie alike, as m16n8 accumulators, the lane's rows row0 and row0 + 8):

        start(oacc, top, total)                                  zero output accumulators, maxima at -inf
        load_mask(mvals, b, j0, row0, t4)                        (a mask) the lane's mask elements of a tile
        step(sacc, oacc, top, total, mvals, b, j0, first_row, row0, t4) one tile of ``keys`` keys
        finish(oacc, total, b, row0, t4)                         the lane's outputs divided by the row sums

    ``load_mask`` reads the tile's mask elements into registers (``mvals``, mask_registers' shape and dtype), so a
    kernel issues those loads before it waits for the scores and ``step`` applies them from registers.

    ``step`` scales and masks the scores (sacc), takes the new row maxima (top, log2 units; the four lanes of a
    row through two shuffles), puts the probabilities in place of the scores and corrects the running sums
    (total) and the output accumulators (oacc). A tile whose keys all exist and (causal) all precede the warp's
    first row (first_row) needs no tests: the softmax is written twice, without them (tested = 0) and with them
    (1), and the warp runs one of the two. ``finish`` sums the row sums across the four lanes of a row and
    stores the rows that exist."""
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    from hidet.lang import f32, i64, macro, register_tensor
    from hidet.lang.cuda import load_pair, shfl_xor_sync, store_pair
    from hidet.lang.math import exp2, max as fmax

    SQ, SK, KEYS, CAUSAL = shape.sq, shape.sk, keys, shape.causal
    out, O_RS = shape.out, shape.row_stride(3)
    MASKED = shape.mask_kind != 'none'
    PAIRS = shape.mask_pairs
    SCALE2 = float(shape.scale) * LOG2E
    HALVES, PAIR, FOUR = [0, 1], [0, 1], [0, 1, 2, 3]
    NTS, ONS = list(range(keys // 8)), list(range(shape.dv // 8))

    # Unmasked with a positive scale, the scale folds into exp2's argument (one FFMA a score): the row maximum of
    # the products is the maximum of the raw scores, scaled
    FOLD = not MASKED and SCALE2 > 0
    # A row's maximum and sum over the lane's scores as four independent chains (score x in chain x % 4), combined
    # at the end: one chain was 16-32 dependent instructions in a row, the latency every warp waited on between its
    # two products
    CHAINS = [0, 1, 2, 3]

    def score2(acc, m):
        """The score in log2 units, after the mask's element ``m`` (the causal and sequence-end tests are the
        caller's); FOLD: the raw score (logit2 scales it)."""
        if FOLD:
            return acc
        if not MASKED:
            return acc * SCALE2
        return shape.apply_mask(acc * float(shape.scale), m) * LOG2E

    def logit2(s):
        """exp2's argument from what score2 stored, before the maximum is taken off."""
        return s * SCALE2 if FOLD else s

    @macro
    def start(oacc, top, total):
        for n in ONS:
            for e in FOUR:
                oacc[n, e] = 0.0
        for h in HALVES:
            top[h] = LOWEST
            total[h] = 0.0

    @macro
    def load_mask(mvals, b, j0, row0, t4):
        for h in HALVES:
            row = row0 + h * 8
            rc = row if row < SQ else SQ - 1  # (rows and keys past the ends read the mask in bounds)
            for n in NTS:
                if PAIRS:  # (the lane's two neighbouring keys in one load)
                    j = j0 + n * 8 + t4 * 2
                    load_pair(~mvals[n, h * 2], shape.mask_value(b, rc, j if j < SK else SK - 2))
                else:
                    for c in PAIR:
                        j = j0 + n * 8 + t4 * 2 + c
                        mvals[n, h * 2 + c] = shape.mask_value(b, rc, j if j < SK else SK - 1)

    @macro
    def step(sacc, oacc, top, total, mvals, b, j0, first_row, row0, t4):
        edge = 0 if j0 + KEYS <= SK else 1
        if CAUSAL:
            edge = 0 if j0 + KEYS <= SK and j0 + KEYS - 1 <= first_row else 1
        for tested in PAIR:
            if edge == tested:
                for h in HALVES:
                    row = row0 + h * 8
                    tops = register_tensor(f32, [4])
                    for x in CHAINS:
                        tops[x] = LOWEST
                    for n in NTS:
                        for c in PAIR:
                            j = j0 + n * 8 + t4 * 2 + c
                            s = score2(sacc[n, h * 2 + c], mvals[n, h * 2 + c])
                            if tested == 1:
                                ok = j < SK
                                if CAUSAL:
                                    ok = ok and j <= row
                                s = select(ok, s, LOWEST)
                            sacc[n, h * 2 + c] = s
                            tops[(n * 2 + c) % 4] = fmax(tops[(n * 2 + c) % 4], s)
                    tile_top = logit2(fmax(fmax(tops[0], tops[1]), fmax(tops[2], tops[3])))
                    tile_top = fmax(tile_top, shfl_xor_sync(FULL, tile_top, 1))
                    tile_top = fmax(tile_top, shfl_xor_sync(FULL, tile_top, 2))
                    new_top = fmax(top[h], tile_top)
                    correction = exp2(top[h] - new_top)
                    top[h] = new_top
                    parts = register_tensor(f32, [4])
                    for x in CHAINS:
                        parts[x] = 0.0
                    for n in NTS:
                        for c in PAIR:
                            p = exp2(logit2(sacc[n, h * 2 + c]) - new_top)
                            if tested == 1:
                                j = j0 + n * 8 + t4 * 2 + c
                                ok = j < SK
                                if CAUSAL:
                                    ok = ok and j <= row0 + h * 8
                                p = select(ok, p, 0.0)
                            sacc[n, h * 2 + c] = p
                            parts[(n * 2 + c) % 4] += p
                    total[h] = total[h] * correction + ((parts[0] + parts[1]) + (parts[2] + parts[3]))
                    for n in ONS:
                        for c in PAIR:
                            oacc[n, h * 2 + c] = oacc[n, h * 2 + c] * correction

    @macro
    def finish(oacc, total, b, row0, t4):
        o_base = i64(shape.base(3, b))
        for h in HALVES:
            s = total[h]
            s += shfl_xor_sync(FULL, s, 1)
            s += shfl_xor_sync(FULL, s, 2)
            row = row0 + h * 8
            inv = 1.0 / s
            if row < SQ:
                for n in ONS:  # (the lane's two neighbouring columns in one store)
                    store_pair(~out[o_base + i64(row) * O_RS + n * 8 + t4 * 2], oacc[n, h * 2] * inv,
                               oacc[n, h * 2 + 1] * inv)

    return start, load_mask, step, finish


def mask_registers(shape, keys: int):
    """(dtype, shape) of a lane's mask elements of a tile (online_softmax's load_mask; a float32 placeholder
    without a mask)."""
    dtype = shape.task.inputs[3].dtype if shape.mask_kind != 'none' else float32
    return dtype, [keys // 8, 4]


def build_module(shape, cfg, name: str):
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    import hidet
    from hidet.lang import attr, f32, i64, register_tensor, view
    from hidet.lang.cuda import (cp_async, cp_async_commit_group, cp_async_wait_group,
                                 dynamic_shared_memory, ldmatrix, mma_sync, syncthreads, threadIdx)

    why = unsupported(shape)
    if why:
        raise ValueError(f'attention mma kernel for {shape.text()}: {why}')
    q, k, v = shape.ins[:3]
    out = shape.out
    dt = shape.in_dtype
    SQ, SK, D, DV = shape.sq, shape.sk, shape.d, shape.dv
    ROWS, KEYS = cfg.rows, cfg.keys
    WARPS = ROWS // 16
    THREADS = WARPS * 32
    QS, KS, VS = D + PAD, D + PAD, DV + PAD  # shared row strides
    Q_ELEMS, K_ELEMS = ROWS * QS, KEYS * KS
    SMEM = smem_bytes(shape, ROWS, KEYS)
    NT = KEYS // 8  # n8 tiles of a warp's scores
    DK = D // 16  # k16 steps of q kᵀ
    PK = KEYS // 16  # k16 steps of p v
    ON = DV // 8  # n8 tiles of the output
    Q_CH, K_CH, V_CH = D // 8, D // 8, DV // 8  # 16-byte chunks per row
    Q_RS, K_RS, V_RS = (shape.row_stride(w) for w in range(3))  # elements between rows
    CAUSAL = shape.causal
    # loops over register arrays are Python lists, unrolled in the generated code (registers, not local memory)
    FOUR = [0, 1, 2, 3]
    NTS, DKS, PKS = (list(range(x)) for x in (NT, DK, PK))
    NT2S, ON2S = list(range(NT // 2)), list(range(ON // 2))

    softmax_start, load_mask, softmax, softmax_finish = online_softmax(shape, KEYS)
    MASK_DT, MASK_SHAPE = mask_registers(shape, KEYS)
    MASKED = shape.mask_kind != 'none'
    GRID, block_entry, block_first_row = block_order(shape, ROWS)

    with hidet.script_module() as module:
        @hidet.script
        def attention_mma():
            attr.func_name = name
            attr.cuda_grid_dim = GRID
            attr.cuda_block_dim = THREADS
            attr.cuda_dynamic_smem_bytes = SMEM
            qs = view(dynamic_shared_memory(0, dt), dt[ROWS, QS])
            ks = view(dynamic_shared_memory(Q_ELEMS * 2, dt), dt[2, KEYS, KS])
            vs = view(dynamic_shared_memory((Q_ELEMS + 2 * K_ELEMS) * 2, dt), dt[2, KEYS, VS])
            tid = threadIdx.x
            lane = tid % 32
            warp = tid / 32
            g = lane / 4  # the lane's group and index in it (mma fragment layouts)
            t4 = lane % 4
            b = block_entry()
            q0 = block_first_row()
            q_base = i64(shape.base(0, b))
            k_base = i64(shape.base(1, b))
            v_base = i64(shape.base(2, b))
            kv_end = SK
            if CAUSAL:
                kv_end = min(SK, q0 + ROWS)
            tiles = (kv_end + (KEYS - 1)) / KEYS

            for x in range(tid, ROWS * Q_CH, THREADS):
                r = x / Q_CH
                ok = q0 + r < SQ
                cp_async(~qs[r, x % Q_CH * 8], q + (q_base + i64(q0 + r if ok else 0) * Q_RS + x % Q_CH * 8), 16,
                         16 if ok else 0)
            cp_async_commit_group()
            for x in range(tid, KEYS * K_CH, THREADS):
                r = x / K_CH
                ok = r < SK
                cp_async(~ks[0, r, x % K_CH * 8], k + (k_base + i64(r if ok else 0) * K_RS + x % K_CH * 8), 16,
                         16 if ok else 0)
            for x in range(tid, KEYS * V_CH, THREADS):
                r = x / V_CH
                ok = r < SK
                cp_async(~vs[0, r, x % V_CH * 8], v + (v_base + i64(r if ok else 0) * V_RS + x % V_CH * 8), 16,
                         16 if ok else 0)
            cp_async_commit_group()

            qf = register_tensor(dt, [DK, 8])
            kf = register_tensor(dt, [8])
            vf = register_tensor(dt, [8])
            pf = register_tensor(dt, [PK, 8])
            sacc = register_tensor(f32, [NT, 4])
            mvals = register_tensor(MASK_DT, MASK_SHAPE)
            oacc = register_tensor(f32, [ON, 4])
            top = register_tensor(f32, [2])  # running maximum (log2 units) of the lane's two rows
            total = register_tensor(f32, [2])  # the lane's share of the running row sums
            softmax_start(oacc, top, total)
            row0 = q0 + warp * 16 + g  # the lane's rows: row0 and row0 + 8

            for tile in range(tiles):
                buf = tile % 2
                j0 = tile * KEYS
                if tile + 1 < tiles:  # the next tile's copies, into the other buffer
                    for x in range(tid, KEYS * K_CH, THREADS):
                        r = x / K_CH
                        ok = j0 + KEYS + r < SK
                        cp_async(~ks[1 - buf, r, x % K_CH * 8],
                                 k + (k_base + i64(j0 + KEYS + r if ok else 0) * K_RS + x % K_CH * 8), 16,
                                 16 if ok else 0)
                    for x in range(tid, KEYS * V_CH, THREADS):
                        r = x / V_CH
                        ok = j0 + KEYS + r < SK
                        cp_async(~vs[1 - buf, r, x % V_CH * 8],
                                 v + (v_base + i64(j0 + KEYS + r if ok else 0) * V_RS + x % V_CH * 8), 16,
                                 16 if ok else 0)
                cp_async_commit_group()
                if MASKED:  # (the tile's mask elements in flight while the copies land and the scores run)
                    load_mask(mvals, b, j0, row0, t4)
                cp_async_wait_group(1)  # everything but the copies just issued has landed
                syncthreads()
                if tile == 0:
                    for kk in DKS:
                        ldmatrix(~qf[kk, 0], ~qs[warp * 16 + lane % 16, kk * 16 + lane / 16 * 8], 4)

                # scores of the warp's 16 rows against the tile's keys
                for n in NTS:
                    for e in FOUR:
                        sacc[n, e] = 0.0
                for kk in DKS:
                    for nj in NT2S:
                        ldmatrix(~kf[0], ~ks[buf, nj * 16 + lane / 16 * 8 + lane % 8, kk * 16 + lane / 8 % 2 * 8], 4)
                        mma_sync(~qf[kk, 0], ~kf[0], ~sacc[2 * nj, 0])
                        mma_sync(~qf[kk, 0], ~kf[4], ~sacc[2 * nj + 1, 0])

                # online softmax (mma.online_softmax): probabilities in place of the scores
                softmax(sacc, oacc, top, total, mvals, b, j0, q0 + warp * 16, row0, t4)

                # p v: the probabilities as A fragments (two n8 score tiles make one k16 step)
                for kk in PKS:
                    for e in FOUR:
                        pf[kk, e] = cast(sacc[2 * kk, e], dt)
                        pf[kk, 4 + e] = cast(sacc[2 * kk + 1, e], dt)
                for kk in PKS:
                    for nj in ON2S:
                        ldmatrix(~vf[0], ~vs[buf, kk * 16 + lane % 16, nj * 16 + lane / 16 * 8], 4, True)
                        mma_sync(~pf[kk, 0], ~vf[0], ~oacc[2 * nj, 0])
                        mma_sync(~pf[kk, 0], ~vf[4], ~oacc[2 * nj + 1, 0])
                syncthreads()  # every warp is done with this buffer before the next tile's copies overwrite it

            softmax_finish(oacc, total, b, row0, t4)

    kernel = module.functions[-1]
    kernel.params[:0] = shape.ins + [out]
    kernel.params += [SymbolVar(s) for s in shape.task.symbols()]
    return module
