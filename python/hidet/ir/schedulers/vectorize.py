"""Vectorized CUDA kernels for injective outputs.

Each thread computes ``V`` consecutive elements of the output's innermost dimension (``V`` × the widest
element vectorized ≤ 16 bytes, ``V`` dividing the innermost extent) and stores them with one vector store.
Each read of an input is classified by how its flat index varies along the innermost output index ``j``:

- independent of ``j`` (broadcast along it): loaded once, as a scalar, for the ``V`` elements;
- ``base + j`` with ``base`` a known multiple of ``V`` (contiguous and aligned): one vector load;
- a contiguous, aligned read only under a condition that is the same for every lane (a select's condition
  independent of ``j`` and of loaded values: a pooling window's position inside the input, a padding of an
  outer dimension): one vector load under that condition (``if (valid) load``), so it never leaves the tensor;
- anything else: one scalar load per element (lane) of the vector: ``base + j`` not known aligned, a read
  only under a condition that varies by lane (a select on ``j``, the right of ``&&``: loading a whole vector
  there could leave the tensor, e.g. in pad or concat along ``j``), a stride other than 1 along ``j`` (a
  transpose, an NCHW input made channels-last: consecutive threads then read consecutive memory of each lane's
  row, and the store is still one vector), an index loaded per element.

Small reductions over many outputs (a window of at most auto.SMALL_REDUCE elements) whose reads are
contiguous along the output's innermost dimension (channels-last pooling and depthwise convolutions)
vectorize the same way (``vectorized_small_reductions``): each thread keeps ``V`` accumulators and reads each
window position's ``V`` channels with one guarded vector load.

Buffers need ``V`` × element-size alignment too: the launcher checks the pointers and runs the scalar
kernel (``Function.fallback``) when one is not aligned (e.g. a torch view at an odd offset).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from hidet.ir.compute import ReduceCompute
from hidet.ir.dtypes import int64
from hidet.ir.expr import (Binary, BufferLoad, Call, Cast, Constant, Expr, Select, TensorElement, Unary, Var, call,
                           is_static, logical_and, logical_not)
from hidet.ir.functors import collect, merge_divmod, rewrite, substitute
from hidet.ir.schedulers.analysis import depends_on, linear, structural_key
from hidet.ir.schedulers.lowering import (CUDA_BLOCK, Lowering, flat_index, grid_size, prod, reduce_combine,
                                          reduce_init, reduce_result, top_reduces, unflatten)
from hidet.ir.stmt import Declare, For, Function, If, Seq, Stmt, Store, VectorCopy
from hidet.ir.type import TensorType

VECTOR_BYTES = 16


def copy_lanes(lanes: int, dtype) -> int:
    """Elements of ``dtype`` per vector access of ``lanes`` of them: all, or 16 bytes' worth (the widest access)."""
    return min(lanes, max(1, VECTOR_BYTES // dtype.nbytes))


def vector_copies(dst: Var, dst_index, src: Var, src_index, lanes: int, dtype) -> List[Stmt]:
    """``lanes`` consecutive elements of ``dtype`` copied from ``src[src_index ..]`` to ``dst[dst_index ..]`` by
    accesses of at most 16 bytes (buffers or register arrays; both sides aligned to the access)."""
    step = copy_lanes(lanes, dtype)
    return [VectorCopy(dst, dst_index + q if q else dst_index, src, src_index + q if q else src_index, step)
            for q in range(0, lanes, step)]


class NotVectorizable(Exception):
    """A value that no vector plan takes (an expression the plan does not know, such as a reduction)."""


class LanePlan:
    """A value computed for ``lanes`` consecutive values of ``last`` (one vector of outputs), with its vector reads
    replaced by lane placeholders and its broadcast reads by scalars loaded once (also the matmul templates'
    epilogues: hidet.kernels.matmul.values); any other read is one scalar load per lane."""

    def __init__(self, value: Expr, last: Var, lanes: int, guarded: bool = False):
        self.last, self.lanes = last, lanes
        self.vectors: List[Tuple[Var, TensorElement, Expr]] = []  # (placeholder, read, flat index)
        self.broadcasts: List[Tuple[Var, TensorElement]] = []
        # ``guarded``: a vector read under selects whose conditions are the same for every lane is loaded under
        # them (placeholder -> the conditions); else such reads go per lane (the matmul epilogues)
        self.guarded = guarded
        self.guards: Dict[int, Tuple[Expr, ...]] = {}
        self.keys: Dict[str, Var] = {}
        self.memo: Dict[Tuple[int, object], Expr] = {}
        self.held: List[Tuple[Expr, ...]] = []
        self.value = self.visit(value, False)

    def visit(self, e: Expr, cond) -> Expr:
        """``e`` planned; ``cond``: False (read unconditionally), True (under a condition that may vary by lane)
        or the tuple of lane-uniform conditions it is read under."""
        key = (id(e), cond if isinstance(cond, bool) else tuple(id(c) for c in cond))
        if key not in self.memo:
            if not isinstance(cond, bool):
                self.held.append(cond)  # (alive while the plan is: its ids key the memo)
            self.memo[key] = self._visit(e, cond)
        return self.memo[key]

    def _uniform(self, c: Expr) -> bool:
        """Whether condition ``c`` is the same for every lane and computed without loads."""
        return not depends_on(c, [self.last]) and not collect(c, TensorElement)

    def _visit(self, e: Expr, cond) -> Expr:
        if isinstance(e, (Var, Constant)):
            return e
        if isinstance(e, Binary):
            a, b = self.visit(e.a, cond), self.visit(e.b, True if e.op in ('&&', '||') else cond)
            return e if (a, b) == (e.a, e.b) else Binary(e.op, a, b, e.dtype)
        if isinstance(e, Unary):
            a = self.visit(e.a, cond)
            return e if a is e.a else Unary(e.op, a)
        if isinstance(e, Cast):
            a = self.visit(e.a, cond)
            return e if a is e.a else Cast(a, e.dtype)
        if isinstance(e, Call):
            args = tuple(self.visit(a, cond) for a in e.args)
            return e if args == e.args else Call(e.func, args, e.dtype)
        if isinstance(e, Select):
            c = self.visit(e.cond, cond)
            if self.guarded and cond is not True and self._uniform(e.cond):
                outer = cond or ()
                t, f = self.visit(e.t, outer + (e.cond,)), self.visit(e.f, outer + (logical_not(e.cond),))
            else:
                t, f = self.visit(e.t, True), self.visit(e.f, True)
            return e if (c, t, f) == (e.cond, e.t, e.f) else Select(c, t, f)
        if isinstance(e, TensorElement):
            indices = tuple(self.visit(i, cond) for i in e.indices)
            return self.read(e if indices == e.indices else TensorElement(e.tensor, indices), cond)
        raise NotVectorizable(type(e).__name__)

    def read(self, e: TensorElement, cond) -> Expr:
        known = self.keys.get(structural_key(e))
        if known is not None:  # read unconditionally already (e.g. in a select's condition)
            return known
        flat = flat_index(e.indices, e.tensor.shape)
        if depends_on(flat, [p for p, _, _ in self.vectors]):  # an index loaded per lane
            return e
        if not depends_on(flat, [self.last]):
            if cond:
                return e
            return self._placeholder(e, lambda v: self.broadcasts.append((v, e)))
        along = linear(flat, self.last)
        if along is None or along[0] != 1 or cond is True or along[1] % self.lanes != 0:
            return e
        if cond:  # under lane-uniform conditions: loaded under them, a placeholder of its own
            key = structural_key(e) + ' if ' + ' && '.join(structural_key(c) for c in cond)
            if key not in self.keys:
                self.keys[key] = v = Var(f'x{len(self.keys)}', e.dtype)
                self.vectors.append((v, e, flat))
                self.guards[id(v)] = cond
            return self.keys[key]
        return self._placeholder(e, lambda v: self.vectors.append((v, e, flat)))

    def load_registers(self, lower: Callable[[Expr], Expr], lower_index: Callable[[Expr], Expr],
                       buffer_of: Callable[[TensorElement], Var], scalars: Optional[str] = None,
                       vectors: Optional[List[Var]] = None, broadcasts: bool = True
                       ) -> Tuple[List[Stmt], Dict[Var, Var]]:
        """The statements loading the plan's reads for one vector of outputs (its base indices in ``lower``, which
        lowers an expression of the value's variables; ``lower_index`` lowers a flat index): each broadcast read
        declared as its scalar placeholder, each vector read loaded into a register array of the lanes (16-byte
        accesses); and the register array of each vector placeholder. ``scalars``: each broadcast read declared
        as a scalar of its own instead, named with this suffix (several vectors' reads in one scope), and given
        in the result as its placeholder's value. ``vectors``: the vector reads to load (default: all);
        ``broadcasts``: whether to load the broadcast reads."""
        registers: Dict[Var, Var] = {}
        stmts: List[Stmt] = []
        for v, e in self.broadcasts if broadcasts else []:
            var = v if scalars is None else Var(f'{v.name}_{scalars}', e.dtype)
            stmts.append(Declare(var, lower(e)))
            if scalars is not None:
                registers[v] = var
        for v, e, flat in self.vectors:
            if vectors is not None and not any(v is w for w in vectors):
                continue
            reg = Var(f'{v.name}_vec', e.dtype, type=TensorType(e.dtype, [self.lanes], 'register'))
            copies = vector_copies(reg, 0, buffer_of(e), lower_index(flat), self.lanes, e.dtype)
            guards = self.guards.get(id(v))
            if guards:  # (the lanes are read only where the guards hold: a select takes the other branch else)
                copies = [If(lower(logical_and(*guards)), Seq(copies))]
            stmts += [Declare(reg)] + copies
            registers[v] = reg
        return stmts, registers

    def _placeholder(self, e: TensorElement, register) -> Var:
        key = structural_key(e)
        if key not in self.keys:
            self.keys[key] = Var(f'x{len(self.keys)}', e.dtype)
            register(self.keys[key])
        return self.keys[key]


def _plans(values: List[Expr], last: Var, width: int, out_bytes: int, max_lanes: int = VECTOR_BYTES
           ) -> Optional[List[LanePlan]]:
    """Plans of ``values`` in the lanes they all allow (as many as fill 16 bytes of the output and of the widest
    vector read, dividing ``width``, at most ``max_lanes``), or None."""
    lanes = min(VECTOR_BYTES // out_bytes, max_lanes)
    while True:
        while lanes > 1 and width % lanes:
            lanes //= 2
        if lanes < 2:
            return None
        try:
            plans = [LanePlan(value, last, lanes, guarded=True) for value in values]
        except NotVectorizable:
            return None
        widest = max([out_bytes] + [e.dtype.nbytes for plan in plans for _, e, _ in plan.vectors])
        if lanes * widest <= VECTOR_BYTES:
            return plans
        lanes = VECTOR_BYTES // widest


def vectorized_outputs(name: str, params: List[Var], outputs: List[Tuple[Var, Expr, list]], shape,
                       lowering: Lowering) -> Optional[Function]:
    """One vectorized kernel computing injective ``outputs`` ((parameter, value, axes) of one ``shape``) at each
    vector of elements, in vectors of the lanes they all allow; None where a read of one does not allow any.
    Symbolic outer dimensions are fine (the innermost extent is static): the grid then comes from the dims."""
    symbolic = not all(is_static(s) for s in shape)
    if not shape or not is_static(shape[-1]) or (not symbolic and prod(shape) == 0) or \
            any(collect(value, ReduceCompute) for _, value, _ in outputs):
        return None
    plans = [_plans([value], axes[-1], shape[-1], out_param.dtype.nbytes) for out_param, value, axes in outputs]
    if any(plan is None for plan in plans):
        return None
    lanes = min(plan[0].lanes for plan in plans)
    plans = [plan[0] if plan[0].lanes == lanes else LanePlan(value, axes[-1], lanes, guarded=True)
             for plan, (_, value, axes) in zip(plans, outputs)]
    q, n0, j = Var('q', int64), Var('n0', int64), Var('j', int64)
    body: List[Stmt] = [Declare(n0, q * lanes)]
    aligned = {}
    for plan, (out_param, _, axes) in zip(plans, outputs):
        declares, base = _bases(n0, axes, shape, symbolic)
        body += declares + _vector_of(plan, out_param, base, axes[-1], n0, j, symbolic, params, lowering, aligned)
    return _vector_loop(name, params, body, q, prod(shape), lanes, symbolic, aligned)


def vectorized_small_reductions(name: str, params: List[Var], out_param: Var, value: Expr, axes, shape,
                                lowering: Lowering, min_threads: int = 1) -> Optional[Function]:
    """The kernel of an output reading small reductions (auto.SMALL_REDUCE elements at most, none nested in
    another, static extents) in vectors of consecutive outputs of the innermost dimension: per reduction, a
    thread keeps a vector of accumulators and at each reduced position (an unrolled loop) reads the term's
    vector reads with one load each, guarded where the term reads under the window's bounds (channels-last
    pooling: ``V`` channels of a window position in one 16-byte load, where a thread per output read 2 bytes
    at a time). None where no term reads a vector (an NCHW window: its reads stride along the output) or a
    value does not vectorize. ``min_threads``: vectors of fewer lanes where the outputs are few, so that at least
    as many threads run as that (2 lanes at least; else None)."""
    reduces = top_reduces(value)
    if not shape or not all(is_static(s) for s in shape) or prod(shape) == 0 or not reduces or \
            any(collect(r.value, ReduceCompute) or not all(is_static(s) for s in r.shape) for r in reduces):
        return None
    accs = [Var(f'acc{i}', r.acc_dtype) for i, r in enumerate(reduces)]
    outer = rewrite(value, lambda e: None, {id(r): reduce_result(r, acc) for r, acc in zip(reduces, accs)})
    max_lanes = VECTOR_BYTES
    while max_lanes > 1 and prod(shape) // max_lanes < min_threads:
        max_lanes //= 2
    plans = _plans([outer] + [r.value for r in reduces], axes[-1], shape[-1], out_param.dtype.nbytes, max_lanes)
    if plans is None or not any(plan.vectors for plan in plans[1:]):
        return None
    lanes = plans[0].lanes
    q, n0, j, k = Var('q', int64), Var('n0', int64), Var('j', int64), Var('k', int64)
    body: List[Stmt] = [Declare(n0, q * lanes)]
    declares, base = _bases(n0, axes, shape, False)
    body += declares
    aligned: Dict[int, int] = {}
    acc_lanes: Dict[Var, Expr] = {}
    for i, (r, acc, plan) in enumerate(zip(reduces, accs, plans[1:])):
        acc_vec = Var(f'acc{i}_vec', r.acc_dtype, type=TensorType(r.acc_dtype, [lanes], 'register'))
        at = dict(base)
        at.update(zip(r.axes, unflatten(k, r.shape)))
        loads, lane_stmts, lane_map = _lanes(plan, at, axes[-1], j, False, params, lowering, aligned)
        term = lowering.loads(substitute(plan.value, lane_map))
        lane_stmts.append(Store(acc_vec, j, reduce_combine(r.kind, BufferLoad(acc_vec, j, r.acc_dtype), term)))
        body += [Declare(acc_vec),
                 For(j, 0, lanes, 1, Store(acc_vec, j, reduce_init(r.kind, r.acc_dtype)), kind='unroll'),
                 For(k, 0, prod(r.shape), 1, Seq(loads + [For(j, 0, lanes, 1, Seq(lane_stmts), kind='unroll')]),
                     kind='unroll')]
        acc_lanes[acc] = BufferLoad(acc_vec, j, r.acc_dtype)
    body += _vector_of(plans[0], out_param, base, axes[-1], n0, j, False, params, lowering, aligned, acc_lanes)
    return _vector_loop(name, params, body, q, prod(shape), lanes, False, aligned)


def _vector_loop(name: str, params: List[Var], body: List[Stmt], q: Var, numel, lanes: int, symbolic: bool,
                 aligned: Dict[int, int]) -> Function:
    """The grid-stride loop of ``body`` over the vectors ``q`` of ``numel`` outputs (``lanes`` dividing the
    innermost extent)."""
    vectors = numel / lanes if symbolic else numel // lanes
    loop = For(q, call('hidet_global_thread_idx', dtype=int64), vectors, call('hidet_global_threads', dtype=int64),
               Seq(body))
    f = Function(name, params, loop, 'cuda', grid=(grid_size(vectors, CUDA_BLOCK),), block=(CUDA_BLOCK,))
    f.aligned = tuple(sorted(aligned.items()))
    return f


def _bases(n0: Var, axes, shape, symbolic: bool) -> Tuple[List[Stmt], Dict[Var, Expr]]:
    """The declarations of the output axes' indices at flat index ``n0``, and the axes' values there."""
    declares: List[Stmt] = []
    base: Dict[Var, Expr] = {}
    for d, idx in enumerate(unflatten(n0, shape)):
        if isinstance(idx, (Var, Constant)) or symbolic:  # (symbolic: whole, for merge_divmod in the reads)
            base[axes[d]] = idx
        else:
            v = Var('w0' if d == len(shape) - 1 else f'i{d}', int64)
            declares.append(Declare(v, idx))
            base[axes[d]] = v
    return declares, base


def _lanes(plan: LanePlan, at: Dict[Var, Expr], last: Var, j: Var, symbolic: bool, params: List[Var],
           lowering: Lowering, aligned: Dict[int, int]) -> Tuple[List[Stmt], List[Stmt], Dict[Var, Expr]]:
    """(the statements loading ``plan``'s reads with its variables at ``at``, the statements of lane ``j``
    declaring its elements of the vector reads, the map taking the plan's value to lane ``j``'s); the alignment
    its vector reads need into ``aligned`` (parameter position → bytes)."""
    def lower_index(flat: Expr) -> Expr:
        index = lowering.loads(substitute(flat, at))
        return merge_divmod(index) if symbolic else index

    loads, registers = plan.load_registers(lambda e: lowering.loads(substitute(e, at)), lower_index,
                                           lambda e: lowering.params[id(e.tensor)])
    lane_stmts: List[Stmt] = []
    lane_map: Dict[Var, Expr] = dict(at)
    lane_map[last] = at[last] + j
    for v, e, _ in plan.vectors:
        aligned[params.index(lowering.params[id(e.tensor)])] = plan.lanes * e.dtype.nbytes
        lane_var = Var(f'{v.name}_lane', e.dtype)
        lane_stmts.append(Declare(lane_var, BufferLoad(registers[v], j, e.dtype)))
        lane_map[v] = lane_var
    return loads, lane_stmts, lane_map


def _vector_of(plan: LanePlan, out_param: Var, base: Dict[Var, Expr], last: Var, n0: Var, j: Var, symbolic: bool,
               params: List[Var], lowering: Lowering, aligned: Dict[int, int],
               extra: Optional[Dict[Var, Expr]] = None) -> List[Stmt]:
    """The statements computing and storing one output's vector at flat index ``n0`` (its lanes by ``j``; its
    axes at ``base``, ``extra``: other variables' values in lane ``j``); the alignment its vector accesses need
    into ``aligned`` (parameter position → bytes)."""
    loads, lane_body, lane_map = _lanes(plan, base, last, j, symbolic, params, lowering, aligned)
    lane_map.update(extra or {})
    out_reg = Var('y_vec', out_param.dtype, type=TensorType(out_param.dtype, [plan.lanes], 'register'))
    lane_body.append(Store(out_reg, j, lowering.loads(substitute(plan.value, lane_map))))
    aligned[params.index(out_param)] = plan.lanes * out_param.dtype.nbytes
    return loads + [Declare(out_reg), For(j, 0, plan.lanes, 1, Seq(lane_body), kind='unroll'),
                    VectorCopy(out_param, n0, out_reg, 0, plan.lanes)]
