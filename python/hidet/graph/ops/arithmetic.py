"""Elementwise operators: unary math and activations, binary arithmetic/comparison/logic with
broadcasting, where, clamp and cast. Each builds one compute definition; the auto-scheduler
turns it into a kernel."""
from __future__ import annotations

import math
from typing import Callable, Union

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import broadcast_shapes, input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute
from hidet.ir.dtypes import boolean, data_type, float32
from hidet.ir.expr import Expr, binary, call, cast, convert, logical_not, maximum, minimum, select
from hidet.ir.expr import logical_and as both, logical_or as either
from hidet.ir.schedulers.lowering import broadcast_indices
from hidet.ir.task import Task

Scalar = Union[int, float, bool]


class UnaryElementwiseOp(Operator):
    def __init__(self, x: Tensor, fn: Callable[[Expr], Expr], name: str, attrs=None):
        a = input_node('x', x)
        out = compute('y', a.shape, lambda *i: fn(a[i]))
        super().__init__([x], dict(attrs or {}, op=name), Task(name, [a], [out]))


class BinaryElementwiseOp(Operator):
    def __init__(self, x: Tensor, y: Tensor, fn: Callable[[Expr, Expr], Expr], name: str):
        a, b = input_node('x', x), input_node('y', y)
        shape = broadcast_shapes(name, a.shape, b.shape)
        out = compute('z', shape, lambda *i: fn(a[broadcast_indices(i, a.shape)], b[broadcast_indices(i, b.shape)]))
        super().__init__([x, y], {'op': name}, Task(name, [a, b], [out]))


class WhereOp(Operator):
    """``where(cond, x, y)``; ``x`` or ``y`` may be a Python scalar."""

    def __init__(self, cond: Tensor, x, y):
        tensors = [t for t in (cond, x, y) if isinstance(t, Tensor)]
        nodes = [input_node(name, t) for name, t in zip('cxy', tensors)]
        node_of = {id(t): n for t, n in zip(tensors, nodes)}
        shape = broadcast_shapes('where', *(n.shape for n in nodes))

        def operand(v, idx):
            if isinstance(v, Tensor):
                n = node_of[id(v)]
                return n[broadcast_indices(idx, n.shape)]
            return v

        out = compute('z', shape, lambda *i: select(cast(operand(cond, i), boolean), operand(x, i), operand(y, i)))
        attrs = {k: v for k, v in (('x', x), ('y', y)) if not isinstance(v, Tensor)}
        super().__init__(tensors, attrs, Task('where', nodes, [out]))


def _float(e: Expr) -> Expr:
    """Integer and bool inputs of floating-point math become float32, as in torch."""
    return e if e.dtype.is_float() else cast(e, float32)


def unary(x: Tensor, fn: Callable[[Expr], Expr], name: str) -> Tensor:
    return UnaryElementwiseOp(x, fn, name).get_output(0)


def _zero_dim_as_scalar(x: Tensor, y: Tensor):
    """torch's type promotion between a tensor with dimensions and a 0-d one: the 0-d tensor does not raise the
    result's dtype within its category (float32 x * float64 0-d → float32; float16 x > float32 0-d compares in
    float16), so it is cast to the other's dtype; of a higher category (an integer x * a float 0-d) it promotes
    as usual."""
    if (x.ndim == 0) == (y.ndim == 0) or x.dtype == y.dtype:
        return x, y
    dims, zero = (x, y) if y.ndim == 0 else (y, x)
    if _category(zero.dtype) > _category(dims.dtype):
        return x, y
    zero = cast_(zero, dims.dtype)
    return (dims, zero) if y.ndim == 0 else (zero, dims)


def _category(dtype) -> int:
    return 0 if dtype.is_boolean() else 1 if dtype.is_integer() else 2


def _binary(x, y, fn: Callable[[Expr, Expr], Expr], name: str) -> Tensor:
    if isinstance(x, Tensor) and isinstance(y, Tensor):
        x, y = _zero_dim_as_scalar(x, y)
        return BinaryElementwiseOp(x, y, fn, name).get_output(0)
    if isinstance(x, Tensor):
        return UnaryElementwiseOp(x, lambda a: fn(a, y), name, {'scalar': y}).get_output(0)
    if isinstance(y, Tensor):
        return UnaryElementwiseOp(y, lambda b: fn(x, b), name, {'scalar': x, 'scalar_first': True}).get_output(0)
    raise TypeError(f'{name}: expected at least one hidet.Tensor, got {type(x).__name__} and {type(y).__name__}')


