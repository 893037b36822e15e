"""Lowering the value of one output element into statements: reads of input tensors become loads at flat
row-major indices, reductions become accumulator loops.

A reduction is lowered in one of four modes: 'thread' (one thread reduces alone), 'warp' / 'block' (the
threads of a warp or block share the reduced elements, then combine through shuffles), 'column' (the
``rows`` threads of a block column share them, then combine through shared memory). Nested reductions:
- one that does not depend on the enclosing reduction's axes is computed once, before the enclosing loop,
  in the enclosing mode (all threads of the group take part and all get the result);
- one that does runs inside the loop, per thread;
- a reduction computed already in an enclosing scope (the same expression over the same variables, e.g.
  softmax's max, read by the output and inside its sum) is not computed again.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from hidet.ir.compute import ReduceCompute
from hidet.ir.dtypes import DataType, int64
from hidet.ir.expr import (BufferLoad, Constant, Expr, TensorElement, Var, binary, call, cast, convert, is_static,
                           maximum, minimum, select)
from hidet.ir.functors import collect, merge_divmod, rewrite, substitute, walk
from hidet.ir.schedulers.analysis import depends_on, structural_key
from hidet.ir.stmt import Assign, Declare, For, Seq, Stmt

CUDA_BLOCK = 256
CUDA_MAX_GRID = 65536 * 8  # blocks of a grid-stride loop, at most
# a row-broadcast output's row is one block's work (row_split): its columns at most this many elements
ROW_MAX_COLUMNS = 32768
# a float sum one thread computes alone over more than twice this many elements adds partial sums of this many
# (blocked summation, as torch's and numpy's cascades): rounding error grows with block + extent / block additions
# instead of extent
SUM_BLOCK = 64


def prod(xs: Sequence[int]) -> int:
    """The product of dimensions (ints, or int64 expressions of symbolic ones)."""
    n = 1
    for x in xs:
        n = x if is_static(n) and n == 1 else n * x
    return n


def pow2_ceil(x: int) -> int:
    """The least power of two at least ``x`` (1 for x <= 1)."""
    p = 1
    while p < x:
        p *= 2
    return p


def grid_size(numel, per_block: int):
    """Blocks of a grid-stride loop over ``numel`` items, ``per_block`` per block: one block per
    ``per_block`` items, at most CUDA_MAX_GRID, at least one; an expression of the dims where ``numel`` is
    symbolic (computed by the launch entry)."""
    if is_static(numel):
        return max(min(-(-numel // per_block), CUDA_MAX_GRID), 1)
    return maximum(minimum((numel + (per_block - 1)) / per_block, CUDA_MAX_GRID), 1)


def broadcast_indices(indices: Sequence[Expr], shape: Sequence[int]) -> List[Expr]:
    """Indices into a tensor of ``shape`` broadcast to the (longer) index list ``indices``."""
    offset = len(indices) - len(shape)
    return [convert(0) if extent == 1 else indices[offset + d] for d, extent in enumerate(shape)]


def flat_index(indices: Sequence[Expr], shape: Sequence[int]) -> Expr:
    index: Expr = convert(0)
    for i, (idx, extent) in enumerate(zip(indices, shape)):
        index = idx if i == 0 else index * extent + idx
    return index


def row_major_strides(shape: Sequence[int]) -> Tuple:
    """The element strides of a row-major tensor of ``shape`` (products of symbolic extents where there are)."""
    strides, n = [], 1
    for extent in reversed(list(shape)):
        strides.append(n)
        n = n * extent
    return tuple(reversed(strides))


def unflatten(flat: Expr, shape: Sequence[int]) -> List[Expr]:
    """The per-dimension indices of flat row-major index ``flat`` (symbolic extents: a modulo on every
    dimension but the outermost)."""
    if not all(is_static(s) for s in shape):  # nested divisions, which merge_divmod folds back in reads
        out, q = [], flat
        for d in reversed(range(len(shape))):
            extent = shape[d]
            if is_static(extent) and extent == 1:
                out.append(convert(0))
                continue
            out.append(q % extent if d > 0 else q)
            q = q / extent
        return list(reversed(out))
    out, stride = [], 1
    total = prod(shape)
    for d in reversed(range(len(shape))):
        extent = shape[d]
        if is_static(extent) and extent == 1:
            out.append(convert(0))
        else:
            idx = flat if is_static(stride) and stride == 1 else flat / stride
            static = is_static(stride) and is_static(extent) and is_static(total)
            last = stride * extent < total if static else d > 0
            out.append(idx % extent if last else idx)
        stride *= extent
    return list(reversed(out))


def reduce_init(kind: str, dtype: DataType) -> Expr:
    if kind in ('sum', 'mean'):
        return Constant(0, dtype)
    if kind == 'prod':
        return Constant(1, dtype)
    if kind in ('any', 'all'):
        return Constant(kind == 'all', dtype)
    return call('hidet_lowest' if kind == 'max' else 'hidet_highest', dtype=dtype)


def reduce_combine(kind: str, acc: Expr, value: Expr) -> Expr:
    value = cast(value, acc.dtype)
    if kind in ('sum', 'mean'):
        return binary('+', acc, value)
    if kind == 'prod':
        return binary('*', acc, value)
    if kind == 'any':
        return binary('||', acc, value)
    if kind == 'all':
        return binary('&&', acc, value)
    return binary(kind, acc, value)


def reduce_result(r: ReduceCompute, acc: Expr) -> Expr:
    """Reduction ``r``'s value from its accumulator ``acc``: a mean divided by the count, cast to ``r``'s dtype."""
    if r.kind == 'mean':
        extent = prod(r.shape)
        acc = binary('/', acc, Constant(extent, r.acc_dtype) if is_static(extent) else cast(extent, r.acc_dtype))
    return cast(acc, r.dtype)


def combine_name(kind: str) -> str:
    return {'mean': 'sum', 'any': 'or', 'all': 'and'}.get(kind, kind)


def top_reduces(expr: Expr) -> List[ReduceCompute]:
    """The reductions ``expr`` reads outside any other reduction (one read both inside another reduction and
    outside, as layer norm's mean, counts)."""
    return [node for node in walk(expr, descend=lambda n: not isinstance(n, ReduceCompute))
            if isinstance(node, ReduceCompute)]


def row_split(value: Expr, axes: Sequence[Var], shape: Sequence[int]) -> Optional[int]:
    """How many leading output axes (the *row*) the reductions of a *row-broadcast* output depend on, or None
    when ``value`` (inlined) is not one. A row-broadcast output reads its reductions broadcast over the
    remaining axes (the row's *columns*: more than one element, at most ROW_MAX_COLUMNS), and no reduction is
    nested in another that depends on the outer one's axes: layer norm's ``(x - mean) * rsqrt(var + eps)``,
    softmax's ``exp(x - max) / sum``. A block (a CPU thread) then computes a row's reductions once and
    writes its columns (auto.py); the fusion pass merges a normalization's operators into one such output."""
    reduces = top_reduces(value)
    if not reduces or not axes:
        return None
    p = max((d + 1 for d, a in enumerate(axes) if any(depends_on(r, [a]) for r in reduces)), default=0)
    if p == len(axes):
        return None
    columns = prod(shape[p:])
    if is_static(columns) and not 1 < columns <= ROW_MAX_COLUMNS:
        return None
    for r in collect(value, ReduceCompute):
        if any(depends_on(inner, r.axes) for inner in collect(r.value, ReduceCompute)):
            return None
    return p


class Lowering:
    def __init__(self, params: Dict[int, Var], block_threads: int = CUDA_BLOCK):
        self.params = params
        self.block_threads = block_threads  # the threads of a block that share a 'block' reduction
        self.counter = 0
        self.scopes: List[Dict[str, Expr]] = [{}]  # lowered reductions by structural key, per C scope
        self.column: Optional[Tuple[int, int, Var, Expr]] = None  # column mode: (cols, rows, row, valid)
        # a row-broadcast kernel holding its row in registers (rows.py): its reductions over the row walk the
        # row's loop, and their reads of the row come from its registers
        self.row_loop = None

    def fresh(self, prefix: str, dtype) -> Var:
        self.counter += 1
        return Var(f'{prefix}{self.counter}', dtype)

    def loads(self, expr: Expr) -> Expr:
        def fn(e):
            if isinstance(e, TensorElement):
                index = flat_index(e.indices, e.tensor.shape)
                if not all(is_static(s) for s in e.tensor.shape):  # (an index unflattened and flattened back)
                    index = merge_divmod(index)
                buffer = self.params[id(e.tensor)]
                held = self.row_loop.load(buffer, index, e.tensor.dtype) if self.row_loop is not None else None
                return held if held is not None else BufferLoad(buffer, index, e.tensor.dtype)
            return None

        return rewrite(expr, fn)

    def value(self, expr: Expr, stmts: List[Stmt], mode: str) -> Expr:
        """Emit statements computing ``expr``; returns the expression of its value."""
        mapping = {id(r): self.reduction(r, stmts, mode) for r in top_reduces(expr)}
        return self.loads(rewrite(expr, lambda e: None, mapping) if mapping else expr)

    def reduction(self, r: ReduceCompute, stmts: List[Stmt], mode: str) -> Expr:
        key = structural_key(r)
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        hoisted = {id(x): self.reduction(x, stmts, mode) for x in top_reduces(r.value) if not depends_on(x, r.axes)}
        value = rewrite(r.value, lambda e: None, hoisted) if hoisted else r.value
        acc = self.fresh('acc', r.acc_dtype)
        stmts.append(Declare(acc, reduce_init(r.kind, r.acc_dtype)))
        extent = prod(r.shape)
        k = self.fresh('k', int64)
        stop: Expr = convert(extent)
        if mode == 'column':
            cols, rows, row, valid = self.column
            start, step, stop = row, convert(rows), select(valid, extent, 0)
        else:
            start, step = {'thread': (convert(0), convert(1)),
                           'warp': (call('hidet_lane_idx', dtype=int64), convert(32)),
                           'block': (call('hidet_thread_idx', dtype=int64), convert(self.block_threads))}[mode]

        def body_at(index: Expr, into: Var = acc) -> List[Stmt]:
            body: List[Stmt] = []
            self.scopes.append({})
            v = self.value(substitute(value, dict(zip(r.axes, unflatten(index, r.shape)))), body, mode='thread')
            self.scopes.pop()
            return body + [Assign(into, reduce_combine(r.kind, into, v))]

        if mode == 'thread' and r.kind in ('sum', 'mean') and r.acc_dtype.is_float() and is_static(extent) \
                and extent > 2 * SUM_BLOCK:
            block, part = self.fresh('sb', int64), self.fresh('part', r.acc_dtype)
            first = block * SUM_BLOCK
            inner = For(k, first, minimum(first + SUM_BLOCK, extent), 1, Seq(body_at(k, part)))
            stmts.append(For(block, 0, -(-extent // SUM_BLOCK), 1,
                             Seq([Declare(part, reduce_init(r.kind, r.acc_dtype)), inner,
                                  Assign(acc, binary('+', acc, part))])))
        elif self.row_loop is not None and mode in ('warp', 'block') and is_static(extent) \
                and extent == self.row_loop.cols:
            stmts.append(self.row_loop.loop(lambda column, lane: body_at(column)))  # (the row's own order)
        else:
            stmts.append(For(k, start, stop, step, Seq(body_at(k))))
        if mode in ('warp', 'block'):
            stmts.append(Assign(acc, call(f'hidet_{mode}_reduce_{combine_name(r.kind)}', acc, dtype=r.acc_dtype)))
        elif mode == 'column':
            cols, rows = self.column[:2]
            stmts.append(Assign(acc, call(f'hidet_column_reduce_{combine_name(r.kind)}', acc, cols, rows,
                                          dtype=r.acc_dtype)))
        result = reduce_result(r, acc)
        self.scopes[-1][key] = result
        return result
