"""Evaluating a Task's compute definition with numpy on the host, without generating or compiling a kernel
(constant folding uses it: a weight's transpose, cast or batch-norm scaling runs once, at optimization time).

    outputs = evaluate(task, [a_values, b_values])       # host arrays in, host arrays out
    reason = evaluation_problem(task)                     # None, or why evaluate would refuse

An output is computed over its whole index grid at once: each index variable is a broadcastable
``np.arange`` (axis d of the grid lives at array position d), so an expression maps onto numpy ufuncs
elementwise over the grid; a tensor read is fancy indexing; a reduction takes further positions for its
axes, evaluates its value over them and sums (maxes, ...) them away. Reads of computed tensors are inlined
as the kernels inline them. Grids too large for memory are evaluated in chunks (MAX_ELEMENTS per array);
tasks too large to be worth it on the host (MAX_WORK) are refused.

The arithmetic follows the generated kernels (hidet/backend/codegen.py): float16 / bfloat16 values are
computed in float32 and rounded (to nearest even) only where the IR casts to them and where an output is
stored; integer division and remainder truncate toward zero as in C; max / min propagate NaN; a reduction
accumulates in its ``acc_dtype``. Copies, transposes, casts and other exact arithmetic therefore give the
kernels' bits; sums (whose order differs) and math functions (numpy's against the C library's) agree
within floating-point rounding.

Both branches of a ``select`` are evaluated over the whole grid, so reads are clamped into their tensor
(the values read out of bounds are the ones the select discards) and floating-point warnings are silenced.
"""
from __future__ import annotations

import itertools
import math
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.dtypes import DataType
from hidet.ir.expr import (Binary, Call, Cast, Constant, Select, SymbolVar, TensorElement, Unary, Var,
                           evaluate_dim, promote)
from hidet.ir.functors import children, walk
from hidet.ir.task import Task

MAX_ELEMENTS = 1 << 22  # elements of one array while evaluating (the output grid is split into chunks to keep it)
MAX_WORK = 1 << 26  # output elements times the elements each one reduces, at most (beyond: refused)


class NotEvaluable(Exception):
    """The evaluator cannot compute a task (the message says why); run its kernel instead."""


def _erf(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(x.dtype)


def _erfc(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erfc, 1, 1)(x.astype(np.float64)).astype(x.dtype)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.reciprocal(np.sqrt(x))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over='ignore'):  # e^-x overflows to inf for x < -88 in float32: sigmoid 0, as in C
        return np.reciprocal(1 + np.exp(-x))


# IR math functions (hidet.ir.expr.Call) → numpy, computed in the call's compute dtype as the kernels do
_MATH: Dict[str, Callable] = {
    'exp': np.exp, 'log': np.log, 'sqrt': np.sqrt, 'rsqrt': _rsqrt, 'sigmoid': _sigmoid, 'sin': np.sin, 'cos': np.cos,
    'tan': np.tan, 'tanh': np.tanh, 'sinh': np.sinh, 'cosh': np.cosh, 'asin': np.arcsin, 'acos': np.arccos,
    'atan': np.arctan, 'asinh': np.arcsinh, 'acosh': np.arccosh, 'atanh': np.arctanh, 'erf': _erf, 'erfc': _erfc,
    'tanh_approx': np.tanh, 'erf_approx': _erf,  # (hidet.ir.expr.APPROX_16BIT: exact on the host)
    'pow': np.power, 'floor': np.floor, 'ceil': np.ceil, 'trunc': np.trunc, 'round': np.rint, 'abs': np.abs,
    'log2': np.log2, 'log10': np.log10, 'log1p': np.log1p, 'expm1': np.expm1, 'exp2': np.exp2, 'fmod': np.fmod,
    'atan2': np.arctan2, 'hypot': np.hypot, 'copysign': np.copysign,
}
_SPECIAL_CALLS = ('isnan', 'ipow', 'hidet_lowest', 'hidet_highest')
_COMPARE = {'<': np.less, '<=': np.less_equal, '>': np.greater, '>=': np.greater_equal, '==': np.equal,
            '!=': np.not_equal}
_ARITH = {'+': np.add, '-': np.subtract, '*': np.multiply, 'max': np.maximum, 'min': np.minimum,
          '&': np.bitwise_and, '|': np.bitwise_or, '^': np.bitwise_xor, '&&': np.logical_and, '||': np.logical_or}


# ---------------------------------------------------------------- dtypes: compute and storage
def compute_np_dtype(dtype: DataType) -> np.dtype:
    """The numpy dtype values of ``dtype`` are computed in (16-bit floats: float32, as the kernels)."""
    return np.dtype(np.float32) if dtype.name in ('float16', 'bfloat16') else dtype.np_dtype


