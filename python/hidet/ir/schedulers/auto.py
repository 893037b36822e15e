"""The auto-scheduler: any injective or reduction Task → an IRModule for the CPU or CUDA.

Each output becomes one kernel (on CUDA, several injective outputs of one shape: one kernel for all,
batch_output_copies.py). Reads of intermediate (computed) tensors are inlined, so the kernel
reads only the task's inputs, at flat row-major indices. A reduction is computed once per output element
where it appears several times, and a reduction nested in another one that does not depend on the outer
one's axes (the mean inside var's sum of squares) is computed once, before the outer loop, by the same
threads (lowering.py).

- CPU: an OpenMP-parallel loop over the outer dimensions (and chunks of the innermost one) around a
  contiguous loop over the innermost dimension, ``#pragma omp simd`` for injective kernels, so that the
  compiler vectorizes it (indices are linear in the inner loop variable: no divisions); reductions run
  serially per output element.
- CUDA, injective: a grid-stride loop. When every read allows it, each thread computes 16 bytes of the
  output (8 halves, 4 floats) with 16-byte loads and stores (vectorize.py); else one element per thread.
- CUDA, symbolic extents (``hidet.symbol(['batch', ...])``): the same grid-stride loops with the grid
  computed from the dims at launch; injective kernels vectorized where the innermost extent is static,
  reductions a block per output element.
- CUDA, small reductions (at most SMALL_REDUCE elements — a pooling or depthwise 3x3 window — over
  enough outputs to fill the GPU): one thread per output element, reducing alone; where the window's reads
  are contiguous along the output's innermost dimension (channels-last pooling, depthwise convolutions), one
  thread per 16 bytes of outputs with a vector load per window position (vectorize.py), in narrower vectors
  where the outputs are few, so that SMALL_REDUCE_MIN_OUTPUTS threads still run.
- Row-broadcast outputs (normalizations, softmax: reductions over a row read by each element of the row,
  lowering.row_split): a block (CPU: a thread) per row computes the row's reductions once, then writes the
  row's elements. On CUDA, where the row's extents are static and every reduction is over the row, a warp
  per row (a block for long rows) holds the row in registers: read once by 16-byte loads, written by 16-byte
  stores (rows.py).
- CUDA, other reductions, chosen by the reduced axes' position:
  - row style (the input's innermost dimension is reduced): one block per output element (≥ 128
    reduced elements) or one warp (fewer); the threads stride over the reduced elements, then combine
    through warp shuffles (and shared memory across warps; hidet/kernel/cuda.h);
  - column style (the output's innermost dimension is the input's innermost one, so consecutive outputs
    are consecutive in memory): consecutive threads reduce consecutive outputs, so every load of a warp
    is coalesced; when outputs are too few to fill the GPU, the ``rows`` threads of each block column
    split the reduced elements and combine through shared memory.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.dtypes import boolean, int64
from hidet.ir.expr import Expr, TensorElement, Var, binary, call, convert, is_static, logical_and, minimum
from hidet.ir.functors import collect, inline_computes, substitute
from hidet.ir.schedulers.analysis import depends_on, linear
from hidet.ir.schedulers.lowering import (CUDA_BLOCK, CUDA_MAX_GRID, Lowering, flat_index, grid_size, pow2_ceil, prod,
                                          row_split, top_reduces, unflatten)
from hidet.ir.schedulers.rows import RowLoop, conditional, reduces_over_row, row_lanes, row_threads, thread_index
from hidet.ir.schedulers.vectorize import copy_lanes, vector_copies, vectorized_outputs, vectorized_small_reductions
from hidet.ir.stmt import Declare, For, Function, If, IRModule, Seq, Stmt, Store
from hidet.ir.task import Task
from hidet.ir.type import TensorType

BLOCK_REDUCE_MIN_EXTENT = 128
# a thread per output element for reductions of at most this many elements over at least
# SMALL_REDUCE_MIN_OUTPUTS outputs: a warp per output would leave most of its lanes idle
SMALL_REDUCE = 32
SMALL_REDUCE_MIN_OUTPUTS = 32768
CPU_CHUNK = 4096  # innermost elements per iteration of the CPU's parallel loop, at most
CPU_MIN_ITERATIONS = 64  # iterations of the CPU's parallel loop, at least (where there are elements enough)
COLUMN_THREADS = 1 << 18  # threads a column reduction aims at: enough to fill an H100
COLUMN_MIN_PER_THREAD = 4  # reduced elements a thread of a column reduction takes at least (a short reduction of
# few outputs, a global pool's second step, gets threads enough that each waits on few dependent loads)
COLUMN_MIN_BLOCKS = 264  # two blocks per SM of an H100
# A row-broadcast kernel (lowering.row_split) on the H100 (scripts/bench_ops.py --norms): a block per row, its
# threads for about ROW_ELEMENTS_PER_THREAD of the row's elements each (32 to CUDA_BLOCK of them: 128 x 768 layer
# norm 3.27 µs at 256 threads, 3.65 at 128, 3.73 at 64); a warp per row where there are at least WARP_ROWS_MIN
# rows of at most WARP_ROWS_MAX_EXTENT elements (4096 x 768 layer norm 6.9 µs against 11.8 a block per row,
# 1536 x 128 softmax 2.3 against 3.3)
ROW_ELEMENTS_PER_THREAD = 4
WARP_ROWS_MIN, WARP_ROWS_MAX_EXTENT = 1024, 1024
ROW_MIN_BLOCKS = 264  # blocks of a row kernel holding its rows in registers, at least, where rows allow (2 per SM)


def _pow2_floor(x: int) -> int:
    p = 1
    while p * 2 <= x:
        p *= 2
    return p


def _element_value(value: Expr, axes, shape, n: Expr) -> Expr:
    return substitute(value, dict(zip(axes, unflatten(n, shape))))


# ---------------------------------------------------------------- CPU
def _cpu_kernel(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape, lowering: Lowering):
    """``parallel for t: (outer index, chunk) { simd for j in chunk: out[o * W + j] = value }``."""
    injective = not collect(value, ReduceCompute)
    if not shape:  # a 0-d output: one element
        body: List[Stmt] = []
        element = lowering.value(value, body, 'thread')
        return Function(name, params, Seq(body + [Store(out_param, 0, element)]), 'cpu')
    width, outer = shape[-1], prod(shape[:-1])
    if is_static(width) and is_static(outer):
        # enough parallel iterations for the threads: split the innermost dimension when outer ones are few
        least = 16 if injective else 1  # elements per iteration (reductions: each element is a loop already)
        chunks = max(1, min(-(-width // least), max(-(-width // CPU_CHUNK), -(-CPU_MIN_ITERATIONS // max(outer, 1)))))
        chunk = -(-max(width, 1) // chunks)
        chunks = -(-width // chunk)
    else:  # symbolic extents: one parallel iteration per outer index
        chunks = 1
    t, j = Var('t', int64), Var('j', int64)
    pre: List[Stmt] = []
    if chunks <= 1:  # (0: an empty innermost dimension, no iterations)
        o, start, stop = t, convert(0), convert(width)
    else:
        o, start = Var('o', int64), Var('j0', int64)
        pre += [Declare(o, t / chunks), Declare(start, (t % chunks) * chunk)]
        stop = minimum(start + chunk, width)
    mapping: Dict[Var, Expr] = {axes[-1]: j}
    for d, idx in enumerate(unflatten(o, shape[:-1])):
        if not isinstance(idx, Var) and collect(idx, Var):  # computed once per outer iteration
            v = Var(f'i{d}', int64)
            pre.append(Declare(v, idx))
            idx = v
        mapping[axes[d]] = idx
    body = []
    element = lowering.value(substitute(value, mapping), body, 'thread')
    inner = For(j, start, stop, 1, Seq(body + [Store(out_param, o * width + j, element)]),
                kind='simd' if injective else 'serial')
    iterations = outer if chunks == 1 else outer * chunks
    return Function(name, params, For(t, 0, iterations, 1, Seq(pre + [inner]), kind='parallel'), 'cpu')


def _row_values(value: Expr, axes, shape, p: int, row: Var, j: Var):
    """A row-broadcast output's value at row ``row`` (its reductions) and at column ``j`` of that row."""
    at_row = substitute(value, dict(zip(axes[:p], unflatten(row, shape[:p]))))
    return at_row, substitute(at_row, dict(zip(axes[p:], unflatten(j, shape[p:]))))


