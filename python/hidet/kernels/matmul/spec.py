"""Splitting a task at its matmul: prologue(s) → anchor → epilogue, generically.

A task is a GEMM when its output is computed from one *anchor* tensor ``C`` whose definition holds the
only reduction of the task: a ``sum`` over one axis ``k`` of ``a * b``. After inlining the other computed
tensors (the prologues: casts, transposes, elementwise ops before the matmul), ``a`` and ``b`` are
expressions of the task's inputs; ``C``'s axes split into

- the **m** axis (``a`` alone depends on it), the **n** axis (``b`` alone), at most one each;
- **batch** axes (the rest; an operand that does not depend on one is broadcast along it).

The **epilogue** (epilogue.py) is the output's expression with the reads of ``C`` replaced by the accumulator: it
must read ``C`` at the output's own indices (an elementwise epilogue: bias, activation, residual add, cast;
size-1 dimensions may be added or dropped), so each element of ``C`` gives one output element, or at two
interleaved columns (a paired epilogue: epilogue.Pair).

An operand read straight from an input tensor of the MMA dtype at an affine index (``A[b, i, k]``,
``W[j, k]`` through a transpose, ``W[o, c, kh, kw]`` with k folded from (c, kh, kw)) is *direct*: the
template copies it with cp.async. An implicit GEMM's input read through a window
(``select(valid, X[n, ih, iw, c], 0)`` in channels-last, c innermost in k, a multiple of 8 channels) is
*gathered*: each 8 consecutive k are 8 consecutive elements, all inside or all outside the padding, so the
template still copies 16 bytes at a time, from an address and a predicate computed per chunk. Any other
elementwise prologue is evaluated per element by the template (*computed*). A prologue with a reduction, an epilogue
that moves elements around, several outputs or operands of other dtypes than asked for (float32 only
where TF32 is allowed) make ``match_gemm`` raise NotGemm (the auto-scheduler runs the task instead);
``explain`` says why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.dtypes import DataType, float32, int64
from hidet.ir.expr import Binary, Constant, Expr, Select, SymbolVar, TensorElement, Var, same_dim, simplify_dim
from hidet.ir.functors import collect, conjuncts, inline_computes, merge_divmod, rewrite, substitute
from hidet.ir.schedulers.analysis import known_multiple
from hidet.ir.task import Task

from .epilogue import split_epilogue
from .forms import Affine, NotGemm, affine, flat_index, strip_cast, strip_int_cast

MMA_DTYPES = ('float16', 'bfloat16')
MAX_GRID_YZ = 65535


@dataclass
class Operand:
    """One GEMM operand as a function of (batch vars, mn var, k var)."""
    name: str                 # 'a' or 'b'
    value: Expr               # over the task's inputs (TensorElements of task.inputs)
    direct: Optional[Tuple[int, Affine]] = None  # (task input index, affine flat index) when a plain read
    k_major: bool = True      # shared-memory layout: k contiguous (else m/n contiguous)
    vector_ok: bool = False   # direct and aligned for 16-byte cp.async along the contiguous dimension
    gather: Optional['Gather'] = None  # k-major chunks of 8 copied from computed addresses

    @property
    def mode(self) -> str:
        return 'direct' if self.vector_ok else 'gather' if self.gather is not None else 'computed'


@dataclass
class Gather:
    """A gathered operand: the chunk of 8 elements at (batch vars, m|n, k) with k % 8 == 0 starts at flat
    element ``offset`` of task input ``pos`` (a multiple of 8), and is all zeros where ``valid`` is false."""
    pos: int
    offset: Expr
    valid: Optional[Expr]
    window: Optional['ConvWindow'] = None  # a 2-D convolution's input read through its window


@dataclass(frozen=True)
class ConvWindow:
    """A gathered operand that is a 2-D convolution's channels-last input ``X[n, h, w, c]`` read through its
    window: rows m = (n, oh, ow) row-major, k = (kh, kw, c) row-major, the element
    ``X[n, oh * sh - ph + kh * dh, ow * sw - pw + kw * dw, c]``, zero outside X. TMA's im2col mode copies
    such tiles (mma.py); an output or window dimension of size 1 has stride / dilation 1."""
    input: Tuple[int, int, int, int]  # n, h, w, c
    out: Tuple[int, int]  # oh, ow
    kernel: Tuple[int, int]  # kh, kw
    stride: Tuple[int, int]
    padding: Tuple[int, int]
    dilation: Tuple[int, int]


@dataclass
class GemmSpec:
    task: Task
    batch_shape: Tuple[int, ...]
    m: int
    n: int
    k: int
    batch_vars: Tuple[Var, ...]
    m_var: Var
    n_var: Var
    k_var: Var
    a: Operand
    b: Operand
    mma_dtype: DataType
    acc: Var                  # the float32 accumulator in ``epilogue``
    epilogue: Expr            # the output element, over (acc, batch vars, m, n) and the task's inputs
    out_index: Expr           # the flat output index, over (batch vars, m, n)
    out_dtype: DataType
    out_n_contiguous: bool    # consecutive n are consecutive output elements (vectorized stores)
    notes: List[str] = field(default_factory=list)
    merged_epilogue: bool = False  # the epilogue merges C's axes (permute + reshape: heads x dim → hidden)
    # consecutive m are consecutive output elements along the output's innermost axis: a transposed output (a
    # channels-last convolution's written back NCHW), whose epilogue threads walk m so their stores coalesce
    out_m_contiguous: bool = False
    # a paired epilogue (epilogue.Pair): outputs at the matmul's columns n with n % (2 pair) < pair, each from ``acc``
    # (column n) and ``acc_pair`` (column n + pair); 0: one output per column
    pair: int = 0
    acc_pair: Optional[Var] = None

    @property
    def batch(self) -> int:
        n = 1
        for s in self.batch_shape:
            n *= s
        return n

    def shape_text(self) -> str:
        b = f'{self.batch}x' if self.batch > 1 else ''
        return f'{b}{self.m}x{self.n}x{self.k}'


def _anchor(task: Task) -> Tuple[TensorNode, ReduceCompute]:
    if len(task.outputs) != 1:
        raise NotGemm('the task has several outputs')
    out = task.outputs[0]
    reduces = collect(out, ReduceCompute)
    if len(reduces) != 1:
        raise NotGemm(f'the task has {len(reduces)} reductions, not one')
    r = reduces[0]
    anchors = [t for t in collect(out, TensorNode) if not t.is_input() and any(x is r for x in collect(
        t.definition.value, ReduceCompute))]
    # the innermost tensor whose definition holds the reduction
    anchor = [t for t in anchors if not any(e.tensor in anchors and e.tensor is not t
                                            for e in collect(t.definition.value, TensorElement))]
    if len(anchor) != 1:
        raise NotGemm('the reduction is not defined by one tensor')
    return anchor[0], r


def _operand(name: str, value: Expr, task: Task, batch_vars, axes: Sequence[Tuple[Var, int]], mn_var: Var,
             fold: Dict[Var, Expr], k_var: Var, mn: int, k: int, mma_dtype: DataType, raw: Expr,
             k_axes: Sequence[Tuple[Var, int]], k_fold: Dict[Var, Expr]) -> Operand:
    """``value`` reads the operand over the anchor's ``axes`` (its m or n axes, outer to inner, folded into
    ``mn_var`` by ``fold``) and ``k_var``; ``raw`` is the same over the reduction's own ``k_axes`` (outer to
    inner, folded into ``k_var`` by ``k_fold``)."""
    op = Operand(name, substitute(value, fold) if fold else value)
    inner = strip_cast(raw)
    if isinstance(inner, TensorElement) and inner.tensor.is_input() and inner.tensor.dtype == mma_dtype:
        index = affine(merge_divmod(flat_index(inner.indices, inner.tensor.shape)),  # (a reshape's k / 64, k % 64)
                       list(batch_vars) + [v for v, _ in axes] + [v for v, _ in k_axes])
        index = _fold_affine(index, axes, mn_var) if index is not None else None
        index = _fold_affine(index, k_axes, k_var) if index is not None else None
        if index is not None:
            pos = next(i for i, t in enumerate(task.inputs) if t is inner.tensor)
            op.direct = (pos, index)
            sk, smn = index.coeff(k_var), index.coeff(mn_var)
            others = [index.coeff(v) for v in batch_vars] + [index.offset]
            if sk == 1 and k % 8 == 0 and (smn % 8 == 0 or mn == 1):
                op.k_major, op.vector_ok = True, all(s % 8 == 0 for s in others)
            elif smn == 1 and mn % 8 == 0 and (sk % 8 == 0 or k == 1):
                op.k_major, op.vector_ok = False, all(s % 8 == 0 for s in others)
            else:
                op.k_major = not (smn == 1 and sk != 1)
            return op
    op.gather = _gather(inner, task, batch_vars, axes, k_axes, {**fold, **k_fold}, mma_dtype)
    if op.gather is not None:
        return op
    # computed: lay it out along the dimension its largest read is contiguous in
    reads = [e for e in collect(value, TensorElement) if e.tensor.is_input()]
    if reads and axes:
        main = max(reads, key=lambda e: (e.tensor.dtype.nbytes * _static_numel(e.tensor.shape)))
        index = affine(flat_index(main.indices, main.tensor.shape), list(batch_vars) + [v for v, _ in axes] + [k_var])
        if index is not None and index.coeff(axes[-1][0]) == 1 and index.coeff(k_var) != 1:
            op.k_major = False
    return op


def _gather(value: Expr, task: Task, batch_vars, axes, k_axes, folds: Dict[Var, Expr], mma_dtype: DataType
            ) -> Optional[Gather]:
    """The Gather of ``value`` (over the unfolded axes) when it is ``[select(valid, ]X[index][, 0)]`` with the
    index affine in the axes, in pieces ``k / c``, ``k % c`` of the innermost k axis (c a multiple of 8: a
    reshape that merged heads x head_dim into k) and in pieces ``v / d``, ``v % d`` of the other axes (rows
    flattened over a permute: ``m / seq``, ``m % seq``), moving by 1 along that axis (k or a ``k % c``) and by
    multiples of 8 along every other (and its offset a multiple of 8), the innermost k extent a multiple of 8,
    and ``valid`` not depending on that axis: then each 8 consecutive k (from a multiple of 8) are 8
    consecutive elements."""
    valid = None
    if isinstance(value, Select):
        f = strip_cast(value.f)
        if not (isinstance(f, Constant) and float(f.value) == 0.0):
            return None
        valid, value = value.cond, strip_cast(value.t)
    if not (isinstance(value, TensorElement) and value.tensor.is_input() and value.tensor.dtype == mma_dtype):
        return None
    if not k_axes or k_axes[-1][1] % 8:
        return None
    inner_k = k_axes[-1][0]
    flat = flat_index(value.indices, value.tensor.shape)
    # variables standing for k / c, k % c (c a multiple of 8), and for v / d, v % d of the other axes (any d:
    # constant along a chunk, as its axis is), keyed by (variable, op, divisor)
    pieces: Dict[Tuple[int, str, str], Var] = {}
    others = {id(v) for v in list(batch_vars) + [v for v, _ in axes] + [v for v, _ in k_axes[:-1]]}

    def piece(e: Expr) -> Optional[Expr]:
        if not (isinstance(e, Binary) and e.op in ('/', '%')):
            return None
        v, c = strip_int_cast(e.a), strip_int_cast(e.b)
        if v is inner_k and not (isinstance(c, Constant) and int(c.value) > 0 and int(c.value) % 8 == 0):
            return None
        if v is inner_k or (id(v) in others and all(isinstance(x, SymbolVar) for x in collect(c, Var))):
            return pieces.setdefault((id(v), e.op, repr(c)), Var(f'{v.name}{e.op}{c!r}'))
        return None

    split = rewrite(flat, piece)
    moving = [inner_k] + [p for (v, op, _), p in pieces.items() if v == id(inner_k) and op == '%']  # step 1
    form = affine(split, list(batch_vars) + [v for v, _ in axes] + [v for v, _ in k_axes] + list(pieces.values()))
    if form is None or not _multiple_of(form.offset, 8):
        return None
    step = simplify_dim(sum(form.coeff(v) for v in moving))
    if not (isinstance(step, int) and step == 1):
        return None
    if any(not _multiple_of(c, 8) for v, c in form.coeffs.items() if v not in {id(x) for x in moving}):
        return None
    if valid is not None and any(x is inner_k for x in collect(valid, Var)):
        return None
    pos = next(i for i, t in enumerate(task.inputs) if t is value.tensor)
    window = _conv_window(value, valid, batch_vars, axes, k_axes)
    return Gather(pos, substitute(flat, folds), None if valid is None else substitute(valid, folds), window)


def _conv_window(x: TensorElement, valid: Optional[Expr], batch_vars, axes, k_axes) -> Optional[ConvWindow]:
    """The ConvWindow of a gathered read ``x`` (over the unfolded m ``axes`` and ``k_axes``, outer to inner)
    under ``valid``, or None: x reads a static [n, h, w, c] input at (n, oh * sh - ph + kh * dh,
    ow * sw - pw + kw * dw, c) where (n, oh, ow) are the m axes and (kh, kw, c) the k axes in that order (those
    of size 1 absent), and ``valid`` is nothing but bounds tests of the two spatial indices."""
    shape = x.tensor.shape
    if batch_vars or len(shape) != 4 or not all(isinstance(s, int) for s in shape):
        return None
    m_vars, k_vars = [v for v, _ in axes], [v for v, _ in k_axes]
    extent = {id(v): e for v, e in list(axes) + list(k_axes)}
    forms = [affine(i, m_vars + k_vars) for i in x.indices]
    if any(f is None or not all(isinstance(c, int) for c in f.coeffs.values()) or not isinstance(f.offset, int)
           for f in forms):
        return None
    by_id = {id(v): v for v in m_vars + k_vars}

    def single(form, allowed) -> Optional[Tuple[Optional[Var], int]]:
        """(the one variable of ``allowed`` in ``form`` or None, its coefficient), or None if two."""
        found = [(by_id[k], c) for k, c in form.coeffs.items() if any(k == id(v) for v in allowed)]
        return found[0] if len(found) == 1 else (None, 1) if not found else None

    n, h, w, c = shape
    fn, fh, fw, fc = forms
    if fn.offset != 0 or fc.offset != 0 or fc.coeffs != {id(k_vars[-1]): 1} or extent[id(k_vars[-1])] != c:
        return None
    nv = single(fn, m_vars)
    if nv is None or len(fn.coeffs) != (nv[0] is not None) or nv[1] != 1:
        return None
    spatial = []  # per spatial dimension: (m var, stride, k var, dilation, padding, size)
    for form, size in ((fh, h), (fw, w)):
        mv, kv = single(form, m_vars), single(form, k_vars[:-1])
        if mv is None or kv is None or len(form.coeffs) != (mv[0] is not None) + (kv[0] is not None):
            return None
        spatial.append((mv[0], mv[1], kv[0], kv[1], -form.offset, size))
    m_order = [v for v in (nv[0], spatial[0][0], spatial[1][0]) if v is not None]
    k_order = [v for v in (spatial[0][2], spatial[1][2]) if v is not None] + [k_vars[-1]]
    if [id(v) for v in m_order] != [id(v) for v in m_vars] or [id(v) for v in k_order] != [id(v) for v in k_vars]:
        return None
    if nv[0] is not None and extent[id(nv[0])] != n:
        return None
    out, kernel, stride, dilation, padding = [], [], [], [], []
    for mv, s, kv, d, p, size in spatial:
        o, r = (extent[id(mv)] if mv is not None else 1), (extent[id(kv)] if kv is not None else 1)
        s, d = (s if mv is not None else 1), (d if kv is not None else 1)
        if s <= 0 or d <= 0 or p < 0 or (o - 1) * s + (r - 1) * d - p >= size + p:
            return None  # (a window reaching further past the input than its padding)
        out.append(o), kernel.append(r), stride.append(s), dilation.append(d), padding.append(p)
    if window_bounds(valid, lambda e: affine(e, m_vars + k_vars), [(fh, h), (fw, w)]) is None:
        return None
    return ConvWindow((n, h, w, c), tuple(out), tuple(kernel), tuple(stride), tuple(padding), tuple(dilation))


def window_bounds(cond: Optional[Expr], form: Callable[[Expr], Optional[Affine]], spatial
                  ) -> Optional[Set[Tuple[int, str]]]:
    """The bounds a convolution's padding condition ``cond`` tests, as (dimension, '>=' or '<'): each of its
    conjuncts must be ``index >= 0`` or ``index < extent`` of a spatial index (``spatial``: its affine
    ``form`` and its extent per dimension); None when one is anything else."""
    found = set()
    for c in conjuncts(cond) if cond is not None else []:
        bound = None
        if isinstance(c, Binary) and c.op in ('>=', '<') and isinstance(c.b, Constant):
            f = form(c.a)
            for d, (fd, ext) in enumerate(spatial):
                if f == fd and ((c.op == '>=' and c.b.value == 0) or (c.op == '<' and c.b.value == ext)):
                    bound = (d, c.op)
        if bound is None:
            return None
        found.add(bound)
    return found


def _multiple_of(c, q: int) -> bool:
    """Whether coefficient ``c`` (an int, or an expression of symbols) is a multiple of ``q`` for every value
    of its symbols, as far as its form shows (analysis.known_multiple)."""
    return c % q == 0 if isinstance(c, int) else known_multiple(c) % q == 0


def _fold_affine(index: Affine, axes: Sequence[Tuple[Var, int]], mn_var: Var) -> Optional[Affine]:
    """The affine index over the folded variable, when the axes' strides nest (outer = inner x extent)."""
    if len(axes) <= 1:
        if axes and axes[0][0] is not mn_var:
            coeffs = dict(index.coeffs)
            c = coeffs.pop(id(axes[0][0]), 0)
            if c:
                coeffs[id(mn_var)] = c
            return Affine(coeffs, index.offset)
        return index
    coeffs = dict(index.coeffs)
    stride = coeffs.pop(id(axes[-1][0]), 0)
    expected = stride
    for (v, _), (_, inner_extent) in zip(reversed(axes[:-1]), reversed(axes[1:])):
        expected *= inner_extent
        if not same_dim(coeffs.pop(id(v), 0), expected):
            return None
    if stride:
        coeffs[id(mn_var)] = stride
    return Affine(coeffs, index.offset)