# ---------------------------------------------------------------- unary math
def neg(x: Tensor) -> Tensor: return unary(x, lambda a: -a, 'neg')
def abs(x: Tensor) -> Tensor: return unary(x, lambda a: a if a.dtype.is_boolean() else call('abs', a), 'abs')  # noqa: A001
def exp(x: Tensor) -> Tensor: return unary(x, lambda a: call('exp', _float(a)), 'exp')
def log(x: Tensor) -> Tensor: return unary(x, lambda a: call('log', _float(a)), 'log')
def sqrt(x: Tensor) -> Tensor: return unary(x, lambda a: call('sqrt', _float(a)), 'sqrt')
def rsqrt(x: Tensor) -> Tensor: return unary(x, lambda a: call('rsqrt', _float(a)), 'rsqrt')
def sin(x: Tensor) -> Tensor: return unary(x, lambda a: call('sin', _float(a)), 'sin')
def cos(x: Tensor) -> Tensor: return unary(x, lambda a: call('cos', _float(a)), 'cos')
def tanh(x: Tensor) -> Tensor: return unary(x, lambda a: call('tanh', _float(a)), 'tanh')
def erf(x: Tensor) -> Tensor: return unary(x, lambda a: call('erf', _float(a)), 'erf')
def floor(x: Tensor) -> Tensor: return unary(x, lambda a: call('floor', a) if a.dtype.is_float() else a, 'floor')
def ceil(x: Tensor) -> Tensor: return unary(x, lambda a: call('ceil', a) if a.dtype.is_float() else a, 'ceil')
def round(x: Tensor) -> Tensor: return unary(x, lambda a: call('round', a) if a.dtype.is_float() else a, 'round')  # noqa: A001
def trunc(x: Tensor) -> Tensor: return unary(x, lambda a: call('trunc', a) if a.dtype.is_float() else a, 'trunc')
def logical_not_(x: Tensor) -> Tensor: return unary(x, lambda a: logical_not(cast(a, boolean)), 'logical_not')
def isnan(x: Tensor) -> Tensor: return unary(x, lambda a: call('isnan', a, dtype=boolean), 'isnan')


def _libm(name: str) -> Callable[[Tensor], Tensor]:
    """The C math library's ``name`` (16-bit floats computed in float32; integers give float32, as torch)."""
    def op(x: Tensor) -> Tensor:
        return unary(x, lambda a: call(name, _float(a)), name)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f'Elementwise {name} (C math library semantics, as torch).'
    return op


tan, asin, acos, atan = _libm('tan'), _libm('asin'), _libm('acos'), _libm('atan')
sinh, cosh, asinh, acosh, atanh = _libm('sinh'), _libm('cosh'), _libm('asinh'), _libm('acosh'), _libm('atanh')
exp2, expm1, log2, log10, log1p, erfc = _libm('exp2'), _libm('expm1'), _libm('log2'), _libm('log10'), \
    _libm('log1p'), _libm('erfc')


def isinf(x: Tensor) -> Tensor:
    return unary(x, lambda a: binary('==', call('abs', a), convert(float('inf'), a.dtype)) if a.dtype.is_float()
                 else convert(False, boolean), 'isinf')


def isfinite(x: Tensor) -> Tensor:
    """Neither infinite nor NaN (a NaN compares false)."""
    return unary(x, lambda a: binary('<', call('abs', a), convert(float('inf'), a.dtype)) if a.dtype.is_float()
                 else convert(True, boolean), 'isfinite')


def cast_(x: Tensor, dtype) -> Tensor:
    dtype = data_type(dtype)
    return x if x.dtype == dtype else unary(x, lambda a: cast(a, dtype), f'cast_{dtype.short_name}')


