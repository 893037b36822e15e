"""Row-broadcast CUDA kernels that hold their row in registers (layer / RMS / group norm, softmax).

A row-broadcast output (lowering.row_split) reads its row in several loops: one per reduction (layer norm's
mean, then its sum of squares around the mean) and one writing the outputs. Here every loop walks the row's
columns in the same order (``RowLoop``): the thread ``t`` of the ``T`` threads sharing a row (a warp, or a
block) takes the vectors ``q = t + i * T`` (``i < iters``) of ``L`` consecutive columns. A read of the row
(flat index ``rest + column``, ``rest`` a function of the row alone) is loaded by the first loop that meets
it, ``L`` elements by one vector load, into a register array; the later loops read the registers. So the
activation is read from memory once, with 16-byte loads, and the outputs are written as 16-byte vectors.

Reads inside a condition (a select's branches, the right of ``&&`` / ``||``) are not hoisted into a loop's
vector loads, which could leave the tensor (pad, concat): a value with a condition keeps the plain kernel.
Buffers read or written by vectors must be aligned: the launcher checks and runs the plain kernel
(``Function.fallback``) otherwise.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from hidet.ir.compute import ReduceCompute
from hidet.ir.dtypes import DataType, int64
from hidet.ir.expr import Binary, BufferLoad, Expr, Select, Var, binary, call, convert, is_static, simplify_dim
from hidet.ir.functors import collect, merge_divmod, substitute
from hidet.ir.schedulers.analysis import known_multiple, linear, structural_key
from hidet.ir.schedulers.lowering import prod
from hidet.ir.schedulers.vectorize import VECTOR_BYTES, copy_lanes, vector_copies
from hidet.ir.stmt import Declare, For, If, Seq, Stmt, Store
from hidet.ir.type import TensorType

# vectors of a row per thread, at most, before more threads share the row (a block instead of a warp): the
# register arrays then hold at most this many vectors of each read
ROW_VECTORS_PER_THREAD = 4


def conditional(value: Expr) -> bool:
    """Whether ``value`` reads anything only under a condition (a select, ``&&``, ``||``)."""
    return any(isinstance(e, Select) or (isinstance(e, Binary) and e.op in ('&&', '||')) for e in collect(value, Expr))


class RowLoop:
    """The loops over one row's ``cols`` columns (static), vectors of ``lanes`` columns dealt to ``threads``
    threads (thread index ``tid``), and the register arrays of the row's reads."""

    def __init__(self, row: Var, cols: int, threads: int, lanes: int, tid: Expr):
        self.row, self.cols, self.threads, self.lanes, self.tid = row, cols, threads, lanes, tid
        self.vectors = cols // lanes
        self.iters = -(-self.vectors // threads)
        self.caches: Dict[Tuple[int, str], Var] = {}  # (buffer, structural key of rest) → register array
        self.declares: List[Stmt] = []  # of the register arrays, at the top of a row's work
        self.aligned: Dict[int, int] = {}  # id(buffer) → bytes its vector loads need
        self.buffers: Dict[int, Var] = {}
        self._at: Optional[Tuple[Var, Var, Var, List[Stmt]]] = None  # in a loop body: (i, q, lane, fills)
        self.counter = 0

    def loop(self, body: Callable[[Expr, Var], List[Stmt]],
             after_lanes: Callable[[Expr], List[Stmt]] = None) -> Stmt:
        """``for i (unrolled) { q = tid + i * T; if (q < vectors) { fills; for lane (unrolled) { body(column,
        lane) }; after_lanes(q) } }`` with ``column = q * lanes + lane``."""
        self.counter += 1
        i, q, lane = (Var(f'{n}{self.counter}', int64) for n in ('i', 'q', 'lane'))
        fills: List[Stmt] = []
        self._at = (i, q, lane, fills)
        try:
            stmts = body(q * self.lanes + lane, lane)
        finally:
            self._at = None
        inner: List[Stmt] = fills + [For(lane, 0, self.lanes, 1, Seq(stmts), kind='unroll')]
        inner += after_lanes(q) if after_lanes is not None else []
        guarded = inner if self.vectors % self.threads == 0 else [If(binary('<', q, self.vectors), Seq(inner))]
        return For(i, 0, self.iters, 1, Seq([Declare(q, self.tid + i * self.threads)] + guarded), kind='unroll')

    def load(self, buffer: Var, index: Expr, dtype: DataType) -> Optional[Expr]:
        """The register holding ``buffer[index]`` in the loop being lowered, or None where ``index`` is not
        ``rest + column`` with ``rest`` a function of the row alone."""
        if self._at is None:
            return None
        i, q, lane, fills = self._at
        index = merge_divmod(index)
        along_lane, along_q = linear(index, lane), linear(index, q)
        if along_lane is None or along_q is None or along_lane[0] != 1 or along_q[0] != self.lanes:
            return None
        rest = convert(simplify_dim(substitute(index, {q: convert(0), lane: convert(0)})))
        if any(v is not self.row for v in collect(rest, Var)):
            return None
        key = (id(buffer), structural_key(rest))
        cache = self.caches.get(key)
        if cache is None:  # the first loop to read it loads it, the later ones read the registers
            cache = Var(f'row{len(self.caches)}', dtype, type=TensorType(dtype, [self.iters * self.lanes], 'register'))
            self.caches[key] = cache
            self.declares.append(Declare(cache))
            self.buffers[id(buffer)] = buffer
            fills.extend(self._fill(cache, buffer, rest, dtype))
        return BufferLoad(cache, i * self.lanes + lane, dtype)

    def _fill(self, cache: Var, buffer: Var, rest: Expr, dtype: DataType) -> List[Stmt]:
        """Loads of the ``lanes`` elements at ``rest + q * lanes`` into ``cache[i * lanes :]``: vectors of at most
        16 bytes where ``rest`` is a known multiple of the lanes, else one element at a time."""
        i, q, lane, _ = self._at
        start = rest + q * self.lanes
        if known_multiple(rest) % self.lanes:
            e = Var(f'e{self.counter}', int64)
            return [For(e, 0, self.lanes, 1, Store(cache, i * self.lanes + e, BufferLoad(buffer, start + e, dtype)),
                        kind='unroll')]
        self.aligned[id(buffer)] = max(self.aligned.get(id(buffer), 0), copy_lanes(self.lanes, dtype) * dtype.nbytes)
        return vector_copies(cache, i * self.lanes, buffer, start, self.lanes, dtype)


def row_lanes(cols: int, out_bytes: int) -> int:
    """Columns per vector: 16 bytes of the output's dtype, halved until they divide the row."""
    lanes = VECTOR_BYTES // out_bytes
    while lanes > 1 and cols % lanes:
        lanes //= 2
    return lanes


def row_threads(vectors: int) -> int:
    """Threads sharing a row: a warp where each lane takes at most ROW_VECTORS_PER_THREAD vectors, else the
    power of two of a block that keeps to it (at most 1024)."""
    threads = 32
    while threads < 1024 and -(-vectors // threads) > ROW_VECTORS_PER_THREAD:
        threads *= 2
    return threads


def reduces_over_row(value: Expr, cols: int) -> bool:
    """Whether every reduction of ``value`` reduces exactly a row's ``cols`` elements (so its loop is the row's)."""
    return all(is_static(n) and n == cols for n in (prod(r.shape) for r in collect(value, ReduceCompute)))


def thread_index(mode: str) -> Expr:
    return call('hidet_lane_idx' if mode == 'warp' else 'hidet_thread_idx', dtype=int64)