def round_bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values → bfloat16 bit patterns (uint16) exactly as the kernels' ``from_float<bf16>``: to nearest
    even, a NaN keeping its sign and high payload bits (made quiet)."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(nan, ((u >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16), rounded)


def _bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_compute(values: np.ndarray, dtype: DataType) -> np.ndarray:
    """Host storage values of ``dtype`` (bfloat16: uint16 bit patterns) in its compute dtype (exact)."""
    if dtype.name == 'bfloat16':
        return _bf16_bits_to_f32(values)
    return np.asarray(values).astype(compute_np_dtype(dtype), copy=False)


def to_storage(values: np.ndarray, dtype: DataType) -> np.ndarray:
    """Computed values of ``dtype`` stored as a kernel stores them, in the dtype's host storage type."""
    if dtype.name == 'bfloat16':
        return round_bf16_bits(values)
    return np.asarray(values).astype(dtype.np_dtype, copy=False)


def cast_values(a: np.ndarray, src: DataType, dst: DataType) -> np.ndarray:
    """``a`` (computed values of ``src``) cast to ``dst`` as the kernels' casts: nonzero → true; to a 16-bit
    float through float32, rounded to nearest even and computed on in float32; otherwise as C casts."""
    if src == dst:
        return a
    if dst.is_boolean():
        return a != 0
    if dst.name == 'float16':  # (through float32 first, as C's float(x): a float64 value is rounded twice)
        return a.astype(np.float32, copy=False).astype(np.float16).astype(np.float32)
    if dst.name == 'bfloat16':
        return _bf16_bits_to_f32(round_bf16_bits(a.astype(np.float32, copy=False)))
    return a.astype(dst.np_dtype)


# ---------------------------------------------------------------- what can be evaluated
def _extent(d, values: Dict[str, int]) -> int:
    try:
        return evaluate_dim(d, values)
    except ValueError as e:
        raise NotEvaluable(str(e)) from None


def _check_node(node, values: Dict[str, int]) -> None:
    if isinstance(node, Call) and node.func not in _MATH and node.func not in _SPECIAL_CALLS:
        raise NotEvaluable(f'no host implementation of the function {node.func!r}')
    if isinstance(node, SymbolVar) and node.name not in values:
        raise NotEvaluable(f'the symbolic dimension {node.name} has no value')
    if not isinstance(node, (Binary, Unary, Cast, Select, Constant, Var, Call, TensorElement, TensorNode,
                             ReduceCompute)):
        raise NotEvaluable(f'{type(node).__name__} nodes are not evaluated on the host')
    if isinstance(node, Binary) and node.op not in _ARITH and node.op not in _COMPARE and node.op not in ('/', '%'):
        raise NotEvaluable(f'no host implementation of the operator {node.op!r}')


def _reduced_elements(root, values: Dict[str, int]) -> int:
    """The most elements a reduction in ``root`` (reads of computed tensors inlined) combines per output element:
    nested reductions multiply."""
    memo: Dict[int, int] = {}

    def cost(node) -> int:
        if id(node) not in memo:
            inner = max((cost(c) for c in children(node)), default=1)
            if isinstance(node, ReduceCompute):
                inner *= max(math.prod(_extent(s, values) for s in node.shape), 1)
            memo[id(node)] = inner
        return memo[id(node)]

    return cost(root)


def evaluation_problem(task: Task, symbol_values: Optional[Dict[str, int]] = None) -> Optional[str]:
    """Why :func:`evaluate` would refuse ``task`` (an unknown function, symbols without values, too much work),
    or None when it can evaluate it."""
    values = dict(symbol_values or {})
    try:
        for out in task.outputs:
            for node in walk(out):
                _check_node(node, values)
            numel = math.prod(_extent(s, values) for s in out.shape)
            work = numel * (1 if out.is_input() else _reduced_elements(out.definition.value, values))
            if work > MAX_WORK:
                raise NotEvaluable(f'{out.name}: {numel} elements reducing {work // max(numel, 1)} each is too much '
                                   f'work for the host (more than {MAX_WORK})')
    except NotEvaluable as e:
        return str(e)
    return None


# ---------------------------------------------------------------- evaluation
def _align(*arrays: np.ndarray) -> List[np.ndarray]:
    """Arrays padded with trailing unit dimensions to one rank: grid positions count from the left."""
    ndim = max(a.ndim for a in arrays)
    return [a if a.ndim == ndim else a.reshape(a.shape + (1,) * (ndim - a.ndim)) for a in arrays]