def _static_numel(shape) -> int:
    """The element count, symbolic dimensions taken as 64 (to rank operands by size)."""
    return _numel([d if isinstance(d, int) else 64 for d in shape])


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def match_gemm(task: Task, operand_dtypes: Sequence[str] = MMA_DTYPES, fold_k: bool = False) -> GemmSpec:
    """The GEMM view of ``task`` with operands of ``operand_dtypes`` (default: the tensor cores' float16 and
    bfloat16); raises NotGemm saying why there is none. ``fold_k``: a reduction over several axes (a
    convolution's channels x window) becomes one k axis, row-major (an implicit GEMM; the operands then
    decode k with divisions)."""
    anchor, r = _anchor(task)
    if r.kind != 'sum':
        raise NotGemm(f'the reduction is a {r.kind}, not a sum')
    if r.acc_dtype != float32:
        raise NotGemm(f'the reduction accumulates in {r.acc_dtype}, not float32')
    if any(s == 0 for s in r.shape):
        raise NotGemm('the reduction is empty')
    big = [i for i, s in enumerate(r.shape) if s > 1]
    if len(big) > 1 and not fold_k:
        raise NotGemm('the reduction runs over several axes')
    k_var = Var('k', int64)
    rvals = {ax: (k_var if i in big or (not big and i == 0) else Constant(0, int64)) for i, ax in enumerate(r.axes)}
    k = 1
    for i in reversed(big):  # several axes: k = ((r0 * e1) + r1) * e2 + r2 ...
        e: Expr = k_var if k == 1 else k_var / k
        rvals[r.axes[i]] = e if i == big[0] else e % r.shape[i]
        k *= r.shape[i]
    # the reduction's own axes, for the operands' strides along each: (axis, extent), outer to inner
    k_axes = [(r.axes[i], r.shape[i]) for i in big] if len(big) > 1 else [(k_var, k)]
    k_fold = {r.axes[i]: rvals[r.axes[i]] for i in big} if len(big) > 1 else {}
    value = strip_cast(r.value)
    if not (isinstance(value, Binary) and value.op == '*'):
        raise NotGemm('the reduced value is not a product')
    d = anchor.definition
    c_vars = [Var(f'c{i}', int64) for i in range(len(d.axes))]
    axes_map = dict(zip(d.axes, c_vars))
    axes_map.update({ax: v for ax, v in rvals.items() if ax not in k_fold})
    raw_a = _inline_inputs(substitute(value.a, axes_map))  # over the reduction's own axes
    raw_b = _inline_inputs(substitute(value.b, axes_map))
    fa, fb = substitute(raw_a, k_fold), substitute(raw_b, k_fold)
    for f in (fa, fb):
        if collect(f, ReduceCompute):
            raise NotGemm('a prologue has a reduction')
    if fa.dtype != fb.dtype or fa.dtype.name not in operand_dtypes:
        raise NotGemm(f'the operands are {fa.dtype} and {fb.dtype}; the template takes {" or ".join(operand_dtypes)}')

    def deps(f: Expr, v: Var) -> bool:
        return any(x is v for x in collect(f, Var))

    shape = anchor.shape
    m_axes = [i for i, v in enumerate(c_vars) if deps(fa, v) and not deps(fb, v) and shape[i] != 1]
    n_axes = [i for i, v in enumerate(c_vars) if deps(fb, v) and not deps(fa, v) and shape[i] != 1]
    batch_axes = [i for i in range(len(c_vars)) if i not in m_axes + n_axes and shape[i] != 1]
    fixed = {v: Constant(0, int64) for i, v in enumerate(c_vars) if shape[i] == 1}
    fa, fb = substitute(fa, fixed), substitute(fb, fixed)
    raw_a, raw_b = substitute(raw_a, fixed), substitute(raw_b, fixed)

    def fold(axes: List[int], name: str):
        """Several m (or n) axes — a batch only one operand has — become one dimension."""
        if len(axes) == 1:
            return c_vars[axes[0]], shape[axes[0]], {}
        var = Var(name, int64)
        mapping, inner = {}, 1
        for i in reversed(axes):
            e: Expr = var if isinstance(inner, int) and inner == 1 else var / inner
            mapping[c_vars[i]] = e if i == axes[0] else e % shape[i]
            inner = simplify_dim(inner * shape[i])
        return var, inner, mapping

    m_var, m, m_fold = fold(m_axes, 'm')
    n_var, n, n_fold = fold(n_axes, 'n')
    batch_vars = tuple(c_vars[i] for i in batch_axes)
    batch_shape = tuple(shape[i] for i in batch_axes)
    batch_numel = _numel(batch_shape)
    if not isinstance(batch_numel, int):
        raise NotGemm('the batch is symbolic (the templates take a symbolic m only)')
    if batch_numel > MAX_GRID_YZ:
        raise NotGemm('the batch is too large for the grid')
    mma_dtype = fa.dtype
    a = _operand('a', fa, task, batch_vars, [(c_vars[i], shape[i]) for i in m_axes], m_var, m_fold, k_var, m, k,
                 mma_dtype, raw_a, k_axes, k_fold)
    b = _operand('b', fb, task, batch_vars, [(c_vars[i], shape[i]) for i in n_axes], n_var, n_fold, k_var, n, k,
                 mma_dtype, raw_b, k_axes, k_fold)
    acc, acc_pair = Var('acc', float32), Var('acc_pair', float32)
    epilogue, out_index, groups, pieces, pair = split_epilogue(task, anchor, r, acc, c_vars, acc_pair)
    if pair is not None and n_axes != [pair.dim]:
        raise NotGemm('the epilogue pairs columns of a matmul whose n is not that one axis')
    folds = dict(fixed)
    folds.update(m_fold)
    folds.update(n_fold)
    # (a folded m read back at its own axes — the rows of [batch, seq, n] as m = batch * seq — is not divided
    # back by a run-time size per element)
    epilogue = merge_divmod(substitute(epilogue, folds), static_divisors=False)
    out_index = merge_divmod(substitute(out_index, folds), static_divisors=False)
    out = task.outputs[0]
    # vectorized stores: the n axes are the output's trailing axes, in order
    trailing = [o for o in range(len(out.shape)) if out.shape[o] != 1]
    n_out = [o for i in n_axes for o, _ in groups[i]]
    n_pieces_inner = all(c != 0 or pieces[i] == 1 for i in n_axes for _, c in groups[i])
    out_n_contiguous = bool(n_out) and n_out == trailing[len(trailing) - len(n_out):] and n_out == sorted(n_out) \
        and n_pieces_inner
    # (the innermost m axis is the output's innermost axis, coefficient 1)
    out_m_contiguous = not out_n_contiguous and bool(m_axes) and bool(trailing) and bool(groups[m_axes[-1]]) \
        and groups[m_axes[-1]][-1] == (trailing[-1], 1)
    for e in collect(epilogue, TensorElement):
        if not e.tensor.is_input():
            raise NotGemm('the epilogue reads a computed tensor')
    return GemmSpec(task, batch_shape, m, n, k, batch_vars, m_var, n_var, k_var, a, b, mma_dtype, acc, epilogue,
                    out_index, out.dtype, out_n_contiguous, merged_epilogue=bool(pieces),
                    out_m_contiguous=out_m_contiguous, pair=pair.width if pair else 0,
                    acc_pair=acc_pair if pair else None)