def _cpu_row_broadcast(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape, lowering: Lowering,
                       p: int) -> Function:
    """``parallel for row { reductions; simd for j in row: out[row * W + j] = value }``: each row's
    reductions once (lowering.row_split)."""
    rows, cols = prod(shape[:p]), prod(shape[p:])
    row, j = Var('row', int64), Var('j', int64)
    at_row, element_value = _row_values(value, axes, shape, p, row, j)
    pre: List[Stmt] = []
    for r in top_reduces(at_row):
        lowering.reduction(r, pre, 'thread')
    body: List[Stmt] = []
    element = lowering.value(element_value, body, 'thread')
    inner = For(j, 0, cols, 1, Seq(body + [Store(out_param, row * cols + j, element)]), kind='simd')
    return Function(name, params, For(row, 0, rows, 1, Seq(pre + [inner]), kind='parallel'), 'cpu')


# ---------------------------------------------------------------- CUDA
def _cuda_row_broadcast(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape, lowering: Lowering,
                        p: int) -> Function:
    """The kernel holding its row in registers (rows.py), with the plain one (_cuda_row_plain) as its fallback
    for unaligned buffers; the plain one alone where the row's extents are symbolic, its reductions reduce other
    extents than the row's, or its reads are conditional."""
    plain = _cuda_row_plain(name, params, out_param, value, axes, shape, lowering, p)
    held = _cuda_row_in_registers(name, params, out_param, value, axes, shape, lowering, p)
    if held is None:
        return plain
    plain.name = f'{name}_plain'
    held.fallback = plain
    return held


