"""Vectorized CUDA kernels for injective outputs.

Each thread computes ``V`` consecutive elements of the output's innermost dimension (``V`` × the widest
element vectorized ≤ 16 bytes, ``V`` dividing the innermost extent) and stores them with one vector store.
Each read of an input is classified by how its flat index varies along the innermost output index ``j``:

- independent of ``j`` (broadcast along it): loaded once, as a scalar, for the ``V`` elements;
- ``base + j`` with ``base`` a known multiple of ``V`` (contiguous and aligned): one vector load;
- anything else: one scalar load per element (lane) of the vector: ``base + j`` not known aligned, a read
  only under a condition (a branch of a select, the right of ``&&``: loading a whole vector there could leave
  the tensor, e.g. in pad or concat), a stride other than 1 along ``j`` (a transpose, an NCHW input made
  channels-last: consecutive threads then read consecutive memory of each lane's row, and the store is still
  one vector), an index loaded per element.

Buffers need ``V`` × element-size alignment too: the launcher checks the pointers and runs the scalar
kernel (``Function.fallback``) when one is not aligned (e.g. a torch view at an odd offset).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from hidet.ir.compute import ReduceCompute
from hidet.ir.dtypes import int64
from hidet.ir.expr import (Binary, BufferLoad, Call, Cast, Constant, Expr, Select, TensorElement, Unary, Var, call,
                           is_static)
from hidet.ir.functors import collect, merge_divmod, substitute
from hidet.ir.schedulers.analysis import depends_on, linear, structural_key
from hidet.ir.schedulers.lowering import CUDA_BLOCK, Lowering, flat_index, grid_size, prod, unflatten
from hidet.ir.stmt import Declare, For, Function, Seq, Stmt, Store, VectorCopy
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

    def __init__(self, value: Expr, last: Var, lanes: int):
        self.last, self.lanes = last, lanes
        self.vectors: List[Tuple[Var, TensorElement, Expr]] = []  # (placeholder, read, flat index)
        self.broadcasts: List[Tuple[Var, TensorElement]] = []
        self.keys: Dict[str, Var] = {}
        self.memo: Dict[Tuple[int, bool], Expr] = {}
        self.value = self.visit(value, False)

    def visit(self, e: Expr, conditional: bool) -> Expr:
        key = (id(e), conditional)
        if key not in self.memo:
            self.memo[key] = self._visit(e, conditional)
        return self.memo[key]

    def _visit(self, e: Expr, cond: bool) -> Expr:
        if isinstance(e, (Var, Constant)):
            return e
        if isinstance(e, Binary):
            a, b = self.visit(e.a, cond), self.visit(e.b, cond or e.op in ('&&', '||'))
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
            c, t, f = self.visit(e.cond, cond), self.visit(e.t, True), self.visit(e.f, True)
            return e if (c, t, f) == (e.cond, e.t, e.f) else Select(c, t, f)
        if isinstance(e, TensorElement):
            indices = tuple(self.visit(i, cond) for i in e.indices)
            return self.read(e if indices == e.indices else TensorElement(e.tensor, indices), cond)
        raise NotVectorizable(type(e).__name__)

    def read(self, e: TensorElement, conditional: bool) -> Expr:
        known = self.keys.get(structural_key(e))
        if known is not None:  # read unconditionally already (e.g. in a select's condition)
            return known
        flat = flat_index(e.indices, e.tensor.shape)
        if depends_on(flat, [p for p, _, _ in self.vectors]):  # an index loaded per lane
            return e
        if not depends_on(flat, [self.last]):
            if conditional:
                return e
            return self._placeholder(e, lambda v: self.broadcasts.append((v, e)))
        along = linear(flat, self.last)
        if along is None or along[0] != 1 or conditional or along[1] % self.lanes != 0:
            return e
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
            stmts += [Declare(reg)] + vector_copies(reg, 0, buffer_of(e), lower_index(flat), self.lanes, e.dtype)
            registers[v] = reg
        return stmts, registers

    def _placeholder(self, e: TensorElement, register) -> Var:
        key = structural_key(e)
        if key not in self.keys:
            self.keys[key] = Var(f'x{len(self.keys)}', e.dtype)
            register(self.keys[key])
        return self.keys[key]


def _plan(value: Expr, axes, shape, out_bytes: int) -> Optional[LanePlan]:
    width = shape[-1]
    lanes = VECTOR_BYTES // out_bytes
    while True:
        while lanes > 1 and width % lanes:
            lanes //= 2
        if lanes < 2:
            return None
        try:
            plan = LanePlan(value, axes[-1], lanes)
        except NotVectorizable:
            return None
        widest = max([out_bytes] + [e.dtype.nbytes for _, e, _ in plan.vectors])
        if lanes * widest <= VECTOR_BYTES:
            return plan
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
    plans = [_plan(value, axes, shape, out_param.dtype.nbytes) for out_param, value, axes in outputs]
    if any(plan is None for plan in plans):
        return None
    lanes, numel = min(plan.lanes for plan in plans), prod(shape)
    plans = [plan if plan.lanes == lanes else LanePlan(value, axes[-1], lanes)
             for plan, (_, value, axes) in zip(plans, outputs)]
    q, n0, j = Var('q', int64), Var('n0', int64), Var('j', int64)
    body: List[Stmt] = [Declare(n0, q * lanes)]
    aligned = {}
    for plan, (out_param, _, axes) in zip(plans, outputs):
        body += _vector_of(plan, out_param, axes, shape, n0, j, symbolic, params, lowering, aligned)
    vectors = numel / lanes if symbolic else numel // lanes  # (lanes divides the innermost extent)
    loop = For(q, call('hidet_global_thread_idx', dtype=int64), vectors, call('hidet_global_threads', dtype=int64),
               Seq(body))
    f = Function(name, params, loop, 'cuda', grid=(grid_size(vectors, CUDA_BLOCK),), block=(CUDA_BLOCK,))
    f.aligned = tuple(sorted(aligned.items()))
    return f


def _vector_of(plan: LanePlan, out_param: Var, axes, shape, n0: Var, j: Var, symbolic: bool, params: List[Var],
               lowering: Lowering, aligned: Dict[int, int]) -> List[Stmt]:
    """The statements computing and storing one output's vector at flat index ``n0`` (its lanes by ``j``); the
    alignment its vector accesses need into ``aligned`` (parameter position → bytes)."""
    lanes = plan.lanes
    body: List[Stmt] = []
    base: Dict[Var, Expr] = {}
    for d, idx in enumerate(unflatten(n0, shape)):
        if isinstance(idx, (Var, Constant)) or symbolic:  # (symbolic: whole, for merge_divmod in the reads)
            base[axes[d]] = idx
        else:
            v = Var('w0' if d == len(shape) - 1 else f'i{d}', int64)
            body.append(Declare(v, idx))
            base[axes[d]] = v

    def lower_index(flat: Expr) -> Expr:
        index = lowering.loads(substitute(flat, base))
        return merge_divmod(index) if symbolic else index

    loads, registers = plan.load_registers(lambda e: lowering.loads(substitute(e, base)), lower_index,
                                           lambda e: lowering.params[id(e.tensor)])
    body += loads
    lane_body: List[Stmt] = []
    lane_map: Dict[Var, Expr] = dict(base)
    lane_map[axes[-1]] = base[axes[-1]] + j
    for v, e, _ in plan.vectors:
        aligned[params.index(lowering.params[id(e.tensor)])] = lanes * e.dtype.nbytes
        lane_var = Var(f'{v.name}_lane', e.dtype)
        lane_body.append(Declare(lane_var, BufferLoad(registers[v], j, e.dtype)))
        lane_map[v] = lane_var
    out_reg = Var('y_vec', out_param.dtype, type=TensorType(out_param.dtype, [lanes], 'register'))
    lane_body.append(Store(out_reg, j, lowering.loads(substitute(plan.value, lane_map))))
    body += [Declare(out_reg), For(j, 0, lanes, 1, Seq(lane_body), kind='unroll'),
             VectorCopy(out_param, n0, out_reg, 0, lanes)]
    aligned[params.index(out_param)] = lanes * out_param.dtype.nbytes
    return body