def _inline_inputs(e: Expr) -> Expr:
    return inline_computes(e)


def operand_modes(task: Task) -> Optional[Tuple[str, str]]:
    """How the template would read the two operands of ``task`` ('direct', 'gather' or 'computed'), matched as a
    plain GEMM or else as an implicit one (a convolution); None where ``task`` is neither."""
    dtypes = MMA_DTYPES + ('float32',)
    for fold_k in (False, True):
        try:
            spec = match_gemm(task, dtypes, fold_k=fold_k)
        except NotGemm:
            continue
        return spec.a.mode, spec.b.mode
    return None


def paired_epilogue(task: Task) -> bool:
    """Whether ``task`` is a GEMM whose epilogue reads pairs of the matmul's columns (epilogue.Pair)."""
    try:
        return match_gemm(task, MMA_DTYPES + ('float32',)).pair > 0
    except NotGemm:
        return False


def explain(task: Task) -> str:
    """'gemm …' or why ``task`` is not one."""
    try:
        spec = match_gemm(task)
    except NotGemm as e:
        return str(e)
    merged = ' (merged epilogue: CPU template only, for now)' if spec.merged_epilogue else ''
    paired = f' (paired epilogue: columns n and n + {spec.pair})' if spec.pair else ''
    return f'gemm {spec.shape_text()} a:{spec.a.mode} b:{spec.b.mode}{merged}{paired}'