def _c_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C's), 0 where dividing by zero (never read: a select's
    discarded branch)."""
    if b.size and a.size and b.min() > 0 and a.min() >= 0:  # (index arithmetic: the usual case, one pass)
        return a // b
    safe = _nonzero(b)
    return (a - np.fmod(a, safe)) // safe


def _c_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer remainder with the dividend's sign (C's)."""
    if b.size and a.size and b.min() > 0 and a.min() >= 0:
        return a % b
    return np.fmod(a, _nonzero(b))


def _nonzero(b: np.ndarray) -> np.ndarray:
    return np.where(b == 0, 1, b).astype(b.dtype, copy=False) if np.any(b == 0) else b


def _ipow(base: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """Integer power as hidet/kernel/common.h's ipow: wraps on overflow; a negative exponent gives 1 for base
    1, +-1 for base -1 and 0 otherwise."""
    if base.dtype == np.bool_:
        return base | ~exp
    base, exp = np.broadcast_arrays(*_align(base, exp))
    result = np.ones(base.shape, base.dtype)
    b, e = base.copy(), np.maximum(exp, 0).astype(np.uint64)
    while np.any(e):
        result = np.where(e & np.uint64(1), result * b, result)
        b = b * b
        e = e >> np.uint64(1)
    if np.issubdtype(base.dtype, np.signedinteger):
        negative = np.where(base == 1, 1, np.where(base == -1, np.where(exp % 2 != 0, -1, 1), 0))
        result = np.where(exp < 0, negative.astype(base.dtype), result)
    return result


def _limit(dtype: np.dtype, lowest: bool) -> np.ndarray:
    """The kernels' hidet::lowest / hidet::highest of ``dtype``: infinities for floats, the integer range's ends."""
    if dtype.kind == 'f':
        value = -np.inf if lowest else np.inf
    elif dtype == np.bool_:
        value = not lowest
    else:
        value = np.iinfo(dtype).min if lowest else np.iinfo(dtype).max
    return np.asarray(value, dtype=dtype)


class _Scope:
    """The values of index variables (by id) over ``extents`` (one per array position), and the values of the
    expressions evaluated so far under them. ``ranges``: the arrays that are a whole axis's aranges (by id) →
    (position, start, stop), so reads at them are slices."""

    def __init__(self, env: Dict[int, np.ndarray], extents: Sequence[int], ranges: Dict[int, tuple]):
        self.env, self.extents, self.ranges = env, list(extents), ranges
        self.memo: Dict[object, np.ndarray] = {}


def _axis_range(position: int, start: int, stop: int, ranges: Dict[int, tuple]) -> np.ndarray:
    """``arange(start, stop)`` at array ``position``, recorded in ``ranges``."""
    values = np.arange(start, stop, dtype=np.int64).reshape((1,) * position + (stop - start,))
    ranges[id(values)] = (position, start, stop)
    return values


def _sliced_read(data: np.ndarray, indices: Sequence[np.ndarray], ranges: Dict[int, tuple]) -> Optional[np.ndarray]:
    """``data`` read at axis aranges (each at its own position, inside the tensor) as a view of a slice, its
    dimensions moved to their positions; None for other reads (a gather)."""
    found = [ranges.get(id(i)) for i in indices]
    if any(f is None for f in found) or len({f[0] for f in found}) < len(found):
        return None
    if any(lo < 0 or hi > n for (_, lo, hi), n in zip(found, data.shape)):
        return None
    block = data[tuple(slice(lo, hi) for _, lo, hi in found)]
    order = sorted(range(len(found)), key=lambda k: found[k][0])
    shape = [1] * (found[order[-1]][0] + 1)
    for k in order:
        shape[found[k][0]] = found[k][2] - found[k][1]
    return block.transpose(order).reshape(shape)


class _Evaluator:
    def __init__(self, inputs: Dict[int, np.ndarray], values: Dict[str, int]):
        self.inputs, self.values = inputs, values  # id(input TensorNode) → host storage values

    def value(self, e, scope: _Scope) -> np.ndarray:
        found = scope.memo.get(id(e))
        if found is None:
            found = self.compute(e, scope)
            scope.memo[id(e)] = found
        return found

    def compute(self, e, scope: _Scope) -> np.ndarray:
        if isinstance(e, SymbolVar):
            return np.asarray(self.values[e.name], dtype=compute_np_dtype(e.dtype))
        if isinstance(e, Var):
            if id(e) not in scope.env:
                raise NotEvaluable(f'the variable {e.name} is not bound')
            return scope.env[id(e)]
        if isinstance(e, Constant):
            return np.asarray(e.value, dtype=compute_np_dtype(e.dtype))
        if isinstance(e, Cast):
            return cast_values(self.value(e.a, scope), e.a.dtype, e.dtype)
        if isinstance(e, Binary):
            return self.binary(e, scope)
        if isinstance(e, Unary):
            a = self.value(e.a, scope)
            return np.logical_not(a) if e.op == '!' else np.negative(a)
        if isinstance(e, Select):
            f = cast_values(self.value(e.f, scope), e.f.dtype, e.t.dtype)
            cond, t, f = _align(self.value(e.cond, scope), self.value(e.t, scope), f)
            return np.where(cond if cond.dtype == np.bool_ else cond != 0, t, f)
        if isinstance(e, Call):
            return self.call(e, scope)
        if isinstance(e, TensorElement):
            return self.read(e, scope)
        if isinstance(e, ReduceCompute):
            return self.reduce(e, scope)
        raise NotEvaluable(f'{type(e).__name__} nodes are not evaluated on the host')

    def binary(self, e: Binary, scope: _Scope) -> np.ndarray:
        a, b = self.value(e.a, scope), self.value(e.b, scope)
        if e.op in _COMPARE:
            operand = promote(e.a.dtype, e.b.dtype)
            a, b = _align(cast_values(a, e.a.dtype, operand), cast_values(b, e.b.dtype, operand))
            return _COMPARE[e.op](a, b)
        if e.op not in ('&&', '||'):
            a, b = cast_values(a, e.a.dtype, e.dtype), cast_values(b, e.b.dtype, e.dtype)
        a, b = _align(a, b)
        if e.op == '/':
            return np.divide(a, b) if e.dtype.is_float() else _c_divide(a, b)
        if e.op == '%':
            return np.fmod(a, b) if e.dtype.is_float() else _c_remainder(a, b)
        out = _ARITH[e.op](a, b)
        return out if e.op in ('&&', '||') else out.astype(compute_np_dtype(e.dtype), copy=False)

    def call(self, e: Call, scope: _Scope) -> np.ndarray:
        if e.func in ('hidet_lowest', 'hidet_highest'):  # (the identity of max / min: padding of a max pool)
            return np.asarray(_limit(compute_np_dtype(e.dtype), e.func == 'hidet_lowest'))
        if e.func == 'isnan':
            return np.isnan(self.value(e.args[0], scope))
        args = [self.value(a, scope) for a in e.args]
        if e.func == 'ipow':
            return _ipow(*[cast_values(v, a.dtype, e.dtype) for v, a in zip(args, e.args)])
        if e.dtype.is_float():
            args = [cast_values(v, a.dtype, e.dtype) for v, a in zip(args, e.args)]
        out = _MATH[e.func](*_align(*args))
        return np.asarray(out).astype(compute_np_dtype(e.dtype), copy=False)

    def read(self, e: TensorElement, scope: _Scope) -> np.ndarray:
        indices = [self.value(i, scope) for i in e.indices]
        tensor = e.tensor
        if not tensor.is_input():  # inlined, as the kernels do: its definition at these indices
            key = (id(tensor),) + tuple(id(i) for i in indices)
            if key not in scope.memo:
                d = tensor.definition
                inner = _Scope(dict(zip(map(id, d.axes), indices)), scope.extents, scope.ranges)
                scope.memo[key] = self.value(d.value, inner)  # (the index arrays stay alive: env or memo)
            return scope.memo[key]
        data = self.inputs[id(tensor)]
        if not indices:
            return to_compute(data[()], tensor.dtype)
        sliced = _sliced_read(data, indices, scope.ranges)
        if sliced is not None:  # (copies, casts, transposes, elementwise operands: no gather)
            return to_compute(sliced, tensor.dtype)
        indices = _align(*indices)
        if data.size == 0:  # nothing to read: every read is in a discarded branch
            shape = np.broadcast_shapes(*(i.shape for i in indices))
            return np.zeros(shape, compute_np_dtype(tensor.dtype))
        clamped = []
        for i, extent in zip(indices, data.shape):
            if i.size and (i.min() < 0 or i.max() >= extent):
                i = np.clip(i, 0, extent - 1)
            clamped.append(i)
        return to_compute(np.asarray(data[tuple(clamped)]), tensor.dtype)

    def reduce(self, r: ReduceCompute, scope: _Scope) -> np.ndarray:
        depth = len(scope.extents)
        shape = [_extent(s, self.values) for s in r.shape]
        env, ranges = dict(scope.env), dict(scope.ranges)
        for j, (axis, n) in enumerate(zip(r.axes, shape)):
            env[id(axis)] = _axis_range(depth + j, 0, n, ranges)
        inner = _Scope(env, scope.extents + shape, ranges)
        value = cast_values(self.value(r.value, inner), r.value.dtype, r.acc_dtype)
        value = _align(value, np.empty((1,) * (depth + len(shape))))[0]
        value = np.broadcast_to(value, value.shape[:depth] + tuple(shape))
        axes = tuple(range(depth, depth + len(shape)))
        acc = compute_np_dtype(r.acc_dtype)
        if r.kind in ('sum', 'mean'):
            out = np.sum(value, axis=axes, dtype=acc)
        elif r.kind == 'prod':
            out = np.prod(value, axis=axes, dtype=acc)
        elif r.kind in ('max', 'min'):
            initial = _limit(acc, lowest=r.kind == 'max')
            out = (np.max if r.kind == 'max' else np.min)(value, axis=axes, initial=initial)
        elif r.kind == 'any':
            out = np.any(value, axis=axes)
        else:
            out = np.all(value, axis=axes)
        out = np.asarray(out).astype(acc, copy=False)
        if r.kind == 'mean':
            count = np.asarray(math.prod(shape), dtype=acc)
            out = np.divide(out, count).astype(acc, copy=False) if r.acc_dtype.is_float() else _c_divide(out, count)
        return cast_values(out, r.acc_dtype, r.dtype)

    def output(self, out: TensorNode) -> np.ndarray:
        shape = [_extent(s, self.values) for s in out.shape]
        if out.is_input():
            return np.array(self.inputs[id(out)], copy=True)
        result = np.empty(shape, out.dtype.storage_np_dtype)
        if result.size == 0:
            return result
        d = out.definition
        for ranges in _chunks(shape, max(1, MAX_ELEMENTS // _reduced_elements(d.value, self.values))):
            axis_ranges: Dict[int, tuple] = {}
            env = {id(axis): _axis_range(p, lo, hi, axis_ranges)
                   for p, (axis, (lo, hi)) in enumerate(zip(d.axes, ranges))}
            value = self.value(d.value, _Scope(env, [hi - lo for lo, hi in ranges], axis_ranges))
            block = tuple(slice(lo, hi) for lo, hi in ranges)
            value = _align(value, np.empty((1,) * len(shape)))[0] if shape else value
            result[block] = to_storage(np.broadcast_to(value, result[block].shape), out.dtype)
        return result


def _chunks(shape: Sequence[int], per_chunk: int):
    """Blocks of the grid ``shape`` (a (start, stop) per axis) of at most ``per_chunk`` elements where they can
    be: the innermost axes whole, the next one in slices, the outer ones an index at a time."""
    whole, inner = len(shape), 1  # axes [whole:] fit in a chunk whole
    while whole > 0 and inner * shape[whole - 1] <= per_chunk:
        whole -= 1
        inner *= shape[whole]
    if whole == 0:
        yield [(0, n) for n in shape]
        return
    split, step = whole - 1, max(1, per_chunk // inner)
    for head in itertools.product(*(range(n) for n in shape[:split])):
        for start in range(0, shape[split], step):
            yield ([(i, i + 1) for i in head] + [(start, min(start + step, shape[split]))] +
                   [(0, n) for n in shape[whole:]])


def evaluate(task: Task, inputs: Sequence[np.ndarray], symbol_values: Optional[Dict[str, int]] = None
             ) -> List[np.ndarray]:
    """``task``'s outputs computed on the host from ``inputs`` (numpy arrays shaped as the task's inputs, in
    their dtypes' host storage types: bfloat16 as uint16 bit patterns), in the same storage types. The task's
    symbolic dimensions take ``symbol_values``. Raises NotEvaluable where :func:`evaluation_problem` names
    a problem."""
    values = dict(symbol_values or {})
    problem = evaluation_problem(task, values)
    if problem is not None:
        raise NotEvaluable(problem)
    if len(inputs) != len(task.inputs):
        raise ValueError(f'{task.name}: {len(task.inputs)} inputs expected, got {len(inputs)}')
    arrays: Dict[int, np.ndarray] = {}
    for node, array in zip(task.inputs, inputs):
        array = np.asarray(array)
        shape = tuple(_extent(s, values) for s in node.shape)
        if array.shape != shape or array.dtype != node.dtype.storage_np_dtype:
            raise ValueError(f'{task.name}: input {node.name} is {node.dtype.name}{list(shape)} (host storage '
                             f'{node.dtype.storage_np_dtype}), got {array.dtype}{list(array.shape)}')
        arrays[id(node)] = array
    evaluator = _Evaluator(arrays, values)
    with np.errstate(all='ignore'):
        return [evaluator.output(out) for out in task.outputs]