def _cuda_row_in_registers(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape, lowering: Lowering,
                           p: int) -> Optional[Function]:
    """A warp per row (a block where a row has more than ROW_VECTORS_PER_THREAD vectors per lane), each of its
    threads holding the same vectors of the row in every loop (rows.RowLoop): the row is read once, by 16-byte
    loads, and written by 16-byte stores. Rows of fewer vectors than a warp's lanes keep the plain kernel (H100,
    `bench_ops.py --norms`: layer norm 128 x 768 2.29 µs held, 2.96 plain, inductor 2.01; 4096 x 768 5.40, 6.51,
    4.63; RMS norm 128 x 2048 2.44, 2.69, 2.23; but 3136 x 96 2.37 held against 2.21 plain, softmax 1536 x 128
    2.67 against 2.14 a warp per row)."""
    rows, cols = prod(shape[:p]), prod(shape[p:])
    if not (is_static(rows) and is_static(cols)) or conditional(value) or not reduces_over_row(value, cols):
        return None
    lanes = row_lanes(cols, out_param.dtype.nbytes)
    if cols // lanes < 32:  # fewer vectors than a warp's lanes: most would idle (the plain warp per row is faster)
        return None
    threads = row_threads(cols // lanes)
    mode = 'warp' if threads == 32 else 'block'
    row = Var('row', int64)
    lowering = Lowering(lowering.params, block_threads=threads)
    loop = lowering.row_loop = RowLoop(row, cols, threads, lanes, thread_index(mode))
    at_row = substitute(value, dict(zip(axes[:p], unflatten(row, shape[:p]))))
    pre: List[Stmt] = []
    for r in top_reduces(at_row):
        lowering.reduction(r, pre, mode)
    out_reg = Var('y_vec', out_param.dtype, type=TensorType(out_param.dtype, [lanes], 'register'))

    def element(j: Expr, lane: Var) -> List[Stmt]:
        body: List[Stmt] = []
        v = lowering.value(substitute(at_row, dict(zip(axes[p:], unflatten(j, shape[p:])))), body, 'thread')
        return body + [Store(out_reg, lane, v)]

    def store(q: Expr) -> List[Stmt]:
        return vector_copies(out_param, row * cols + q * lanes, out_reg, 0, lanes, out_param.dtype)

    write = loop.loop(element, store)
    body = Seq(loop.declares + pre + [Declare(out_reg), write])
    if mode == 'warp':
        warps = _warps_per_block(rows)
        rows_loop = For(row, call('hidet_global_warp_idx', dtype=int64), rows, call('hidet_global_warps', dtype=int64),
                        body)
        f = Function(name, params, rows_loop, 'cuda', grid=(grid_size(rows, warps),), block=(32 * warps,))
    else:
        rows_loop = For(row, call('hidet_block_idx', dtype=int64), rows, call('hidet_grid_dim', dtype=int64), body)
        f = Function(name, params, rows_loop, 'cuda', grid=(grid_size(rows, 1),), block=(threads,))
    aligned = {params.index(loop.buffers[b]): nbytes for b, nbytes in loop.aligned.items()}
    aligned[len(params) - 1] = copy_lanes(lanes, out_param.dtype) * out_param.dtype.nbytes
    f.aligned = tuple(sorted(aligned.items()))
    return f


def _warps_per_block(rows: int) -> int:
    """Rows (warps) per block of a warp-per-row kernel: up to 8, while the blocks stay at least ROW_MIN_BLOCKS
    (small blocks spread a few rows over more SMs, so more of them load at once)."""
    warps = 1
    while warps < 8 and rows // (warps * 2) >= ROW_MIN_BLOCKS:
        warps *= 2
    return warps


def _cuda_row_plain(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape, lowering: Lowering,
                    p: int) -> Function:
    """A block per row (a warp where the row's reductions and columns are short, or rows are many: see
    ROW_ELEMENTS_PER_THREAD): its threads compute the row's reductions together (all get the results), then
    stride over the row's columns (lowering.row_split)."""
    rows, cols = prod(shape[:p]), prod(shape[p:])
    longest = max([prod(r.shape) for r in collect(value, ReduceCompute)] + [cols], key=_static_size)
    mode = 'block' if _static_size(longest) >= BLOCK_REDUCE_MIN_EXTENT else 'warp'
    if is_static(rows) and rows >= WARP_ROWS_MIN and _static_size(longest) <= WARP_ROWS_MAX_EXTENT:
        mode = 'warp'  # rows enough for a warp each to fill the GPU
    # a row's threads: about ROW_ELEMENTS_PER_THREAD elements each
    threads = min(CUDA_BLOCK, max(32, pow2_ceil(-(-_static_size(longest) // ROW_ELEMENTS_PER_THREAD))))
    lowering = Lowering(lowering.params, block_threads=threads)
    row, j = Var('row', int64), Var('j', int64)
    at_row, element_value = _row_values(value, axes, shape, p, row, j)
    pre: List[Stmt] = []
    for r in top_reduces(at_row):
        lowering.reduction(r, pre, mode)
    body: List[Stmt] = []
    element = lowering.value(element_value, body, 'thread')
    first, step, per_block, group, groups = {
        'warp': ('hidet_lane_idx', 32, CUDA_BLOCK // 32, 'hidet_global_warp_idx', 'hidet_global_warps'),
        'block': ('hidet_thread_idx', threads, 1, 'hidet_block_idx', 'hidet_grid_dim')}[mode]
    inner = For(j, call(first, dtype=int64), cols, step, Seq(body + [Store(out_param, row * cols + j, element)]))
    loop = For(row, call(group, dtype=int64), rows, call(groups, dtype=int64), Seq(pre + [inner]))
    block = CUDA_BLOCK if mode == 'warp' else threads
    return Function(name, params, loop, 'cuda', grid=(grid_size(rows, per_block),), block=(block,))


def _static_size(n) -> int:
    """An extent for choosing a schedule: symbolic ones taken as large."""
    return n if is_static(n) else 1 << 20


def _cuda_symbolic(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape,
                   lowering: Lowering) -> Function:
    """Symbolic extents: the grid comes from the dims at launch. Injective: vectorized where the innermost
    extent is static (else a thread per element); reductions: a block per output element, whatever the
    layout (the column style sizes its blocks from the static shape)."""
    if not collect(value, ReduceCompute):
        return _injective(name, params, out_param, value, axes, shape, lowering)
    return _cuda_row(name, params, out_param, value, axes, shape, lowering, 'block')


def _injective(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape,
               lowering: Lowering) -> Function:
    return _injective_outputs(name, params, [(out_param, value, axes)], shape, lowering)


def _injective_outputs(name: str, params: List[Var], outputs, shape, lowering: Lowering) -> Function:
    """The vectorized kernel of injective ``outputs`` ((parameter, value, axes) of one ``shape``), with the scalar
    one as its fallback (for unaligned buffers), or the scalar one alone."""
    scalar = _cuda_threads(name, params, outputs, shape, lowering)
    return _with_fallback(vectorized_outputs(name, params, outputs, shape, Lowering(lowering.params)), scalar)


def _with_fallback(vector: Optional[Function], scalar: Function) -> Function:
    """The vectorized kernel with the scalar one as its fallback (for unaligned buffers), or the scalar one."""
    if vector is None:
        return scalar
    scalar.name = f'{vector.name}_scalar'
    vector.fallback = scalar
    return vector


def _cuda_thread(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape,
                 lowering: Lowering) -> Function:
    return _cuda_threads(name, params, [(out_param, value, axes)], shape, lowering)


def _cuda_threads(name: str, params: List[Var], outputs, shape, lowering: Lowering) -> Function:
    """One thread per element of ``outputs`` ((parameter, value, axes) of one ``shape``; a grid-stride loop):
    injective kernels and column-style reductions with many outputs."""
    numel = prod(shape)
    n = Var('n', int64)
    body: List[Stmt] = []
    for out_param, value, axes in outputs:
        element = lowering.value(_element_value(value, axes, shape, n), body, 'thread')
        body.append(Store(out_param, n, element))
    loop = For(n, call('hidet_global_thread_idx', dtype=int64), numel, call('hidet_global_threads', dtype=int64),
               Seq(body))
    return Function(name, params, loop, 'cuda', grid=(grid_size(numel, CUDA_BLOCK),), block=(CUDA_BLOCK,))


def _cuda_row(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape, lowering: Lowering,
              mode: str) -> Function:
    """A warp or a block per output element; its first thread stores the result."""
    numel = prod(shape)
    n = Var('n', int64)
    body: List[Stmt] = []
    element = lowering.value(_element_value(value, axes, shape, n), body, mode)
    per_block, first, group, groups = {
        'warp': (CUDA_BLOCK // 32, 'hidet_lane_idx', 'hidet_global_warp_idx', 'hidet_global_warps'),
        'block': (1, 'hidet_thread_idx', 'hidet_block_idx', 'hidet_grid_dim')}[mode]
    guarded = Seq(body + [If(binary('==', call(first, dtype=int64), 0), Store(out_param, n, element))])
    loop = For(n, call(group, dtype=int64), numel, call(groups, dtype=int64), guarded)
    return Function(name, params, loop, 'cuda', grid=(grid_size(numel, per_block),), block=(CUDA_BLOCK,))


def _column_shape(numel: int, extent: int, value: Expr):
    """(cols, rows) of a column-style kernel's blocks: ``cols`` consecutive outputs (at least 32 bytes of
    each input row: whole memory sectors), ``rows`` threads splitting the reduced elements of each."""
    itemsize = min((t.dtype.nbytes for t in (e.tensor for e in collect(value, TensorElement))), default=4)
    min_cols = max(8, 32 // max(itemsize, 1))
    cols = 32
    while cols > min_cols and -(-numel // cols) < COLUMN_MIN_BLOCKS:
        cols //= 2
    rows = _pow2_floor(max(1, COLUMN_THREADS // max(numel, 1)))
    rows = min(rows, CUDA_BLOCK // cols, _pow2_floor(max(1, extent // COLUMN_MIN_PER_THREAD)))
    return cols, rows


def _cuda_column(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape, lowering: Lowering,
                 cols: int, rows: int) -> Function:
    """Block column ``c`` (threads ``c, c + cols, …``) reduces output ``c0 + c`` of each chunk of ``cols``
    consecutive outputs, its ``rows`` threads striding over the reduced elements."""
    numel = prod(shape)
    tid = call('hidet_thread_idx', dtype=int64)
    row, c0, n, valid = Var('row', int64), Var('c0', int64), Var('n', int64), Var('valid', boolean)
    lowering.column = (cols, rows, row, valid)
    body: List[Stmt] = [Declare(n, c0 + tid % cols), Declare(valid, binary('<', n, numel))]
    element = lowering.value(_element_value(value, axes, shape, n), body, 'column')
    body.append(If(logical_and(valid, binary('==', row, 0)), Store(out_param, n, element)))
    loop = For(c0, call('hidet_block_idx', dtype=int64) * cols, numel, call('hidet_grid_dim', dtype=int64) * cols,
               Seq(body))
    grid = min(-(-numel // cols), CUDA_MAX_GRID)
    return Function(name, params, Seq([Declare(row, tid / cols), loop]), 'cuda', grid=(max(grid, 1),),
                    block=(cols * rows,))


def reduce_style(value: Expr, axes, shape) -> str:
    """'column' when the largest reduction reads consecutive input elements for consecutive outputs
    (the output's innermost index is the inputs' innermost one) and no read is contiguous along the
    reduced elements; else 'row'."""
    reduces = top_reduces(value)
    if not axes or shape[-1] == 1 or not reduces:
        return 'row'
    main = max(reduces, key=lambda r: prod(r.shape))
    row = column = False
    for e in collect(main.value, TensorElement):
        flat = flat_index(e.indices, e.tensor.shape)
        if not depends_on(flat, main.axes):
            continue
        along_reduce, along_output = linear(flat, main.axes[-1]), linear(flat, axes[-1])
        row = row or (along_reduce is not None and abs(along_reduce[0]) == 1)
        column = column or (along_output is not None and along_output[0] == 1)
    return 'column' if column and not row else 'row'


def _output_kernel(task: Task, out: TensorNode, out_param: Var, params: Dict[int, Var], target: str,
                   name: str) -> Function:
    axes = out.definition.axes
    value = inline_computes(out.definition.value)
    all_params = [params[id(t)] for t in task.inputs] + [out_param]
    lowering = Lowering(params)
    p = row_split(value, axes, out.shape)
    if p is not None:
        kernel = _cpu_row_broadcast if target == 'cpu' else _cuda_row_broadcast
        return kernel(name, all_params, out_param, value, axes, out.shape, lowering, p)
    if target == 'cpu':
        return _cpu_kernel(name, all_params, out_param, value, axes, out.shape, lowering)
    if task.symbols():
        return _cuda_symbolic(name, all_params, out_param, value, axes, out.shape, lowering)
    largest = max((prod(r.shape) for r in collect(value, ReduceCompute)), default=0)
    if largest <= 1:
        return _injective(name, all_params, out_param, value, axes, out.shape, lowering)
    if largest <= SMALL_REDUCE and prod(out.shape) >= SMALL_REDUCE_MIN_OUTPUTS:
        scalar = _cuda_thread(name, all_params, out_param, value, axes, out.shape, lowering)
        vector = vectorized_small_reductions(name, all_params, out_param, value, axes, out.shape, Lowering(params),
                                             min_threads=SMALL_REDUCE_MIN_OUTPUTS)
        return _with_fallback(vector, scalar)
    if reduce_style(value, axes, out.shape) == 'column':
        cols, rows = _column_shape(prod(out.shape), largest, value)
        if rows == 1:
            return _cuda_thread(name, all_params, out_param, value, axes, out.shape, lowering)
        return _cuda_column(name, all_params, out_param, value, axes, out.shape, lowering, cols, rows)
    mode = 'block' if largest >= BLOCK_REDUCE_MIN_EXTENT else 'warp'
    return _cuda_row(name, all_params, out_param, value, axes, out.shape, lowering, mode)


def _one_kernel_for_all(task: Task) -> bool:
    """Whether the task's outputs are several injective ones of one static shape (a batch of copies, an even
    split): one kernel computes them all at each element, one launch."""
    outs = task.outputs
    if len(outs) < 2 or task.symbols() or not all(is_static(d) for d in outs[0].shape):
        return False
    if any(tuple(o.shape) != tuple(outs[0].shape) for o in outs):
        return False
    return not any(collect(inline_computes(o.definition.value), ReduceCompute) for o in outs)


def _cuda_outputs(task: Task, out_params: List[Var], params: Dict[int, Var], name: str) -> Function:
    """The kernel computing every output of ``task`` (_one_kernel_for_all) at each element: vectorized where all
    outputs' reads allow it, with the scalar kernel as its fallback (unaligned buffers), else the scalar one."""
    all_params = [params[id(t)] for t in task.inputs] + out_params
    outputs = [(p, inline_computes(o.definition.value), o.definition.axes) for p, o in zip(out_params, task.outputs)]
    kernel = _injective_outputs(name, all_params, outputs, task.outputs[0].shape, Lowering(params))
    for f in (kernel, kernel.fallback):
        if f is not None:
            f.outputs = tuple(range(len(out_params)))
    return kernel


def schedule_task(task: Task, target: str) -> IRModule:
    """Lower ``task`` for ``target`` ('cpu' or 'cuda')."""
    if target not in ('cpu', 'cuda'):
        raise ValueError(f"unknown target {target!r}: expected 'cpu' or 'cuda'")
    params: Dict[int, Var] = {}
    for i, t in enumerate(task.inputs):
        params[id(t)] = Var(f'in{i}', t.dtype, pointer=True)
    functions = []
    out_params = []
    for i, out in enumerate(task.outputs):
        if out.is_input():
            raise ValueError(f'task {task.name}: output {out.name} is an input; outputs must be computed')
        out_params.append(Var(f'out{i}', out.dtype, pointer=True))
    if target == 'cuda' and _one_kernel_for_all(task):
        functions.append(_cuda_outputs(task, out_params, params, f'{task.name}_k0'))
    else:
        for i, (out, out_param) in enumerate(zip(task.outputs, out_params)):
            functions.append(_output_kernel(task, out, out_param, params, target, f'{task.name}_k{i}'))
    module = IRModule(task.name, target, functions, len(task.inputs), len(task.outputs))
    module.symbols = task.symbols()
    module.signature = task.signature()
    return module
