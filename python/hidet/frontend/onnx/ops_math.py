"""Elementwise ONNX operators: unary math and activations, binary arithmetic, comparison and logic
(numpy broadcasting), variadic Min/Max/Sum/Mean, Where, Clip, Einsum."""
from __future__ import annotations

import numpy as np

from hidet.graph import ops
from hidet.frontend.onnx.registry import register
from hidet.frontend.onnx.utils import value_dtype
from hidet.graph.ops.arithmetic import BinaryElementwiseOp, unary
from hidet.graph.tensor import Tensor
from hidet.ir.dtypes import boolean, float32, float64
from hidet.ir.expr import binary, call, cast, convert, logical_or, maximum, minimum, select


def _f(a):
    """Math on 16-bit floats runs in float32."""
    return cast(a, float32) if a.dtype.name in ('float16', 'bfloat16') else a


def _ew(ctx, x, fn, name):
    """An elementwise op computing ``fn`` in float32 for 16-bit inputs, giving the input's dtype."""
    return unary(ctx.tensor(x), lambda a: cast(fn(_f(a)), a.dtype), name)


# ---------------------------------------------------------------- unary math
_HIDET_UNARY = {'Abs': ops.abs, 'Neg': ops.neg, 'Exp': ops.exp, 'Log': ops.log, 'Sqrt': ops.sqrt,
                'Floor': ops.floor, 'Ceil': ops.ceil, 'Sin': ops.sin, 'Cos': ops.cos, 'Tanh': ops.tanh,
                'Erf': ops.erf, 'Relu': ops.relu, 'Sigmoid': ops.sigmoid, 'IsNaN': ops.isnan, 'Not': ops.logical_not,
                'Tan': ops.tan, 'Atan': ops.atan, 'Asin': ops.asin, 'Acos': ops.acos, 'Sinh': ops.sinh,
                'Cosh': ops.cosh, 'Acosh': ops.acosh, 'Asinh': ops.asinh, 'Atanh': ops.atanh}


@register(list(_HIDET_UNARY))
def hidet_unary(ctx, x):
    return _HIDET_UNARY[ctx.node.op_type](ctx.tensor(x))


@register('Shrink', attrs={'bias': 0.0, 'lambd': 0.5})
def shrink(ctx, x):
    bias, lambd = ctx.attrs['bias'], ctx.attrs['lambd']

    def fn(a):
        f = cast(a, float32)
        y = select(f < -lambd, f + bias, select(f > lambd, f - bias, convert(0.0, float32)))
        return cast(y, a.dtype)

    return unary(ctx.tensor(x), fn, 'shrink')


_BITWISE = {'BitwiseAnd': ops.bitwise_and, 'BitwiseOr': ops.bitwise_or, 'BitwiseXor': ops.bitwise_xor}


@register(list(_BITWISE), since=18)
def bitwise(ctx, x, y):
    return _BITWISE[ctx.node.op_type](ctx.tensor(x), ctx.tensor(y))


@register('BitwiseNot', since=18)
def bitwise_not(ctx, x):
    return ops.bitwise_not(ctx.tensor(x))


@register('Reciprocal')
def reciprocal(ctx, x):
    return _ew(ctx, x, lambda a: 1.0 / a, 'reciprocal')


@register('Sign')
def sign(ctx, x):
    return unary(ctx.tensor(x), lambda a: select(a > 0, convert(1, a.dtype),
                                                 select(a < 0, convert(-1, a.dtype), convert(0, a.dtype))), 'sign')


@register('Round')
def round_half_even(ctx, x):
    def fn(a):
        f = call('floor', a)
        d = a - f
        odd = f - 2.0 * call('floor', f * 0.5)  # 1 when f is odd
        return select(d > 0.5, f + 1.0, select(d < 0.5, f, f + odd))

    t = ctx.tensor(x)
    return _ew(ctx, t, fn, 'round_half_even') if t.dtype.is_float() else t


@register('IsInf', attrs={'detect_negative': 1, 'detect_positive': 1})
def isinf(ctx, x):
    pos, neg = ctx.attrs['detect_positive'], ctx.attrs['detect_negative']

    def fn(a):
        hits = []
        if pos:
            hits.append(binary('==', a, convert(float('inf'), a.dtype)))
        if neg:
            hits.append(binary('==', a, convert(float('-inf'), a.dtype)))
        return logical_or(*hits) if len(hits) > 1 else hits[0] if hits else convert(False, boolean)

    return unary(ctx.tensor(x), fn, 'isinf')


# ---------------------------------------------------------------- activations
@register('LeakyRelu', attrs={'alpha': 0.01})
def leaky_relu(ctx, x):
    return ops.leaky_relu(ctx.tensor(x), ctx.attrs['alpha'])


@register('Gelu', since=20, attrs={'approximate': 'none'},
          check=lambda a: None if a['approximate'] in ('none', 'tanh') else f"approximate={a['approximate']!r}")
