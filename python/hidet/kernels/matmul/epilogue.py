"""A GEMM task's epilogue (spec.py's match_gemm): the output's expression with the matmul's reads replaced by the
float32 accumulator, the output axes each of the matmul's dims becomes (split, merged or, for a paired epilogue,
two interleaved columns), and the chain widened to float32 from the accumulator on (``widened``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.dtypes import DataType, float32, int64
from hidet.ir.expr import (APPROX_16BIT, Binary, Call, Cast, Constant, Expr, Select, TensorElement, Unary, Var, cast,
                           same_dim)
from hidet.ir.functors import collect, merge_divmod, rewrite, substitute
from hidet.ir.schedulers.analysis import structural_key
from hidet.ir.task import Task

from .forms import NotGemm, affine, flat_index, inline_except, is_one, magnitude, strip_int_cast


def _piece_of(idx: Expr, out_axes, out_shape, extent: int) -> Optional[Tuple[int, int]]:
    """(output axis, stride) when the anchor's index is ``(o / stride) % extent``, ``o / stride`` or
    ``o % extent`` of one output axis ``o`` (a reshape that merges the anchor's axes), else None."""
    idx = strip_int_cast(idx)
    mod = None
    if isinstance(idx, Binary) and idx.op == '%' and isinstance(strip_int_cast(idx.b), Constant):
        mod, idx = int(strip_int_cast(idx.b).value), strip_int_cast(idx.a)
    stride = 1
    if isinstance(idx, Binary) and idx.op == '/' and isinstance(strip_int_cast(idx.b), Constant):
        stride, idx = int(strip_int_cast(idx.b).value), strip_int_cast(idx.a)
    pos = next((i for i, a in enumerate(out_axes) if a is idx), None)
    if pos is None or stride <= 0 or (mod is None and stride == 1):
        return None
    size = out_shape[pos]
    if mod is None:  # o / stride: the outermost piece
        mod = size // stride if size % stride == 0 else None
    if mod != extent or stride * extent > size:
        return None
    return pos, stride


def _group_of(idx: Expr, out_axes, out_shape, extent: int) -> Optional[List[Tuple[int, int]]]:
    """The output axes one index of the anchor reads, as [(output axis, coefficient)] outer to inner, when
    the index is a mixed-radix number of them (``o0 * 8 + o1`` with o1 < 8: a reshape), else None."""
    form = affine(idx, out_axes)
    if form is None or form.offset != 0:
        return None
    pos = {id(a): i for i, a in enumerate(out_axes)}
    group = sorted(((pos[v], c) for v, c in form.coeffs.items() if not is_one(out_shape[pos[v]])),
                   key=lambda t: -magnitude(t[1]))
    expected = 1
    for o, c in reversed(group):
        if not same_dim(c, expected):
            return None
        expected *= out_shape[o]
    if not same_dim(expected, extent):
        return None
    return group


@dataclass
class Pair:
    """A paired epilogue: output column ``j`` reads the matmul at columns ``c = 2P (j / P) + j % P`` (the epilogue's
    ``acc``) and ``c + P`` (``acc_pair``) of anchor dim ``dim``: two column blocks of width P interleaved (the merged
    gate / up projection of a SwiGLU MLP, merge_sibling_matmuls), so a tile of the matmul whose width is a
    multiple of 2P holds both values of each of its outputs. The GEMM's n then runs over the matmul's columns, the
    epilogue is evaluated at the first column of each pair, and the output is half as wide."""
    dim: int
    width: int  # P
    axis: int   # the output axis j
    second: str  # structural_key of the read at c + P


def _paired_reads(reads: Sequence[TensorElement], out_axes: Sequence[Var], out_shape, anchor_shape
                  ) -> Optional[Pair]:
    """The Pair that two distinct reads of the anchor form, or None (when they are not two)."""
    keys = {}
    for e in reads:
        keys.setdefault(structural_key(e), e)
    if len(keys) != 2:
        return None
    (k0, e0), (k1, e1) = keys.items()
    dims = [d for d, (i0, i1) in enumerate(zip(e0.indices, e1.indices)) if structural_key(i0) != structural_key(i1)]
    if len(dims) != 1:
        return None
    dim = dims[0]
    forms = [_pair_form(merge_divmod(e.indices[dim]), out_axes) for e in (e0, e1)]
    if any(f is None for f in forms) or forms[0][:2] != forms[1][:2]:
        return None
    (axis, width, off0), (_, _, off1) = forms
    if {off0, off1} != {0, width} or anchor_shape[dim] != 2 * out_shape[axis] or out_shape[axis] % width:
        return None
    return Pair(dim, width, axis, k1 if off1 == width else k0)


def _pair_form(idx: Expr, out_axes: Sequence[Var]) -> Optional[Tuple[int, int, int]]:
    """(output axis j, P, offset) when ``idx`` is ``2P (j / P) + j % P + offset`` (P a constant), else None."""
    pieces: Dict[Tuple[int, str], Var] = {}
    found = []

    def piece(e: Expr) -> Optional[Expr]:
        if not (isinstance(e, Binary) and e.op in ('/', '%')):
            return None
        v, c = strip_int_cast(e.a), strip_int_cast(e.b)
        if not (isinstance(c, Constant) and any(v is a for a in out_axes)):
            return None
        found.append((v, int(c.value)))
        return pieces.setdefault((id(v), e.op), Var(f'{v.name}{e.op}{c.value}'))

    form = affine(rewrite(idx, piece), list(pieces.values()))
    if form is None or len(pieces) != 2 or len({(id(v), p) for v, p in found}) != 1:
        return None
    v, width = found[0]
    if form.coeffs != {id(pieces[(id(v), '/')]): 2 * width, id(pieces[(id(v), '%')]): 1} or \
            not isinstance(form.offset, int):
        return None
    return next(i for i, a in enumerate(out_axes) if a is v), width, form.offset


def split_epilogue(task: Task, anchor: TensorNode, r: ReduceCompute, acc: Var, c_vars: Sequence[Var],
              acc_pair: Optional[Var] = None):
    """(value over acc and c_vars, flat output index over c_vars, per anchor dim the output axes it becomes, the
    merge pieces, the Pair or None). Reads of the anchor at two indices are a Pair when ``acc_pair`` is given (the
    second read's value over it)."""
    out = task.outputs[0]
    d = anchor.definition
    # (the matmul's own output dtype, as written; ``widened`` then drops this rounding)
    anchor_value = rewrite(d.value, lambda e: cast(acc, r.dtype) if e is r else None)
    anchor_value = substitute(anchor_value, dict(zip(d.axes, c_vars)))  # anchor's own axes → the GEMM's
    if collect(anchor_value, ReduceCompute) or any(not e.tensor.is_input()
                                                     for e in collect(anchor_value, TensorElement)):
        raise NotGemm('the anchor reads computed tensors around its reduction')
    if out is anchor:
        return (widened(anchor_value, acc), flat_index(c_vars, anchor.shape), [[(i, 1)] for i in range(len(c_vars))],
                {}, None)
    value = inline_except(out.definition.value, anchor)
    reads = [e for e in collect(value, TensorElement) if e.tensor is anchor]
    if not reads:
        raise NotGemm('the output does not read the matmul')
    out_axes = out.definition.axes
    pair = _paired_reads(reads, out_axes, out.shape, anchor.shape) if acc_pair is not None else None
    if pair is not None:  # (the reads mapped as one read at the output's own column: the pair's first)
        first = next(e for e in reads if structural_key(e) != pair.second)
        reads = [TensorElement(first.tensor, [out_axes[pair.axis] if i == pair.dim else x
                                              for i, x in enumerate(first.indices)])]
    # anchor dim → [(output axis, coefficient)]: the dim is a mixed-radix number of output axes (a split);
    # coefficient 0 marks a *merge* piece instead: the dim is (axis / stride) % extent of one output axis
    groups: Optional[List[List[Tuple[int, int]]]] = None
    pieces: Dict[int, int] = {}  # anchor dim of a merge piece → its stride in the output axis
    for e in reads:
        g = []
        for dim, idx in enumerate(e.indices):
            if pair is not None and dim == pair.dim:
                g.append([(pair.axis, 1)])
                continue
            # (a reshape and its inverse — [4096] → [8, 512] → [4096], GPT-2's MLP at batch 8 — read the matmul
            # at ((m / 512) * 512 + m % 512): the same row)
            idx = merge_divmod(idx)
            grp = _group_of(idx, out_axes, out.shape, anchor.shape[dim])
            if grp is None:
                piece = _piece_of(idx, out_axes, out.shape, anchor.shape[dim])
                if piece is None:
                    raise NotGemm('the epilogue reads the matmul at moved indices (not elementwise or a reshape)')
                grp = [(piece[0], 0)]
                if pieces.setdefault(dim, piece[1]) != piece[1]:
                    raise NotGemm('the epilogue reads the matmul at several indices')
            g.append(grp)
        if groups is not None and g != groups:
            raise NotGemm('the epilogue reads the matmul at several indices')
        groups = g
    used = [o for grp in groups for o, c in grp if c != 0] + sorted({o for grp in groups for o, c in grp if c == 0})
    if len(set(used)) != len(used):
        raise NotGemm('the epilogue reads the matmul along one axis twice')
    if any(out.shape[o] != 1 for o in range(len(out_axes)) if o not in used):
        raise NotGemm('the epilogue broadcasts the matmul')
    for o in {o for grp in groups for o, c in grp if c == 0}:  # merge pieces must tile their output axis
        strides = sorted((pieces[d], anchor.shape[d]) for d, grp in enumerate(groups) if grp == [(o, 0)])
        expected = 1
        for stride, extent in strides:
            if not same_dim(stride, expected):
                raise NotGemm('the epilogue merges the matmul\'s axes out of order or with gaps')
            expected *= extent
        if not same_dim(expected, out.shape[o]):
            raise NotGemm('the epilogue merges the matmul\'s axes out of order or with gaps')
    out_vals: List[Expr] = [Constant(0, int64)] * len(out_axes)
    for dim, grp in enumerate(groups):
        if grp and grp[0][1] == 0:  # a merge piece: the output axis sums its pieces
            o = grp[0][0]
            term: Expr = c_vars[dim] if pieces[dim] == 1 else c_vars[dim] * pieces[dim]
            out_vals[o] = term if isinstance(out_vals[o], Constant) else out_vals[o] + term
            continue
        for j, (o, c) in enumerate(grp):
            v: Expr = c_vars[dim]
            if c != 1:
                v = v / c
            if j > 0:
                v = v % out.shape[o]
            out_vals[o] = v
    if pair is not None:  # output column j of matmul column c (a first of its pair): 2P (j / P) + j % P = c
        c, w = c_vars[pair.dim], pair.width
        out_vals[pair.axis] = c / (2 * w) * w + c % w
        second_value = rewrite(anchor_value, lambda e: acc_pair if e is acc else None)

    def anchor_read(e: Expr) -> Optional[Expr]:
        if not (isinstance(e, TensorElement) and e.tensor is anchor):
            return None
        return second_value if pair is not None and structural_key(e) == pair.second else anchor_value

    value = substitute(rewrite(value, anchor_read), dict(zip(out_axes, out_vals)))
    if collect(value, ReduceCompute):
        raise NotGemm('the epilogue has a reduction')
    return widened(value, acc, acc_pair), flat_index(out_vals, out.shape), groups, pieces, pair


DISCRETE_CALLS = ('floor', 'ceil', 'round', 'trunc')  # (functions whose result jumps: see widened)


def widened(value: Expr, acc: Var, acc_pair: Optional[Var] = None) -> Expr:
    """``value`` computed in float32 from the float32 ``acc`` (and ``acc_pair``) on, rounded once, to its own dtype,
    at the end.

    As written, an epilogue rounds the accumulator to the matmul's 16-bit dtype before it adds a bias (and each
    16-bit operation of the chain rounds again); torch's linear and conv2d add their bias to the float32
    accumulator and round once. Here every 16-bit float node that depends on ``acc`` computes in float32 (its
    other operands, a bias or a residual read in 16 bits, are widened exactly), and casts to a 16-bit float
    inside the chain are dropped. Where the chain turns discrete (a comparison, a cast to an integer or a
    boolean, floor / ceil / round / trunc), the value is rounded to its written dtype first, as torch's would
    be: a threshold then flips where torch's does, not where the float32 value crosses it."""
    memo: Dict[int, Tuple[Expr, bool]] = {}

    def narrow(dtype: DataType) -> bool:
        return dtype.is_float() and dtype.bits < 32

    def wide(e: Expr) -> Expr:  # (a constant keeps its written value: GELU's 1/sqrt(2) not rounded to 16 bits)
        if not narrow(e.dtype):
            return e
        return Constant(e.value, float32) if isinstance(e, Constant) else cast(e, float32)

    def as_written(new: Expr, old: Expr) -> Expr:  # (the value rounded to the dtype the chain gave it)
        return cast(new, old.dtype) if narrow(old.dtype) and new.dtype != old.dtype else new

    def visit(e: Expr) -> Tuple[Expr, bool]:  # (the new node, whether it depends on acc)
        if id(e) in memo:
            return memo[id(e)]
        if e is acc or e is acc_pair:
            r = (e, True)
        elif isinstance(e, Cast):
            a, dep = visit(e.a)
            if dep and e.dtype.is_float() and a.dtype.is_float() and e.dtype.bits <= 32:
                r = (wide(a), True)  # a rounding inside the chain: dropped (float32 stays float32)
            elif dep and not e.dtype.is_float():
                r = (Cast(as_written(a, e.a), e.dtype), True)
            else:
                r = (a if a is e.a else Cast(a, e.dtype), dep)
        elif isinstance(e, Binary):
            (a, da), (b, db) = visit(e.a), visit(e.b)
            dep = da or db
            if dep and e.dtype.is_boolean():  # (a comparison: of the values as written)
                r = (Binary(e.op, as_written(a, e.a), as_written(b, e.b), e.dtype), True)
            elif dep and narrow(e.dtype):
                r = (Binary(e.op, wide(a), wide(b), float32), True)
            else:
                r = (e if (a, b) == (e.a, e.b) else Binary(e.op, a, b, e.dtype), dep)
        elif isinstance(e, Unary):
            a, dep = visit(e.a)
            r = (e if a is e.a else Unary(e.op, a), dep)
        elif isinstance(e, Call):
            visited = [visit(x) for x in e.args]
            dep = any(d for _, d in visited)
            args = [x for x, _ in visited]
            if dep and e.func in DISCRETE_CALLS:
                r = (Call(e.func, [as_written(x, o) for x, o in zip(args, e.args)], e.dtype), True)
            elif dep and narrow(e.dtype):  # (a 16-bit tanh or erf keeps its approximate form: APPROX_16BIT)
                r = (Call(APPROX_16BIT.get(e.func, e.func), [wide(x) for x in args], float32), True)
            else:
                r = (e if tuple(args) == e.args else Call(e.func, args, e.dtype), dep)
        elif isinstance(e, Select):
            (c, _), (t, dt), (f, df) = visit(e.cond), visit(e.t), visit(e.f)
            dep = dt or df
            if dep and narrow(e.dtype):
                t, f = wide(t), wide(f)
            r = (e if (c, t, f) == (e.cond, e.t, e.f) else Select(c, t, f), dep)
        else:  # variables, constants, reads of the task's inputs (their indices never read acc)
            r = (e, False)
        memo[id(e)] = r
        return r

    return cast(visit(value)[0], value.dtype)