# ---------------------------------------------------------------- activations
def _sigmoid(a: Expr) -> Expr:
    return call('sigmoid', a)  # (one call: the GPU computes it from its approximate exp2 and reciprocal)


def relu(x: Tensor) -> Tensor: return unary(x, lambda a: maximum(a, 0), 'relu')
def sigmoid(x: Tensor) -> Tensor: return unary(x, lambda a: _sigmoid(_float(a)), 'sigmoid')
def silu(x: Tensor) -> Tensor: return unary(x, lambda a: _float(a) * _sigmoid(_float(a)), 'silu')


def gelu(x: Tensor, approximate: str = 'none') -> Tensor:
    if approximate == 'tanh':  # 0.5 a (1 + tanh(k (a + 0.044715 a^3))), its inner polynomial as a (k + k' a^2):
        k = math.sqrt(2.0 / math.pi)  # three instructions a value, not five (a GEMM's epilogue is bound by them)
        return unary(x, lambda a: 0.5 * a * (1.0 + call('tanh', a * (k + k * 0.044715 * (a * a)))), 'gelu_tanh')
    if approximate != 'none':
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return unary(x, lambda a: 0.5 * a * (1.0 + call('erf', a * (1.0 / math.sqrt(2.0)))), 'gelu')


def hardswish(x: Tensor) -> Tensor:
    return unary(x, lambda a: a * minimum(maximum(a + 3.0, 0.0), 6.0) / 6.0, 'hardswish')


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return UnaryElementwiseOp(x, lambda a: select(a > 0, a, a * negative_slope), 'leaky_relu',
                              {'negative_slope': negative_slope}).get_output(0)


def clamp(x: Tensor, min: Scalar = None, max: Scalar = None) -> Tensor:  # noqa: A002
    if min is None and max is None:
        raise ValueError('clamp: give at least one of min and max')

    def fn(a: Expr) -> Expr:
        if min is not None:
            a = maximum(a, min)
        if max is not None:
            a = minimum(a, max)
        return a

    return UnaryElementwiseOp(x, fn, 'clamp', {'min': min, 'max': max}).get_output(0)


# ---------------------------------------------------------------- binary
def add(x, y) -> Tensor: return _binary(x, y, lambda a, b: a + b, 'add')
def subtract(x, y) -> Tensor: return _binary(x, y, lambda a, b: a - b, 'subtract')
def multiply(x, y) -> Tensor: return _binary(x, y, lambda a, b: a * b, 'multiply')


def divide(x, y) -> Tensor:
    """True division: integer operands give float32, as torch; a Python float divides a float16 tensor in
    float16 (as in multiply), as torch."""
    def fn(a, b):
        if not convert(a).dtype.is_float() and not convert(b).dtype.is_float():
            return cast(convert(a), float32) / cast(convert(b), float32)
        return a / b

    return _binary(x, y, fn, 'divide')


def pow(x, y) -> Tensor:  # noqa: A001
    """``x ** y`` with torch's type promotion. Integer (and bool) ** integer stays integer, wrapping on
    overflow; a negative exponent in a tensor gives 1 for base 1, ±1 for base -1 and 0 for other bases, as
    torch; a negative Python int exponent of an integer tensor is an error, as in torch."""
    def is_int(v):
        return (v.dtype.is_integer() or v.dtype.is_boolean()) if isinstance(v, Tensor) else \
            isinstance(v, int) and not isinstance(v, bool)

    if isinstance(x, Tensor) and not isinstance(y, Tensor) and is_int(x) and is_int(y) and y < 0:
        raise ValueError(f'pow: integers to negative integer powers are not allowed ({x.dtype.name} tensor ** {y})')
    if all(isinstance(v, Tensor) and v.dtype.is_boolean() for v in (x, y)):
        raise TypeError('pow: not implemented for two bool tensors (as in torch); cast one to an integer dtype')
    return _binary(x, y, _pow, 'pow')


def _pow(a, b) -> Expr:
    dtype = binary('+', a, b).dtype  # torch's promotion, a Python scalar taking the tensor's dtype
    exponent = b if isinstance(b, (int, float)) and not isinstance(b, bool) else None
    a, b = cast(convert(a, dtype), dtype), cast(convert(b, dtype), dtype)
    if dtype.is_float() and exponent in _POWERS:  # as torch's pow_tensor_scalar: products, not a pow() call
        return _POWERS[exponent](a)
    return call('pow' if dtype.is_float() else 'ipow', a, b)