def gelu(ctx, x):
    return ops.gelu(ctx.tensor(x), ctx.attrs['approximate'])


@register('Elu', attrs={'alpha': 1.0})
def elu(ctx, x):
    alpha = ctx.attrs['alpha']
    return _ew(ctx, x, lambda a: select(a < 0, alpha * (call('exp', a) - 1.0), a), 'elu')


@register('Celu', attrs={'alpha': 1.0})
def celu(ctx, x):
    alpha = ctx.attrs['alpha']
    return _ew(ctx, x, lambda a: maximum(a, 0.0) + minimum(0.0, alpha * (call('exp', a / alpha) - 1.0)), 'celu')


@register('Selu', attrs={'alpha': 1.67326319217681884765625, 'gamma': 1.05070102214813232421875})
def selu(ctx, x):
    alpha, gamma = ctx.attrs['alpha'], ctx.attrs['gamma']
    return _ew(ctx, x, lambda a: select(a <= 0, gamma * (alpha * call('exp', a) - alpha), gamma * a), 'selu')


@register('ThresholdedRelu', attrs={'alpha': 1.0})
def thresholded_relu(ctx, x):
    alpha = ctx.attrs['alpha']
    return _ew(ctx, x, lambda a: select(a > alpha, a, 0.0), 'thresholded_relu')


@register('Softplus')
def softplus(ctx, x):
    # log(1 + exp(x)), written to neither overflow for large x nor lose small ones
    return _ew(ctx, x, lambda a: maximum(a, 0.0) + call('log1p', call('exp', -call('abs', a))), 'softplus')


@register('Softsign')
def softsign(ctx, x):
    return _ew(ctx, x, lambda a: a / (1.0 + call('abs', a)), 'softsign')


@register('Mish')
def mish(ctx, x):
    return _ew(ctx, x, lambda a: a * call('tanh', maximum(a, 0.0) + call('log1p', call('exp', -call('abs', a)))),
               'mish')


@register('HardSigmoid', attrs={'alpha': 0.2, 'beta': 0.5})
def hard_sigmoid(ctx, x):
    alpha, beta = ctx.attrs['alpha'], ctx.attrs['beta']
    return _ew(ctx, x, lambda a: maximum(minimum(a * alpha + beta, 1.0), 0.0), 'hard_sigmoid')


@register('HardSwish')
def hard_swish(ctx, x):
    return ops.hardswish(ctx.tensor(x))


@register('Swish', since=24, attrs={'alpha': 1.0})
def swish(ctx, x):
    alpha = ctx.attrs['alpha']
    return _ew(ctx, x, lambda a: a / (1.0 + call('exp', -alpha * a)), 'swish')


@register('SwiGLU', since=28, attrs={'alpha': 1.0})
def swiglu(ctx, a, b):
    """Swish_alpha(A) · B: the gated activation of Llama-style MLPs."""
    a, b = ctx.tensor(a), ctx.tensor(b)
    if a.shape != b.shape:
        raise ValueError(f'SwiGLU: the gate {a.shape} and the value {b.shape} must have one shape')
    return ops.multiply(swish(ctx, a), b)


@register('PRelu')
def prelu(ctx, x, slope):
    x = ctx.tensor(x)
    return ops.where(ops.less(x, 0), ops.multiply(x, _operand(ctx, slope, x)), x)


# ---------------------------------------------------------------- binary
def _operand(ctx, v, other):
    """A one-element constant as a Python scalar (folded into the kernel), anything else as a tensor."""
    if isinstance(v, np.ndarray) and v.size == 1 and (other is None or v.ndim <= len(other.shape)):
        return v.reshape(-1)[0].item()
    return ctx.tensor(v)


