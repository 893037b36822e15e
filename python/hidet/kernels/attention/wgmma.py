"""Attention on sm_90's warpgroup tensor cores (wgmma), fp16 / bf16, head sizes 64 and 128, flash-attention style.

The online softmax, its masks and causal and sequence-end tests are mma.py's; what differs is how the two
products run:

- A block owns ``rows`` query rows (64 a warpgroup: one or two warpgroups) of one flattened batch entry and
  walks the keys in tiles of ``keys`` (64 or 128).
- global → shared: 16-byte cp.async copies of every thread, zero-filled past the sequence ends, into wgmma's
  128-byte swizzle (the 16-byte chunk c of a 128-byte row r at c ^ (r % 8)): q's tile once and k's rows
  K-major (rows of 64 head values, a block of them per 64 of the head size); v's rows N-major (blocks of
  [keys][64 value columns]). k's and v's tiles are double-buffered: the next tile's copies are in flight while
  the warpgroups compute on this one.
- or (``tma`` configs, static sizes) TMA copies from a producer warp of the block's own, into the same layout:
  q's tile once, then k's and v's tiles into a ring of ``stages`` buffers, each with an mbarrier that its
  copies complete ("full") and one its warpgroups arrive at when their wgmmas are done with it ("empty"). The
  warpgroups wait on those barriers alone, not on each other (no block barrier in the loop), and the producer
  runs up to ``stages`` tiles ahead of them.
- scores: ``wgmma m64n{keys}k16`` per 16 of the head size, both operands from shared memory, into fp32
  accumulators laid out as mma.sync's m16n8 tiles (warp w of a warpgroup: rows 16w..16w+15).
- p v: the probabilities, rounded to the input dtype, are the A operand of ``wgmma m64n{dv}k16`` straight from
  registers (two neighbouring n8 score tiles are one k16 A fragment), v's tile the B operand from shared memory.

Each product waits for its wgmmas before the softmax or the next tile reads their accumulators; with TMA, a
tile's p v is not waited for alone: the next tile's scores issue behind it and one wait covers both (its v buffer
released then). Overlapping the softmax of one tile with the scores of the next is not done.
"""
from __future__ import annotations

from hidet.ir.expr import SymbolVar, Var, cast
from hidet.ir.schedulers.lowering import unflatten

from .mma import MMA_DTYPES, block_order, mask_registers, online_softmax

WG_HEADS = (64, 128)  # head sizes (of q·k and of v) the kernel takes
WG_ROWS = (64, 128)  # query rows per block: one or two warpgroups
WG_KEYS = (64, 128)  # keys per tile: the n of the scores' wgmma
ALIGN = 1024  # the 128-byte swizzle's period: tiles start at multiples of it
MAX_SMEM = 227 * 1024


def unsupported(shape) -> str:
    """Why the wgmma kernel cannot run ``shape`` (an AttentionShape); '' when it can."""
    dtypes = {t.dtype.name for t in shape.task.inputs[:3]}
    if len(dtypes) != 1 or next(iter(dtypes)) not in MMA_DTYPES:
        return f'q, k, v are {sorted(dtypes)}, not all float16 or all bfloat16'
    for what, n in (('head size', shape.d), ('value head size', shape.dv)):
        if n not in WG_HEADS:
            return f'{what} {n} is not one of {WG_HEADS}'
    if not shape.aligned(8):
        return 'a row of q, k, v or the output does not start at a multiple of 8 elements (16-byte copies)'
    return ''


def smem_bytes(shape, rows: int, keys: int) -> int:
    return (rows * shape.d + 2 * keys * shape.d + 2 * keys * shape.dv) * 2 + ALIGN - 16


def swizzled(rows: int):
    """``at(r, c)``: the element offset of column c (a multiple of 8) of row r in a tile of ``rows`` rows stored
    as blocks of [rows][64 columns] with the 128-byte swizzle (K-major q and k: columns are the head; N-major
    v: rows are keys, columns the value's)."""
    return lambda r, c: c // 64 * (rows * 64) + r * 64 + ((c % 64 // 8) ^ (r % 8)) * 8


