"""What every matmul template's kernel computes with, from a GemmSpec: the kernel's flat parameters
(the task's inputs, then the output) and the task's expressions lowered onto them — an operand's value
at (batch, m|n, k), the epilogue at (batch, m, n, accumulator), the flat output index — so the templates
(mma.py on CUDA, cpu.py on the CPU) differ only in how they loop."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from hidet.ir.dtypes import float32, int32, int64
from hidet.ir.expr import (Binary, BufferLoad, COMPARE_OPS, Cast, Constant, Expr, SymbolVar, TensorElement, Var, binary,
                           cast, convert)
from hidet.ir.functors import INT32_MAX, collect, conjuncts, merge_divmod, narrow_index, rewrite
from hidet.ir.schedulers.analysis import depends_on
from hidet.ir.schedulers.lowering import flat_index
from hidet.ir.schedulers.vectorize import LanePlan, copy_lanes, vector_copies
from hidet.ir.stmt import Assign, Declare, If, Seq, Stmt, Store, VectorCopy
from hidet.ir.type import TensorType

from .spec import GemmSpec, Operand

ANY_ROW = Constant(0, int64)  # (m where a value does not depend on it)


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


@dataclass
class RowSplit:
    """A gathered operand's chunk offset and padding predicate at (batch, row, k) split into what depends on the
    row (m or n) and the batch — constant over the k loop: each thread computes it once per chunk row — and
    what depends on k — one column per thread, so once per k-tile: ``offset = row_offset + k_offset`` and
    ``valid = AND(row_terms[i] <op> k_side)`` over ``conds`` ``(i, op, k_side)``. A convolution's offset
    ``((n*H + oh*s - p + kh)*W + ow*s - p + kw)*C + c`` has the row part ``(n*H + oh*s - p)*W*C + (ow*s - p)*C``;
    its padding test ``0 <= oh*s - p + kh < H`` is ``oh*s >= p - kh`` and ``oh*s < H + p - kh``. Expressions
    over (batch vars, row var) and the k var, in the gather's index type."""
    row_offset: Expr
    k_offset: Expr
    row_terms: List[Expr]
    conds: List[Tuple[int, str, Expr]]


def _split_row_k(e: Expr, k_var: Var) -> Optional[Tuple[Optional[Expr], Optional[Expr], int]]:
    """``e`` (an integer index expression) as ``row + k + c``: parts over variables other than ``k_var`` and over
    ``k_var`` alone (None for none), and an int; None where a term mixes both (a product or a division of one)."""

    def mixed(x: Expr) -> Optional[bool]:
        """True: depends on k alone; False: not on k; None: on both."""
        vs = [v for v in collect(x, Var) if not isinstance(v, SymbolVar)]
        has_k = any(v is k_var for v in vs)
        return None if has_k and any(v is not k_var for v in vs) else has_k

    def add(a: Optional[Expr], b: Optional[Expr], sign: int) -> Optional[Expr]:
        if b is None:
            return a
        if a is None:
            return b if sign > 0 else binary('*', b, -1)
        return binary('+' if sign > 0 else '-', a, b)

    def scale(x: Optional[Expr], c: int) -> Optional[Expr]:
        return None if x is None or c == 0 else x if c == 1 else binary('*', x, c)

    def visit(x: Expr):
        if isinstance(x, Constant) and x.dtype.is_integer():
            return None, None, int(x.value)
        if isinstance(x, Cast) and x.dtype.is_integer() and x.a.dtype.is_integer():
            return visit(x.a)
        if isinstance(x, Binary) and x.op in ('+', '-'):
            a, b = visit(x.a), visit(x.b)
            if a is None or b is None:
                return None
            sign = 1 if x.op == '+' else -1
            return add(a[0], b[0], sign), add(a[1], b[1], sign), a[2] + sign * b[2]
        if isinstance(x, Binary) and x.op == '*':
            a, b = visit(x.a), visit(x.b)
            if a is not None and b is not None:
                if b[0] is None and b[1] is None:
                    a, b = b, a
                if a[0] is None and a[1] is None:  # a constant factor
                    return scale(b[0], a[2]), scale(b[1], a[2]), b[2] * a[2]
        kind = mixed(x)
        if kind is None:
            return None
        return (None, x, 0) if kind else (x, None, 0)

    return visit(e)