def _pair(ctx, a, b):
    """Both operands, at most one of them a Python scalar; the tensor operand gives the dtype."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return ctx.tensor(a), ctx.tensor(b)
    if isinstance(a, np.ndarray):
        return _operand(ctx, a, b), b
    if isinstance(b, np.ndarray):
        return a, _operand(ctx, b, a)
    return a, b


_ARITH = {'Add': ops.add, 'Sub': ops.subtract, 'Mul': ops.multiply}
_COMPARE = {'Equal': ops.equal, 'Less': ops.less, 'LessOrEqual': ops.less_equal, 'Greater': ops.greater,
            'GreaterOrEqual': ops.greater_equal, 'And': ops.logical_and, 'Or': ops.logical_or, 'Xor': ops.not_equal}


@register(list(_ARITH))
def arith(ctx, a, b):
    x, y = _pair(ctx, a, b)
    dtype = value_dtype(a if isinstance(a, Tensor) else b)
    out = _ARITH[ctx.node.op_type](x, y)
    return out if out.dtype == dtype else ops.cast(out, dtype)


@register(list(_COMPARE))
def compare(ctx, a, b):
    x, y = _pair(ctx, a, b)
    return _COMPARE[ctx.node.op_type](x, y)


@register('Div')
def div(ctx, a, b):
    dtype = value_dtype(a)
    if dtype.is_float():
        return ops.divide(*_pair(ctx, a, b))
    # integer division truncates toward zero (C semantics, as onnxruntime)
    return BinaryElementwiseOp(ctx.tensor(a), ctx.tensor(b), lambda p, q: p / q, 'int_divide').get_output(0)


@register('Mod', attrs={'fmod': 0})
def mod(ctx, a, b):
    """fmod=1: C's remainder (the dividend's sign); else Python's % (the divisor's sign, as numpy.mod)."""
    return (ops.fmod if ctx.attrs['fmod'] else ops.remainder)(ctx.tensor(a), ctx.tensor(b))


@register('Pow')
def pow_(ctx, a, b):
    x = ctx.tensor(a)
    if isinstance(b, np.ndarray) and b.size == 1 and b.ndim <= x.ndim and x.dtype.is_float():
        e = float(b.reshape(-1)[0])
        if e == 2.0:
            return ops.multiply(x, x)
        if e == 1.0:
            return x
        if e == 0.5:
            return ops.sqrt(x)
        return _ew(ctx, x, lambda p: call('pow', p, convert(e, p.dtype)), 'pow_scalar')
    y = ctx.tensor(b)
    if x.dtype.is_float():
        return BinaryElementwiseOp(x, y, lambda p, q: cast(call('pow', _f(p), cast(q, _f(p).dtype)), p.dtype),
                                   'pow').get_output(0)
    return BinaryElementwiseOp(x, y, lambda p, q: cast(call('pow', cast(p, float64), cast(q, float64)), p.dtype),
                               'int_pow').get_output(0)


@register('BitShift', attrs={'direction': 'LEFT'})
def bit_shift(ctx, a, b):
    left = ctx.attrs['direction'] == 'LEFT'

    def shift(p, q):
        bits = p.dtype.nbytes * 8
        out_of_range = logical_or(binary('<', q, 0), binary('>=', q, bits))
        if left:
            return select(out_of_range, convert(0, p.dtype), binary('<<', p, q))
        # shifting right by the width or more leaves the sign bits
        fill = select(binary('<', p, 0), convert(-1, p.dtype), convert(0, p.dtype)) if p.dtype.kind == 'int' \
            else convert(0, p.dtype)
        return select(out_of_range, fill, binary('>>', p, q))

    return BinaryElementwiseOp(ctx.tensor(a), ctx.tensor(b), shift, 'bitshift').get_output(0)


# ---------------------------------------------------------------- variadic
def _reduce_many(ctx, values, fn):
    tensors = [v for v in values if v is not None]
    out = ctx.tensor(tensors[0])
    for v in tensors[1:]:
        out = fn(out, ctx.tensor(v))
    return out


@register('Max')
def max_(ctx, *xs):
    return _reduce_many(ctx, xs, ops.maximum)


@register('Min')
def min_(ctx, *xs):
    return _reduce_many(ctx, xs, ops.minimum)


@register('Sum')
def sum_(ctx, *xs):
    return _reduce_many(ctx, xs, ops.add)


@register('Mean')
def mean_(ctx, *xs):
    n = len([x for x in xs if x is not None])
    out = _reduce_many(ctx, xs, ops.add)
    return ops.cast(ops.divide(out, float(n)), out.dtype) if n > 1 else out


# ---------------------------------------------------------------- select
@register('Where')
def where(ctx, cond, a, b):
    c = ctx.tensor(cond)
    dtype = value_dtype(a)

    def side(v):
        if isinstance(v, np.ndarray) and v.size == 1 and v.ndim <= c.ndim:
            return v.reshape(-1)[0].item()
        return ctx.tensor(v)

    x, y = side(a), side(b)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = ctx.tensor(a)
    out = ops.where(c, x, y)
    return out if out.dtype == dtype else ops.cast(out, dtype)


@register('Clip')
def clip(ctx, x, lo=None, hi=None):
    x = ctx.tensor(x)
    out = x
    if ctx.is_static(lo) and ctx.is_static(hi):
        lo_v, hi_v = ctx.scalar(lo, 'min'), ctx.scalar(hi, 'max')
        if lo_v is None and hi_v is None:
            return x
        if x.dtype.is_float():
            lo_v = None if lo_v is None else float(lo_v)
            hi_v = None if hi_v is None else float(hi_v)
        return ops.clamp(x, lo_v, hi_v)
    if lo is not None:
        out = ops.maximum(out, ctx.tensor(lo))
    if hi is not None:
        out = ops.minimum(out, ctx.tensor(hi))
    return out


# ---------------------------------------------------------------- einsum
@register('Einsum', attrs={'equation': ''})
def einsum(ctx, *operands):
    return ops.einsum(ctx.attrs['equation'], *[ctx.tensor(v) for v in operands])