TMA_MAX_STAGES = 4
TMA_SMEM_TARGET = 110 * 1024  # (stages while two blocks fit an SM)


def tma_stages(shape, rows: int, keys: int) -> int:
    """k and v buffers of a TMA config: as many as keep two blocks on an SM (2 to TMA_MAX_STAGES)."""
    stage = keys * (shape.d + shape.dv) * 2
    fixed = rows * shape.d * 2 + ALIGN
    return max(2, min(TMA_MAX_STAGES, (TMA_SMEM_TARGET - fixed) // stage))


def tma_smem_bytes(shape, rows: int, keys: int) -> int:
    return (rows * shape.d + tma_stages(shape, rows, keys) * keys * (shape.d + shape.dv)) * 2 + ALIGN - 16


def tma_layout(shape, which: int):
    """How TMA copies q, k or v (which = 0, 1, 2): (dims, byte strides, element offset, coords) of a 2- or 3-D
    tensor map (dims innermost first: the row's columns, the rows, one batch dimension), where ``coords(b, col,
    row)`` are the map coordinates of column ``col`` of row ``row`` of flat batch entry ``b``; None where no such
    map exists. Batch dimensions of size 1 or stride 0 (broadcast) take no part; two left merge when one steps
    over the other (stride of the outer = stride x size of the inner), or join the columns when the inner one's
    entries lie side by side in a row (heads read in place from a QKV projection: [b, s, 3, h, d] as k of
    [b, h, s, d] has head stride d)."""
    (logical, offset, strides) = shape.layouts[which]
    cols, rows = logical[-1], logical[-2]
    batch = [(i, n, st) for i, (n, st) in enumerate(zip(logical[:-2], strides[:-2])) if n != 1 and st != 0]
    if not all(isinstance(x, int) for x in list(logical) + list(strides) + [offset]):
        return None
    nbytes = shape.in_dtype.nbytes

    def coord(b, i):
        return unflatten(b, shape.batch_shape)[i]

    if not batch:
        return [cols, rows], [strides[-2] * nbytes], offset, lambda b, c, r: [c, r]
    if len(batch) == 1:
        (i, n, st), = batch
        return [cols, rows, n], [strides[-2] * nbytes, st * nbytes], offset, lambda b, c, r: [c, r, coord(b, i)]
    if len(batch) == 2:
        (i, n, st), (j, m, sj) = batch
        if st == sj * m:  # the two dims as one
            return ([cols, rows, n * m], [strides[-2] * nbytes, sj * nbytes], offset,
                    lambda b, c, r: [c, r, coord(b, i) * m + coord(b, j)])
        if sj == cols:  # the inner dim's entries side by side in a row: columns j * cols + c
            return ([m * cols, rows, n], [strides[-2] * nbytes, st * nbytes], offset,
                    lambda b, c, r: [coord(b, j) * cols + c, r, coord(b, i)])
    return None


def tma_unsupported(shape) -> str:
    """Why the TMA configs cannot run ``shape`` ('' when they can)."""
    if shape.task.symbols():
        return 'TMA configs need static sizes'
    for which, what in enumerate('qkv'):
        layout = tma_layout(shape, which)
        if layout is None:
            return f'{what}\'s batch dimensions are not one TMA dimension (strided views of more than two)'
        if any(st % 16 for st in layout[1]) or layout[2] * shape.in_dtype.nbytes % 16:
            return f'{what}\'s rows do not start at multiples of 16 bytes'
    return ''


def build_module(shape, cfg, name: str):
    # (Hidet Script and the code generator load when a kernel is built: import hidet, which reads the
    # templates through the fusion policy, stays light)
    import hidet
    from hidet.lang import attr, f32, i64, register_tensor, view
    from hidet.lang.cuda import (cp_async, cp_async_commit_group, cp_async_wait_group,
                                 dynamic_shared_memory, fence_mbarrier_init, fence_proxy_async, mbarrier_arrive,
                                 mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait, shared_tensor,
                                 syncthreads, tensor_map, threadIdx, tma_load, wgmma, wgmma_commit_group,
                                 wgmma_fence, wgmma_rs, wgmma_wait_group)

    why = unsupported(shape)
    if why:
        raise ValueError(f'attention wgmma kernel for {shape.text()}: {why}')
    q, k, v = shape.ins[:3]
    out = shape.out
    dt = shape.in_dtype
    SQ, SK, D, DV = shape.sq, shape.sk, shape.d, shape.dv
    ROWS, KEYS = cfg.rows, cfg.keys
    THREADS = ROWS * 2  # a warpgroup (128 threads) per 64 rows
    WGS = ROWS // 64
    TMA = cfg.tma
    if TMA and tma_unsupported(shape):
        raise ValueError(f'attention wgmma kernel for {shape.text()}: {tma_unsupported(shape)}')
    BLOCK = THREADS + 32 if TMA else THREADS  # (TMA: the producer warp after the warpgroups)
    S = tma_stages(shape, ROWS, KEYS) if TMA else 2  # k and v buffers
    Q_ELEMS, K_ELEMS, V_ELEMS = ROWS * D, KEYS * D, KEYS * DV
    SMEM = tma_smem_bytes(shape, ROWS, KEYS) if TMA else smem_bytes(shape, ROWS, KEYS)
    NT = KEYS // 8  # n8 tiles of a warp's scores
    DK = D // 16  # k16 steps of q kᵀ
    PK = KEYS // 16  # k16 steps of p v
    ON = DV // 8  # n8 tiles of the output
    Q_CH, K_CH, V_CH = D // 8, D // 8, DV // 8  # 16-byte chunks per row
    Q_RS, K_RS, V_RS = (shape.row_stride(w) for w in range(3))  # elements between rows
    q_at, k_at, v_at = swizzled(ROWS), swizzled(KEYS), swizzled(KEYS)
    V_LBO = KEYS * 64 * 2  # bytes between v's 64-column blocks (wgmma's leading byte offset, N-major)
    CAUSAL = shape.causal
    FOUR = [0, 1, 2, 3]
    DKS, PKS = list(range(DK)), list(range(PK))

    softmax_start, load_mask, softmax, softmax_finish = online_softmax(shape, KEYS)
    MASK_DT, MASK_SHAPE = mask_registers(shape, KEYS)
    MASKED = shape.mask_kind != 'none'
    MAPS, LAYOUTS = [], []
    if TMA:  # (boxes of [rows][64 columns]: q's of the block's rows, k's and v's of a tile's keys)
        for which, (tensor, box_rows) in enumerate(((q, ROWS), (k, KEYS), (v, KEYS))):
            dims, strides, offset, coords = tma_layout(shape, which)
            box = [64, box_rows] + [1] * (len(dims) - 2)
            MAPS.append(Var(f'tmap_{"qkv"[which]}', dt, type=tensor_map(tensor, dims, strides, box, offset)))
            LAYOUTS.append(coords)
        Q_MAP, K_MAP, V_MAP = MAPS
        Q_COORDS, K_COORDS, V_COORDS = LAYOUTS
    Q_BOXES, K_BOXES, V_BOXES = list(range(D // 64)), list(range(D // 64)), list(range(DV // 64))
    STAGES = list(range(S))

    def copy_box(tmap, coords, dst, bar, b, col, row):
        """The TMA copy of the box of ``tmap`` at column ``col`` of row ``row`` of flat batch entry ``b``."""
        return tma_load(dst, tmap, bar, *coords(b, col, row))
    GRID, block_entry, block_first_row = block_order(shape, ROWS)

    with hidet.script_module() as module:
        @hidet.script
        def attention_wgmma():
            attr.func_name = name
            attr.cuda_grid_dim = GRID
            attr.cuda_block_dim = BLOCK
            attr.cuda_dynamic_smem_bytes = SMEM
            qs = view(dynamic_shared_memory(0, dt, ALIGN), dt[Q_ELEMS])
            ks = view(dynamic_shared_memory(Q_ELEMS * 2, dt, ALIGN), dt[S, K_ELEMS])
            vs = view(dynamic_shared_memory((Q_ELEMS + S * K_ELEMS) * 2, dt, ALIGN), dt[S, V_ELEMS])
            q_full = shared_tensor(i64, [1])  # (TMA) q's tile has landed
            k_full = shared_tensor(i64, [S])  # (TMA) k's tile of a buffer has landed
            v_full = shared_tensor(i64, [S])
            k_empty = shared_tensor(i64, [S])  # (TMA) every warpgroup is done with a buffer's k tile
            v_empty = shared_tensor(i64, [S])
            tid = threadIdx.x
            lane = tid % 32
            warp = tid / 32
            wg = warp / 4  # the warpgroup: rows 64 wg .. of the block
            g = lane / 4  # the lane's group and index in it (the accumulators' m16n8 layout)
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

            if TMA:
                if tid == 0:
                    mbarrier_init(~q_full[0], 1)
                    for st in STAGES:
                        mbarrier_init(~k_full[st], 1)
                        mbarrier_init(~v_full[st], 1)
                        mbarrier_init(~k_empty[st], WGS)
                        mbarrier_init(~v_empty[st], WGS)
                    fence_mbarrier_init()
                syncthreads()
                if tid >= THREADS:  # the producer warp: one lane issues every copy, up to S tiles ahead
                    if tid == THREADS:
                        mbarrier_arrive_expect_tx(~q_full[0], Q_ELEMS * 2)
                        for c in Q_BOXES:
                            copy_box(Q_MAP, Q_COORDS, ~qs[c * ROWS * 64], ~q_full[0], b, c * 64, q0)
                        for tile in range(tiles):
                            st = tile % S
                            j0 = tile * KEYS
                            if tile >= S:
                                mbarrier_wait(~k_empty[st], (tile / S + 1) % 2)  # (released by tile - S)
                            mbarrier_arrive_expect_tx(~k_full[st], K_ELEMS * 2)
                            for c in K_BOXES:
                                copy_box(K_MAP, K_COORDS, ~ks[st, c * KEYS * 64], ~k_full[st], b, c * 64, j0)
                            if tile >= S:
                                mbarrier_wait(~v_empty[st], (tile / S + 1) % 2)
                            mbarrier_arrive_expect_tx(~v_full[st], V_ELEMS * 2)
                            for c in V_BOXES:
                                copy_box(V_MAP, V_COORDS, ~vs[st, c * KEYS * 64], ~v_full[st], b, c * 64, j0)
                    return
                mbarrier_wait(~q_full[0], 0)
            else:
                for x in range(tid, ROWS * Q_CH, THREADS):
                    r = x / Q_CH
                    ok = q0 + r < SQ
                    cp_async(~qs[q_at(r, x % Q_CH * 8)],
                             q + (q_base + i64(q0 + r if ok else 0) * Q_RS + x % Q_CH * 8), 16, 16 if ok else 0)
                cp_async_commit_group()
                for x in range(tid, KEYS * K_CH, THREADS):
                    r = x / K_CH
                    ok = r < SK
                    cp_async(~ks[0, k_at(r, x % K_CH * 8)],
                             k + (k_base + i64(r if ok else 0) * K_RS + x % K_CH * 8), 16, 16 if ok else 0)
                for x in range(tid, KEYS * V_CH, THREADS):
                    r = x / V_CH
                    ok = r < SK
                    cp_async(~vs[0, v_at(r, x % V_CH * 8)],
                             v + (v_base + i64(r if ok else 0) * V_RS + x % V_CH * 8), 16, 16 if ok else 0)
                cp_async_commit_group()

            pf = register_tensor(dt, [PK, 8])
            sacc = register_tensor(f32, [NT, 4])
            mvals = register_tensor(MASK_DT, MASK_SHAPE)
            oacc = register_tensor(f32, [ON, 4])
            top = register_tensor(f32, [2])  # running maximum (log2 units) of the lane's two rows
            total = register_tensor(f32, [2])  # the lane's share of the running row sums
            softmax_start(oacc, top, total)
            row0 = q0 + warp * 16 + g  # the lane's rows: row0 and row0 + 8

            for tile in range(tiles):
                buf = tile % S
                j0 = tile * KEYS
                if TMA:
                    mbarrier_wait(~k_full[buf], (tile / S) % 2)
                else:
                    if tile + 1 < tiles:  # the next tile's copies, into the other buffer
                        for x in range(tid, KEYS * K_CH, THREADS):
                            r = x / K_CH
                            ok = j0 + KEYS + r < SK
                            cp_async(~ks[1 - buf, k_at(r, x % K_CH * 8)],
                                     k + (k_base + i64(j0 + KEYS + r if ok else 0) * K_RS + x % K_CH * 8), 16,
                                     16 if ok else 0)
                        for x in range(tid, KEYS * V_CH, THREADS):
                            r = x / V_CH
                            ok = j0 + KEYS + r < SK
                            cp_async(~vs[1 - buf, v_at(r, x % V_CH * 8)],
                                     v + (v_base + i64(j0 + KEYS + r if ok else 0) * V_RS + x % V_CH * 8), 16,
                                     16 if ok else 0)
                    cp_async_commit_group()
                    cp_async_wait_group(1)  # everything but the copies just issued has landed
                    fence_proxy_async()  # (the copies' writes, visible to wgmma's reads once the barrier follows)
                    syncthreads()

                # scores of the warpgroup's 64 rows against the tile's keys: k16 steps of the head, within
                # 64-wide blocks of q's and k's tiles (a step is 16 values, 32 bytes, into a swizzled row)
                wgmma_fence()
                for kk in DKS:
                    wgmma(~sacc[0, 0], ~qs[kk // 4 * (ROWS * 64) + wg * 64 * 64 + kk % 4 * 16],
                          ~ks[buf, kk // 4 * (KEYS * 64) + kk % 4 * 16], KEYS, False, False, 0, 0, kk > 0)
                wgmma_commit_group()
                if MASKED:  # (the tile's mask elements in flight while the tensor cores run the scores)
                    load_mask(mvals, b, j0, row0, t4)
                wgmma_wait_group(0)  # (TMA: the previous tile's p v too, issued last iteration without a wait)
                if TMA:
                    if tid % 128 == 0:  # (the warpgroup's wgmmas are done reading the buffer's k tile, and the
                        mbarrier_arrive(~k_empty[buf])  # previous buffer's v tile)
                        if tile > 0:
                            mbarrier_arrive(~v_empty[(tile + S - 1) % S])

                # online softmax (mma.online_softmax): probabilities in place of the scores
                softmax(sacc, oacc, top, total, mvals, b, j0, q0 + warp * 16, row0, t4)

                # p v: the probabilities as A fragments from registers (two n8 score tiles make one k16 step);
                # v's tile N-major, a k16 step 16 of its rows
                for kk in PKS:
                    for e in FOUR:
                        pf[kk, e] = cast(sacc[2 * kk, e], dt)
                        pf[kk, 4 + e] = cast(sacc[2 * kk + 1, e], dt)
                if TMA:
                    mbarrier_wait(~v_full[buf], (tile / S) % 2)
                wgmma_fence()
                for kk in PKS:
                    wgmma_rs(~oacc[0, 0], ~pf[kk, 0], ~vs[buf, kk * 16 * 64], DV, True, V_LBO)
                wgmma_commit_group()
                if not TMA:  # (TMA: the next tile's scores issue behind this product; their wait is its wait)
                    wgmma_wait_group(0)
                    syncthreads()  # every warpgroup is done with this buffer before the next tile's copies refill it

            if TMA:
                wgmma_wait_group(0)
            softmax_finish(oacc, total, b, row0, t4)

    kernel = module.functions[-1]
    kernel.params[:0] = shape.ins + [out]
    kernel.params += [SymbolVar(s) for s in shape.task.symbols()] + MAPS
    return module