def row_split(offset: Expr, valid: Optional[Expr], k_var: Var) -> Optional[RowSplit]:
    """The RowSplit of a gather's ``offset`` and ``valid`` (a conjunction of comparisons), or None."""
    parts = _split_row_k(offset, k_var)
    if parts is None:
        return None
    zero = convert(0, offset.dtype)
    row, k, c = parts
    row_offset = binary('+', row, c) if row is not None else convert(c, offset.dtype)
    k_offset = k if k is not None else zero
    conds, terms, keys = [], [], {}
    for x in conjuncts(valid) if valid is not None else []:
        if not (isinstance(x, Binary) and x.op in COMPARE_OPS and x.a.dtype.is_integer() and x.b.dtype.is_integer()):
            return None
        parts = _split_row_k(binary('-', x.a, x.b), k_var)  # row + k + c <op> 0  <=>  row <op> -k - c
        if parts is None:
            return None
        row, k, c = parts
        row = row if row is not None else zero
        key = repr(row)
        if key not in keys:
            keys[key] = len(terms)
            terms.append(row)
        side = convert(-c, row.dtype) if k is None else binary('-', convert(-c, k.dtype), k)
        conds.append((keys[key], x.op, side))
    return RowSplit(row_offset, k_offset, terms, conds)


class GemmValues:
    def __init__(self, spec: GemmSpec):
        self.spec = spec
        task = spec.task
        self.ins = [Var(f'in{i}', t.dtype, type=TensorType(t.dtype, [_prod(t.shape)], 'pointer'))
                    for i, t in enumerate(task.inputs)]
        self.out = Var('out', spec.out_dtype,
                       type=TensorType(spec.out_dtype, [_prod(task.outputs[0].shape)], 'pointer'))
        self._params = {id(t): v for t, v in zip(task.inputs, self.ins)}
        self._batch_strides = [_prod(spec.batch_shape[d + 1:]) for d in range(len(spec.batch_shape))]

    def lower(self, expr: Expr, values: Dict[Var, Expr]) -> Expr:
        """``expr`` (over the task's inputs and the GEMM's variables) with the variables replaced by
        ``values`` and each read of an input a load of the kernel's flat parameter."""
        ids = {id(k): v for k, v in values.items()}

        def fn(e: Expr):
            if isinstance(e, Var) and id(e) in ids:
                return ids[id(e)]
            if isinstance(e, TensorElement):
                # (a symbolic fold read back at its own axes needs no division)
                index = merge_divmod(flat_index(e.indices, e.tensor.shape), static_divisors=False)
                return BufferLoad(self._params[id(e.tensor)], index, e.tensor.dtype)
            return None

        return rewrite(expr, fn)

    def batch_values(self, bz) -> Dict[Var, Expr]:
        """The batch variables at flat batch index ``bz``."""
        spec = self.spec
        return {v: (bz / st) % ext if st * ext < spec.batch else bz / st
                for v, st, ext in zip(spec.batch_vars, self._batch_strides, spec.batch_shape)}

    def direct_base(self, op: Operand, bz) -> Expr:
        """int64 offset of a direct operand's element (batch bz, 0, 0)."""
        pos, index = op.direct
        total: Expr = convert(index.offset, int64)
        for v, val in self.batch_values(bz).items():
            c = index.coeff(v)
            if c:
                total = total + cast(val, int64) * c
        return total

    def direct_strides(self, op: Operand, mn_var: Var):
        """(stride along m or n, stride along k) of a direct operand, in elements."""
        pos, index = op.direct
        return index.coeff(mn_var), index.coeff(self.spec.k_var)

    def gather_offset(self, op: Operand, bz, gmn, gk) -> Expr:
        """int64 flat offset of a gathered operand's chunk at (batch bz, m|n gmn, k gk)."""
        offset = self._at(op.gather.offset, bz, {self._mn_var(op): gmn, self.spec.k_var: gk})
        return cast(narrow_index(offset) if self._int32_gather(op) else offset, int64)

    def gather_valid(self, op: Operand, bz, gmn, gk) -> Expr:
        """Whether that chunk lies inside the input (not in the padding)."""
        valid = op.gather.valid
        if valid is None:
            return convert(True)
        valid = self._at(valid, bz, {self._mn_var(op): gmn, self.spec.k_var: gk})
        return narrow_index(valid) if self._int32_gather(op) else valid

    def gather_row(self, op: Operand, split: RowSplit, bz, gmn) -> Tuple[Expr, List[Expr]]:
        """A RowSplit's row parts at (batch bz, row gmn): (row offset, the row terms)."""
        at = self.batch_values(bz)
        at[self._mn_var(op)] = gmn
        return self._index(op, self.lower(split.row_offset, at)), [
            self._index(op, self.lower(t, at)) for t in split.row_terms]

    def gather_k(self, op: Operand, split: RowSplit, gk) -> Tuple[Expr, List[Expr]]:
        """A RowSplit's k parts at ``gk``: (k offset, the k side of each condition)."""
        at = {self.spec.k_var: gk}  # (k parts read no input and no batch variable)
        return self._index(op, self.lower(split.k_offset, at)), [
            self._index(op, self.lower(side, at)) for _, _, side in split.conds]

    def index_dtype(self, op: Operand):
        """The type of a gathered operand's index arithmetic."""
        return int32 if self._int32_gather(op) else int64

    def _index(self, op: Operand, e: Expr) -> Expr:
        return narrow_index(e) if self._int32_gather(op) else e

    def _int32_gather(self, op: Operand) -> bool:
        """Whether a gather's index arithmetic fits in int32 (a convolution's: every intermediate value is at
        most the input's size or m, n, k and batch products), so it is done in int32 (cheaper divisions)."""
        spec = self.spec
        sizes = [_prod(spec.task.inputs[op.gather.pos].shape), spec.m * spec.k, spec.n * spec.k, spec.batch]
        return all(isinstance(x, int) for x in sizes) and max(sizes) <= INT32_MAX

    def _mn_var(self, op: Operand) -> Var:
        return self.spec.m_var if op is self.spec.a else self.spec.n_var

    def a_value(self, bz, gm, gk) -> Expr:
        return self._at(self.spec.a.value, bz, {self.spec.m_var: gm, self.spec.k_var: gk})

    def b_value(self, bz, gn, gk) -> Expr:
        return self._at(self.spec.b.value, bz, {self.spec.n_var: gn, self.spec.k_var: gk})

    def epilogue(self, bz, gm, gn, acc, acc_pair=None) -> Expr:
        """The output element at (bz, gm, gn) from the accumulator ``acc`` (and, for a paired epilogue, column gn +
        pair's ``acc_pair``)."""
        at = {self.spec.m_var: gm, self.spec.n_var: gn, self.spec.acc: acc}
        if self.spec.pair:
            at[self.spec.acc_pair] = acc_pair
        return self._at(self.spec.epilogue, bz, at)

    def epilogue_plan(self, lanes: int) -> LanePlan:
        """The epilogue planned for ``lanes`` consecutive outputs along n (the epilogue's vectors): a read
        contiguous along n and aligned is one vector load, a read independent of n one scalar load, any other
        read (a stride along n) one scalar load per lane."""
        return LanePlan(self.spec.epilogue, self.spec.n_var, lanes)

    def vector_reads(self, plan: LanePlan) -> Dict[int, int]:
        """The alignment in bytes that ``plan``'s vector loads need, by input position."""
        pos = {id(t): i for i, t in enumerate(self.spec.task.inputs)}
        return {pos[id(e.tensor)]: copy_lanes(plan.lanes, e.dtype) * e.dtype.nbytes for _, e, _ in plan.vectors}

    def column_vectors(self, plan: LanePlan) -> List[Var]:
        """The placeholders of ``plan``'s vector reads that do not depend on m (per-column vectors: a bias, a batch
        norm's scale and shift): the same for every row of a thread's outputs in one column."""
        return [v for v, _, flat in plan.vectors if not depends_on(flat, [self.spec.m_var])]

    def column_reads(self, plan: LanePlan, bz, gn, cond) -> Tuple[Stmt, Dict[Var, Var]]:
        """The loads of ``plan``'s column vectors for the outputs (bz, any m, gn ..), where ``cond`` holds, issued
        once for all the rows a thread takes in that column; and their register arrays."""
        loads, regs = self._epilogue_loads(plan, self._epilogue_at(bz, ANY_ROW, gn), 'col', self.column_vectors(plan),
                                           broadcasts=False)
        return self._guarded(loads, cond), regs

    def epilogue_reads(self, plan: LanePlan, bz, gm, gn, cond, tag: int,
                       vectors: Optional[List[Var]] = None) -> Tuple[Stmt, Dict[Var, Var]]:
        """``plan``'s reads for the outputs (bz, gm, gn .. gn + lanes - 1), issued ahead of their use: the
        registers declared (scalars named with ``tag``), loaded where ``cond`` holds (the outputs exist); and
        each placeholder's register array or scalar, for vector_epilogue's ``reads``. A thread issues the
        reads of several vectors this way before it stores any, so their latencies overlap: a store between
        two loads would keep them apart (the output may alias an input as far as the compiler knows), and
        GPT-2's residual epilogues at batch 8 (12 vectors a thread) took 7 µs more than the bare GEMM.
        ``vectors``: the vector reads to issue (default: all; the column vectors may be column_reads')."""
        loads, regs = self._epilogue_loads(plan, self._epilogue_at(bz, gm, gn), str(tag), vectors)
        return self._guarded(loads, cond), regs

    @staticmethod
    def _guarded(loads: List[Stmt], cond) -> Stmt:
        """``loads`` (declarations and loads) with the loads under ``cond``, the declarations outside it."""
        decls, work = [], []
        for stmt in loads:
            if isinstance(stmt, Declare):
                decls.append(Declare(stmt.var))
                if stmt.init is not None:
                    work.append(Assign(stmt.var, stmt.init))
            else:
                work.append(stmt)
        if cond is True or not work:  # (True: a static tile whose outputs all exist)
            return Seq(decls + work)
        return Seq(decls + [If(cond, Seq(work))])

    def vector_epilogue(self, plan: LanePlan, bz, gm, gn, stage: Var, stage_index: Expr,
                        reads: Optional[Dict[Var, Var]] = None) -> Stmt:
        """The statements computing and storing the outputs (bz, gm, gn .. gn + lanes - 1), gn a multiple of
        the lanes: the accumulators from ``stage[stage_index ..]`` (float32, 16-byte aligned) and ``plan``'s
        reads by vector loads, its broadcast reads once, the epilogue per lane, one vector store. ``reads``:
        those reads issued already (epilogue_reads)."""
        spec, lanes = self.spec, plan.lanes
        at = self._epilogue_at(bz, gm, gn)
        acc = Var('av', float32, type=TensorType(float32, [lanes], 'register'))
        body = [Declare(acc)] + vector_copies(acc, 0, stage, stage_index, lanes, float32)
        if spec.pair:  # (the second column of each pair, pair columns on)
            acc_pair = Var('apv', float32, type=TensorType(float32, [lanes], 'register'))
            body += [Declare(acc_pair)] + vector_copies(acc_pair, 0, stage, stage_index + spec.pair, lanes, float32)
        regs = reads
        if regs is None:
            loads, regs = self._epilogue_loads(plan, at)
            body += loads
        out_reg = Var('ov', spec.out_dtype, type=TensorType(spec.out_dtype, [lanes], 'register'))
        body.append(Declare(out_reg))
        for j in range(lanes):
            lane = dict(at)
            lane.update({spec.n_var: gn + j, spec.acc: BufferLoad(acc, j, float32)})
            if spec.pair:
                lane[spec.acc_pair] = BufferLoad(acc_pair, j, float32)
            lane.update({v: BufferLoad(reg, j, reg.type.dtype) if reg.type is not None else reg
                         for v, reg in regs.items()})
            body.append(Store(out_reg, j, self.lower(plan.value, lane)))
        body.append(VectorCopy(self.out, self.out_index(bz, gm, gn), out_reg, 0, lanes))
        return Seq(body)

    def _epilogue_at(self, bz, gm, gn) -> Dict[Var, Expr]:
        at = self.batch_values(bz)
        at.update({self.spec.m_var: gm, self.spec.n_var: gn})
        return at

    def _epilogue_loads(self, plan: LanePlan, at: Dict[Var, Expr], scalars: Optional[str] = None,
                        vectors: Optional[List[Var]] = None, broadcasts: bool = True):
        """``plan.load_registers`` at the epilogue's values ``at`` (``scalars``, ``vectors``, ``broadcasts``: see
        there)."""
        return plan.load_registers(lambda e: self.lower(e, at),
                                   lambda flat: merge_divmod(self.lower(flat, at), static_divisors=False),
                                   lambda e: self._params[id(e.tensor)], scalars=scalars, vectors=vectors,
                                   broadcasts=broadcasts)

    def out_index(self, bz, gm, gn) -> Expr:
        return self._at(self.spec.out_index, bz, {self.spec.m_var: gm, self.spec.n_var: gn})

    def _at(self, expr: Expr, bz, values: Dict[Var, Expr]) -> Expr:
        vals = self.batch_values(bz)
        vals.update(values)
        return self.lower(expr, vals)