# float powers by a scalar that torch computes without pow() (GELU-tanh's x ** 3: a call costs tens of instructions)
_POWERS = {1: lambda a: a, 2: lambda a: a * a, 3: lambda a: a * a * a, 0.5: lambda a: call('sqrt', a),
           -1: lambda a: 1.0 / a, -2: lambda a: 1.0 / (a * a)}


def maximum_(x, y) -> Tensor: return _binary(x, y, maximum, 'maximum')
def minimum_(x, y) -> Tensor: return _binary(x, y, minimum, 'minimum')
def equal(x, y) -> Tensor: return _binary(x, y, lambda a, b: binary('==', a, b), 'equal')
def not_equal(x, y) -> Tensor: return _binary(x, y, lambda a, b: binary('!=', a, b), 'not_equal')
def less(x, y) -> Tensor: return _binary(x, y, lambda a, b: binary('<', a, b), 'less')
def less_equal(x, y) -> Tensor: return _binary(x, y, lambda a, b: binary('<=', a, b), 'less_equal')
def greater(x, y) -> Tensor: return _binary(x, y, lambda a, b: binary('>', a, b), 'greater')
def greater_equal(x, y) -> Tensor: return _binary(x, y, lambda a, b: binary('>=', a, b), 'greater_equal')


def _promoted(a, b, floating: bool = False):
    """``a`` and ``b`` in their promoted dtype (torch's rules; a Python scalar takes the tensor's dtype;
    ``floating``: integers promote to float32), and that dtype."""
    dtype = binary('+', a, b).dtype
    dtype = float32 if floating and not dtype.is_float() else dtype
    return cast(convert(a, dtype), dtype), cast(convert(b, dtype), dtype), dtype


def _libm2(name: str) -> Callable[[object, object], Tensor]:
    """The C math library's two-argument ``name``, with torch's promotion (integers give float32)."""
    def fn(a, b):
        a, b, _ = _promoted(a, b, floating=True)
        return call(name, a, b)

    def op(x, y) -> Tensor:
        return _binary(x, y, fn, name)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f'Elementwise {name}(x, y) (C math library semantics, as torch), with broadcasting.'
    return op


atan2, hypot, copysign = _libm2('atan2'), _libm2('hypot'), _libm2('copysign')




def _int_divmod(a: Expr, b: Expr):
    """C's truncated quotient and remainder of integers, defined everywhere: a divisor of 0 gives 0 and 0
    (torch raises on the CPU; a kernel cannot), and -1 is a negation (INT_MIN / -1 would trap)."""
    zero = binary('==', b, convert(0, b.dtype))
    signed = b.dtype.name.startswith('int')
    minus_one = binary('==', b, convert(-1, b.dtype)) if signed else convert(False, boolean)
    safe = select(either(zero, minus_one), convert(1, b.dtype), b)
    q = select(zero, convert(0, a.dtype), select(minus_one, convert(0, a.dtype) - a, a / safe))
    r = select(zero, convert(0, a.dtype), a - q * b)
    return q, r


def _floor_adjust(r: Expr, b: Expr) -> Expr:
    """Whether a truncated remainder ``r`` of a division by ``b`` needs the floor's correction."""
    zero = convert(0, r.dtype)
    return both(binary('!=', r, zero), binary('!=', binary('<', r, zero), binary('<', b, convert(0, b.dtype))))


def fmod(x, y) -> Tensor:
    """C's remainder, the sign of ``x`` (torch.fmod; Python's %, the sign of ``y``, is remainder)."""
    def fn(a, b):
        a, b, dtype = _promoted(a, b)
        return call('fmod', a, b) if dtype.is_float() else _int_divmod(a, b)[1]

    return _binary(x, y, fn, 'fmod')


def remainder(x, y) -> Tensor:
    """Python's %: the sign of ``y`` (torch.remainder); integer division by zero gives 0."""
    def fn(a, b):
        a, b, dtype = _promoted(a, b)
        r = call('fmod', a, b) if dtype.is_float() else _int_divmod(a, b)[1]
        return select(_floor_adjust(r, b), r + b, r)

    return _binary(x, y, fn, 'remainder')


