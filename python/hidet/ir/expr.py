"""Scalar expressions of the tensor-program IR.

Expressions are immutable trees. Python operators build them (``a + b``, ``a < b``); functions
below build the rest (``select``, ``cast``, ``call``, ``logical_and``, …). Every expression has a
``dtype``; index arithmetic is ``int64``. ``==`` keeps its Python meaning (identity) so expressions
can be dict keys: use :func:`equal` for the IR comparison.
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple, Union

from hidet.ir.dtypes import DataType, boolean, data_type, float32, int64

ExprLike = Union['Expr', int, float, bool]

# Binary operators: the C spelling is the op itself ('max'/'min' are functions).
ARITH_OPS = ('+', '-', '*', '/', '%', 'max', 'min')
COMPARE_OPS = ('<', '<=', '>', '>=', '==', '!=')
LOGIC_OPS = ('&&', '||')
BITWISE_OPS = ('&', '|', '^')


class Expr:
    dtype: DataType

    def __add__(self, other): return binary('+', self, other)
    def __radd__(self, other): return binary('+', other, self)
    def __sub__(self, other): return binary('-', self, other)
    def __rsub__(self, other): return binary('-', other, self)
    def __mul__(self, other): return binary('*', self, other)
    def __rmul__(self, other): return binary('*', other, self)
    def __truediv__(self, other): return binary('/', self, other)
    def __rtruediv__(self, other): return binary('/', other, self)
    def __floordiv__(self, other): return binary('/', self, other)  # integer operands: C division
    def __mod__(self, other): return binary('%', self, other)
    def __and__(self, other): return binary('&', self, other)  # bitwise, of integers
    def __rand__(self, other): return binary('&', other, self)
    def __or__(self, other): return binary('|', self, other)
    def __ror__(self, other): return binary('|', other, self)
    def __xor__(self, other): return binary('^', self, other)
    def __rxor__(self, other): return binary('^', other, self)
    def __neg__(self): return Unary('-', self)
    def __lt__(self, other): return binary('<', self, other)
    def __le__(self, other): return binary('<=', self, other)
    def __gt__(self, other): return binary('>', self, other)
    def __ge__(self, other): return binary('>=', self, other)
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError('an IR expression has no truth value; use hidet.ir.expr.select/logical_and')

    def __repr__(self) -> str:
        # (a circle at import time: hidet.ir.printer imports this module)
        from hidet.ir.printer import expr_text

        return expr_text(self)


class Var(Expr):
    """A named scalar (loop index, symbolic dimension) or, with ``pointer=True``, a buffer address.
    ``type`` (hidet.ir.type) makes it a pointer or tensor of ``dtype`` elements (Hidet Script)."""

    def __init__(self, name: str, dtype=int64, pointer: bool = False, type=None):
        self.name = name
        self.dtype = data_type(dtype)
        self.pointer = pointer
        self.type = type


class SymbolVar(Var):
    """A symbolic dimension (``hidet.symbol(['batch', 3])``): an int64 known only when a kernel runs. A
    symbol is its name: ``SymbolVar('batch')`` is one object per name (so shape rules comparing dimensions
    by identity see two inputs' 'batch' as the same), bound at run time from the kernel ABI's ``dims``
    (in the order of their names)."""

    _by_name: Dict[str, 'SymbolVar'] = {}  # interned, like the names themselves: immutable objects

    def __new__(cls, name: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f'a symbolic dimension needs an identifier as name, got {name!r}')
        found = cls._by_name.get(name)
        if found is None:
            found = super().__new__(cls)
            Var.__init__(found, name, int64)
            cls._by_name[name] = found
        return found

    def __init__(self, name: str):  # set up once, in __new__
        pass


def symbol_var(name: str) -> SymbolVar:
    return SymbolVar(name)


def evaluate_dim(d, values: Dict[str, int]) -> int:
    """The value of dimension ``d`` (an int, or an expression of symbols) given the symbols' ``values``."""
    if isinstance(d, int):
        return d
    if isinstance(d, SymbolVar):
        if d.name not in values:
            raise ValueError(f'dimension {d.name} has no value: it is not the size of any input dimension')
        return values[d.name]
    if isinstance(d, Constant):
        return int(d.value)
    if isinstance(d, Cast):
        return evaluate_dim(d.a, values)
    if isinstance(d, Binary) and d.op in ('+', '-', '*', '/', '%', 'max', 'min'):
        a, b = evaluate_dim(d.a, values), evaluate_dim(d.b, values)
        quotient = lambda: (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)  # noqa: E731 (C: toward zero)
        return {'+': lambda: a + b, '-': lambda: a - b, '*': lambda: a * b, '/': quotient,
                '%': lambda: a - quotient() * b, 'max': lambda: max(a, b), 'min': lambda: min(a, b)}[d.op]()
    raise ValueError(f'cannot evaluate the dimension {d!r}')


def simplify_dim(d):
    """A dimension in a canonical form: sums and products of symbols and ints multiplied out, like terms
    combined, terms in a fixed order (``seq - 1`` and ``seq + -1`` are the same expression); an int when
    it has no symbols. Other operations (division, modulo) stay whole, as one factor."""
    if isinstance(d, int):
        return d
    factors: Dict[str, Expr] = {}

    def poly(e) -> Dict[tuple, int]:  # monomial (sorted factor keys) → coefficient
        if isinstance(e, int):
            return {(): e}
        if isinstance(e, Constant) and e.dtype.is_integer():
            return {(): int(e.value)}
        if isinstance(e, Cast) and e.dtype.is_integer():
            return poly(e.a)
        if isinstance(e, Unary) and e.op == '-':
            return {k: -v for k, v in poly(e.a).items()}
        if isinstance(e, Binary) and e.op in ('+', '-', '*'):
            a, b = poly(e.a), poly(e.b)
            out: Dict[tuple, int] = {}
            if e.op == '*':
                for ka, va in a.items():
                    for kb, vb in b.items():
                        k = tuple(sorted(ka + kb))
                        out[k] = out.get(k, 0) + va * vb
            else:
                out = dict(a)
                for k, v in b.items():
                    out[k] = out.get(k, 0) + (v if e.op == '+' else -v)
            return out
        key = e.name if isinstance(e, SymbolVar) else f'({e!r})'
        factors[key] = e
        return {(key,): 1}

    terms = {k: v for k, v in poly(d).items() if v}
    out = None
    for mono in sorted((k for k in terms if k), key=lambda k: (-len(k), k)):
        coeff = terms[mono]
        term = None
        for key in mono:
            term = factors[key] if term is None else term * factors[key]
        if abs(coeff) != 1:
            term = abs(coeff) * term
        out = (term if coeff > 0 else -term) if out is None else out + term if coeff > 0 else out - term
    const = terms.get((), 0)
    if out is None:
        return const
    return out if const == 0 else out + const if const > 0 else out - (-const)


def same_dim(a, b) -> bool:
    """Whether two dimensions are the same size for every value of their symbols (as far as their
    canonical forms tell: ``seq - 1`` is ``seq + -1``)."""
    a, b = simplify_dim(a), simplify_dim(b)
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is b or repr(a) == repr(b)


def is_static(x) -> bool:
    """Whether a dimension is a Python int (not symbolic)."""
    return isinstance(x, int)


def dim_postfix(d):
    """A dimension as an artifact's manifest and a kernel's signature store it: an int, a variable's name (a
    symbol, or a Hidet Script kernel's scalar parameter), or a postfix list of ints, names and operators
    (+ - * / %, C integer semantics) for an expression of them."""
    if isinstance(d, int):
        return d
    if isinstance(d, Var):
        return d.name
    out = []

    def visit(e):
        if isinstance(e, Var):
            out.append(e.name)
        elif isinstance(e, Constant):
            out.append(int(e.value))
        elif isinstance(e, Cast):
            visit(e.a)
        elif isinstance(e, Binary) and e.op in ('+', '-', '*', '/', '%'):
            visit(e.a)
            visit(e.b)
            out.append(e.op)
        else:
            raise NotImplementedError(f'a shape of {d} cannot be stored in an artifact yet (only + - * / % of symbols)')

    visit(d)
    return out


def symbols_of(exprs) -> list:
    """The names of the symbolic dimensions in ``exprs`` (ints and Exprs), sorted."""
    # (a circle at import time: hidet.ir.functors imports this module)
    from hidet.ir.functors import collect

    names = set()
    for e in exprs:
        if isinstance(e, Expr):
            names.update(v.name for v in collect(e, SymbolVar))
    return sorted(names)


class Constant(Expr):
    def __init__(self, value, dtype):
        self.dtype = data_type(dtype)
        if self.dtype.is_boolean():
            value = bool(value)
        elif self.dtype.is_integer():
            value = int(value)
        else:
            value = float(value)
        self.value = value


class Binary(Expr):
    def __init__(self, op: str, a: Expr, b: Expr, dtype: DataType):
        self.op, self.a, self.b, self.dtype = op, a, b, dtype


class Unary(Expr):
    def __init__(self, op: str, a: Expr):
        self.op, self.a = op, a
        self.dtype = boolean if op == '!' else a.dtype


class Call(Expr):
    """A math function: exp, log, sqrt, rsqrt, sin, cos, tanh, erf, pow, abs, floor, ceil, round, …"""

    def __init__(self, func: str, args: Sequence[Expr], dtype: DataType):
        self.func, self.args, self.dtype = func, tuple(args), dtype


# A math function whose result is a 16-bit float, computed in float32 where its value is rounded to 16 bits later
# (a GEMM's epilogue: hidet.kernels.matmul.epilogue.widened), is called by the second name: a function as accurate as
# the 16-bit result needs (on the GPU, hidet/kernel/cuda.h: tanh_approx is the special-function unit's tanh,
# relative error 1.1e-5; erf_approx is built on it, absolute error 5.5e-5); on the CPU, the exact function
APPROX_16BIT = {'tanh': 'tanh_approx', 'erf': 'erf_approx'}


class Cast(Expr):
    def __init__(self, a: Expr, dtype):
        self.a, self.dtype = a, data_type(dtype)


class Select(Expr):
    def __init__(self, cond: Expr, t: Expr, f: Expr):
        self.cond, self.t, self.f = cond, t, f
        self.dtype = t.dtype


class TensorElement(Expr):
    """``tensor[indices]`` of a compute-definition tensor (hidet.ir.compute.TensorNode)."""

    def __init__(self, tensor, indices: Sequence[Expr]):
        self.tensor = tensor
        self.indices = tuple(convert(i, int64) for i in indices)
        self.dtype = tensor.dtype


def convert(value: ExprLike, dtype=None) -> Expr:
    """An Expr for a Python scalar (typed ``dtype``, else bool/int64/float32) or the Expr itself."""
    if isinstance(value, Expr):
        return value
    if dtype is None:
        dtype = boolean if isinstance(value, bool) else int64 if isinstance(value, int) else float32
    return Constant(value, dtype)


_float_rank = {'float16': 1, 'bfloat16': 1, 'float32': 2, 'float64': 3}


def promote(a: DataType, b: DataType) -> DataType:
    """The dtype of a binary arithmetic result, following torch's promotion between tensors."""
    if a == b:
        return a
    if a.is_float() or b.is_float():
        if a.is_float() and b.is_float():
            if {a.name, b.name} == {'float16', 'bfloat16'}:
                return float32
            return a if _float_rank[a.name] > _float_rank[b.name] else b
        return a if a.is_float() else b
    if a.is_boolean():
        return b
    if b.is_boolean():
        return a
    if a.kind == b.kind:
        return a if a.nbytes > b.nbytes else b
    signed, unsigned = (a, b) if a.kind == 'int' else (b, a)
    return signed if signed.nbytes > unsigned.nbytes else data_type(f'int{min(unsigned.nbytes * 16, 64)}')


def _scalar_dtype(value, other: DataType) -> DataType:
    """The dtype a Python scalar takes beside a tensor operand of dtype ``other`` (torch's rule: the
    tensor's dtype wins unless the scalar is of a higher kind)."""
    if isinstance(value, bool):
        return other
    if isinstance(value, int):
        return int64 if other.is_boolean() else other
    return other if other.is_float() else float32


def binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """``a op b``; a Python scalar operand takes its dtype from the other operand as in torch."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        raise TypeError('binary needs at least one IR expression')
    if not isinstance(a, Expr):
        a = convert(a, _scalar_dtype(a, b.dtype))
    if not isinstance(b, Expr):
        b = convert(b, _scalar_dtype(b, a.dtype))
    if op in COMPARE_OPS or op in LOGIC_OPS:
        return Binary(op, a, b, boolean)
    return Binary(op, a, b, promote(a.dtype, b.dtype))


def equal(a: ExprLike, b: ExprLike) -> Expr:
    return binary('==', a, b)


def not_equal(a: ExprLike, b: ExprLike) -> Expr:
    return binary('!=', a, b)


def logical_and(*conds: Expr) -> Expr:
    result = conds[0]
    for c in conds[1:]:
        result = binary('&&', result, c)
    return result


def logical_or(*conds: Expr) -> Expr:
    result = conds[0]
    for c in conds[1:]:
        result = binary('||', result, c)
    return result


def logical_not(a: Expr) -> Expr:
    return Unary('!', a)


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    return binary('max', a, b)


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    return binary('min', a, b)


def select(cond: Expr, t: ExprLike, f: ExprLike) -> Expr:
    if isinstance(t, Expr) and not isinstance(f, Expr):
        f = convert(f, t.dtype)
    elif isinstance(f, Expr) and not isinstance(t, Expr):
        t = convert(t, f.dtype)
    t, f = convert(t), convert(f)
    if t.dtype != f.dtype:
        dtype = promote(t.dtype, f.dtype)
        t, f = cast(t, dtype), cast(f, dtype)
    return Select(cond, t, f)


def cast(a: ExprLike, dtype) -> Expr:
    a = convert(a)
    dtype = data_type(dtype)
    return a if a.dtype == dtype else Cast(a, dtype)


def call(func: str, *args: ExprLike, dtype=None) -> Expr:
    """A math function call; the result has the first argument's dtype unless ``dtype`` is given."""
    exprs = [convert(a) for a in args]
    return Call(func, exprs, exprs[0].dtype if dtype is None else data_type(dtype))


def index_vars(names: Sequence[str]) -> Tuple[Var, ...]:
    return tuple(Var(n, int64) for n in names)


class BufferLoad(Expr):
    """``buffer[index]``: a load from a kernel parameter at a flat element index (after scheduling)."""

    def __init__(self, buffer: Var, index: Expr, dtype: DataType):
        self.buffer, self.index, self.dtype = buffer, convert(index, int64), dtype