def floor_divide(x, y) -> Tensor:
    """Python's //, rounding toward -inf (torch.floor_divide): integers stay integers (exact; a divisor of 0
    gives 0), floats are computed from fmod as torch does, so x // y and x % y agree."""
    def fn(a, b):
        a, b, dtype = _promoted(a, b)
        if not dtype.is_float():
            q, r = _int_divmod(a, b)
            return select(_floor_adjust(r, b), q - convert(1, dtype), q)
        mod = call('fmod', a, b)
        div = (a - mod) / b
        div = select(_floor_adjust(mod, b), div - convert(1.0, dtype), div)
        floor = call('floor', div)
        floor = select(binary('>', div - floor, convert(0.5, dtype)), floor + convert(1.0, dtype), floor)
        zero_b = binary('==', b, convert(0.0, dtype))
        return select(zero_b, a / b, select(binary('!=', div, convert(0.0, dtype)), floor,
                                            call('copysign', convert(0.0, dtype), a / b)))

    return _binary(x, y, fn, 'floor_divide')


def trunc_divide(x, y) -> Tensor:
    """Division rounding toward zero (torch.div(..., rounding_mode='trunc')): integers stay integers."""
    def fn(a, b):
        a, b, dtype = _promoted(a, b)
        return call('trunc', a / b) if dtype.is_float() else _int_divmod(a, b)[0]

    return _binary(x, y, fn, 'trunc_divide')


def _bitwise(op: str, name: str) -> Callable[[object, object], Tensor]:
    """Bitwise ``op`` of integers; of bools, the logical one (as torch)."""
    def fn(a, b):
        dtype = binary('+', a, b).dtype
        if dtype.is_float():
            raise TypeError(f'{name}: not defined for floating-point operands ({dtype.name}), as in torch')
        if dtype.is_boolean():
            return binary({'&': '&&', '|': '||', '^': '!='}[op], cast(convert(a), boolean), cast(convert(b), boolean))
        return binary(op, cast(convert(a, dtype), dtype), cast(convert(b, dtype), dtype))

    def apply(x, y) -> Tensor:
        return _binary(x, y, fn, name)

    apply.__name__ = apply.__qualname__ = name
    return apply


bitwise_and, bitwise_or, bitwise_xor = _bitwise('&', 'bitwise_and'), _bitwise('|', 'bitwise_or'), \
    _bitwise('^', 'bitwise_xor')


def bitwise_not(x: Tensor) -> Tensor:
    """~x: every bit flipped (for bools, logical not)."""
    def fn(a):
        if a.dtype.is_float():
            raise TypeError(f'bitwise_not: not defined for {a.dtype.name}, as in torch')
        if a.dtype.is_boolean():
            return logical_not(a)
        ones = -1 if a.dtype.name.startswith('int') else (1 << (8 * a.dtype.nbytes)) - 1
        return binary('^', a, convert(ones, a.dtype))

    return unary(x, fn, 'bitwise_not')


def logaddexp(x, y) -> Tensor:
    """log(exp(x) + exp(y)) without overflow (equal infinities give themselves, as torch)."""
    def fn(a, b):
        a, b, _ = _promoted(a, b, floating=True)
        m = maximum(a, b)
        return select(binary('==', a, b), a + math.log(2.0), m + call('log1p', call('exp', -call('abs', a - b))))

    return _binary(x, y, fn, 'logaddexp')


def logical_and(x, y) -> Tensor:
    return _binary(x, y, lambda a, b: binary('&&', cast(a, boolean), cast(b, boolean)), 'logical_and')


def logical_or(x, y) -> Tensor:
    return _binary(x, y, lambda a, b: binary('||', cast(a, boolean), cast(b, boolean)), 'logical_or')


def where(cond: Tensor, x, y) -> Tensor:
    if isinstance(x, Tensor) and isinstance(y, Tensor):
        x, y = _zero_dim_as_scalar(x, y)
    return WhereOp(cond, x, y).get_output(0)
