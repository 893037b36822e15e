"""Conversions of torch's elementwise math (torch.*, torch.special.*, Python operators): unary functions,
two-argument math, bitwise and logical operators, interpolation and fused multiply-adds, the reductions
that go with them (logsumexp, nansum, nanmean, count_nonzero), and sorting (sort, argsort, topk, kthvalue,
median). Each maps onto hidet.ops with torch's dtype rules: integer inputs of floating math give float32,
16-bit floats compute in float32 and stay 16-bit."""
import math
import operator
from collections import namedtuple

import torch
from torch._inductor import inductor_prims

from hidet import ops
from hidet.frontend.torch.registry import register_function
from hidet.frontend.torch.utils import as_float, dims_arg, is_tensor, to_hidet_dtype
from hidet.graph.tensor import Tensor


# ---------------------------------------------------------------- unary math
def _unary(fn):
    def convert(input: Tensor, *, out=None):
        return fn(input)

    return convert


UNARY = (
    ((torch.exp,), ops.exp), ((torch.log,), ops.log), ((torch.sqrt,), ops.sqrt), ((torch.rsqrt,), ops.rsqrt),
    ((torch.sin,), ops.sin), ((torch.cos,), ops.cos), ((torch.tanh, torch.nn.functional.tanh), ops.tanh),
    ((torch.erf, torch.special.erf), ops.erf), ((torch.erfc, torch.special.erfc), ops.erfc),
    ((torch.floor,), ops.floor), ((torch.ceil,), ops.ceil),
    ((torch.trunc, torch.fix), ops.trunc), ((torch.abs, torch.absolute, operator.abs), ops.abs),
    ((torch.sigmoid, torch.nn.functional.sigmoid, torch.special.expit), ops.sigmoid),
    ((torch.relu, torch.relu_), ops.relu), ((torch.tan,), ops.tan), ((torch.asin, torch.arcsin), ops.asin),
    ((torch.acos, torch.arccos), ops.acos), ((torch.atan, torch.arctan), ops.atan), ((torch.sinh,), ops.sinh),
    ((torch.cosh,), ops.cosh), ((torch.asinh, torch.arcsinh), ops.asinh), ((torch.acosh, torch.arccosh), ops.acosh),
    ((torch.atanh, torch.arctanh), ops.atanh), ((torch.exp2, torch.special.exp2), ops.exp2),
    ((torch.expm1, torch.special.expm1), ops.expm1), ((torch.log2,), ops.log2), ((torch.log10,), ops.log10),
    ((torch.log1p, torch.special.log1p), ops.log1p), ((torch.isinf,), ops.isinf), ((torch.isfinite,), ops.isfinite),
    ((torch.isnan,), ops.isnan))
for _targets, _fn in UNARY:
    register_function(*_targets)(_unary(_fn))


@register_function(torch.reciprocal)
def reciprocal(input: Tensor):
    return ops.divide(1.0, as_float(input))


@register_function(torch.sign, torch.sgn)
def sign(input: Tensor):
    return ops.subtract(ops.cast(ops.greater(input, 0), input.dtype), ops.cast(ops.less(input, 0), input.dtype))


@register_function(torch.frac)
def frac(input: Tensor):
    return ops.subtract(input, ops.trunc(input))


@register_function(torch.signbit)
def signbit(input: Tensor):
    """The sign bit: True for -0.0 and negative NaNs too (copysign reads it)."""
    if not input.dtype.is_float():
        return ops.less(input, 0)
    return ops.less(ops.copysign(1.0, input), 0)


@register_function(torch.isposinf)
def isposinf(input: Tensor):
    return ops.equal(input, float('inf')) if input.dtype.is_float() else ops.not_equal(input, input)


@register_function(torch.isneginf)
def isneginf(input: Tensor):
    return ops.equal(input, float('-inf')) if input.dtype.is_float() else ops.not_equal(input, input)


@register_function(torch.logit, torch.special.logit)
def logit(input: Tensor, eps=None):
    x = as_float(input)
    if eps is not None:
        x = ops.clamp(x, eps, 1.0 - eps)
    return ops.log(ops.divide(x, ops.subtract(1.0, x)))


@register_function(torch.special.ndtr)
def ndtr(input: Tensor):
    """The standard normal CDF: erfc(-x / sqrt(2)) / 2."""
    return ops.multiply(ops.erfc(ops.multiply(as_float(input), -1.0 / math.sqrt(2.0))), 0.5)


# ---------------------------------------------------------------- two-argument math
def _two_argument(fn):
    def convert(input, other):
        return fn(input, other)

    return convert


atan2, hypot, copysign, fmod, logaddexp = (_two_argument(f) for f in (ops.atan2, ops.hypot, ops.copysign, ops.fmod,
                                                                       ops.logaddexp))
for _targets, _conv in (((torch.atan2, torch.arctan2), atan2), ((torch.hypot,), hypot),
                        ((torch.copysign,), copysign), ((torch.fmod,), fmod), ((torch.logaddexp,), logaddexp)):
    register_function(*_targets)(_conv)


@register_function(torch.xlogy, torch.special.xlogy)
def xlogy(input, other):
    """x * log(y), 0 where x is 0 (unless y is NaN)."""
    x = as_float(input) if is_tensor(input) else float(input)
    y = as_float(other) if is_tensor(other) else float(other)
    product = ops.multiply(x, ops.log(y) if is_tensor(y) else math.log(y))
    if is_tensor(x):
        zero = ops.equal(x, 0.0)
        if is_tensor(y):
            zero = ops.logical_and(zero, ops.logical_not(ops.isnan(y)))
        return ops.where(zero, 0.0, product)
    return product if x != 0 else ops.where(ops.isnan(y), float('nan'), 0.0)


@register_function(torch.lerp)
def lerp(input: Tensor, end, weight):
    """start + weight * (end - start), computed from the nearer end (as torch, for accuracy near weight 1)."""
    diff = ops.subtract(end, input)
    if not is_tensor(weight):
        return ops.add(input, ops.multiply(diff, weight)) if abs(weight) < 0.5 else \
            ops.subtract(end, ops.multiply(diff, 1.0 - weight))
    near_start = ops.less(ops.abs(weight), 0.5)
    return ops.where(near_start, ops.add(input, ops.multiply(weight, diff)),
                     ops.subtract(end, ops.multiply(diff, ops.subtract(1.0, weight))))


@register_function(torch.addcmul)
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1, out=None):
    return ops.add(input, ops.multiply(ops.multiply(tensor1, tensor2), value))


@register_function(torch.addcdiv)
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1, out=None):
    return ops.add(input, ops.multiply(ops.divide(tensor1, tensor2), value))


# ---------------------------------------------------------------- bitwise and logical operators
def _either_tensor(py_op, hidet_op):
    """``hidet_op`` where an operand is a tensor, else the Python operator (dynamo passes Python values too)."""
    def convert(a, b):
        if not is_tensor(a) and not is_tensor(b):
            return py_op(a, b)
        return hidet_op(a, b)

    return convert


for _targets, _py, _hidet in (
        ((operator.and_, operator.iand, torch.bitwise_and), operator.and_, ops.bitwise_and),
        ((operator.or_, operator.ior, torch.bitwise_or), operator.or_, ops.bitwise_or),
        ((operator.xor, operator.ixor, torch.bitwise_xor), operator.xor, ops.bitwise_xor),
        ((torch.logical_and,), operator.and_, ops.logical_and), ((torch.logical_or,), operator.or_, ops.logical_or)):
    register_function(*_targets)(_either_tensor(_py, _hidet))


@register_function(torch.logical_xor)
def logical_xor(a, b):
    if not is_tensor(a) and not is_tensor(b):
        return bool(a) != bool(b)
    return ops.not_equal(ops.cast(a, 'bool'), ops.cast(b, 'bool'))


@register_function(operator.invert, torch.bitwise_not)
def invert(x):
    if not is_tensor(x):
        return ~x
    return ops.bitwise_not(x)


@register_function(torch.logical_not)
def logical_not(x):
    return ops.logical_not(x) if is_tensor(x) else not x


# ---------------------------------------------------------------- reductions of math
@register_function(torch.logsumexp, torch.special.logsumexp)
def logsumexp(input: Tensor, dim, keepdim=False, *, out=None):
    return ops.logsumexp(input, dims_arg(dim), keepdim)


@register_function(torch.nansum)
def nansum(input: Tensor, dim=None, keepdim=False, *, dtype=None):
    x = ops.cast(input, to_hidet_dtype(dtype)) if dtype is not None else input
    return ops.nansum(x, dims_arg(dim), keepdim)


@register_function(torch.nanmean)
def nanmean(input: Tensor, dim=None, keepdim=False, *, dtype=None, out=None):
    x = ops.cast(input, to_hidet_dtype(dtype)) if dtype is not None else input
    return ops.nanmean(x, dims_arg(dim), keepdim)


@register_function(torch.count_nonzero)
def count_nonzero(input: Tensor, dim=None):
    return ops.count_nonzero(input, dims_arg(dim))


# ---------------------------------------------------------------- sorting (by ranks: see hidet.ops.sort)
SortResult = namedtuple('SortResult', ['values', 'indices'])


@register_function(torch.sort)
def sort(input: Tensor, dim=-1, descending=False, *, stable=False, out=None):
    return SortResult(*ops.sort(input, dim, descending))  # (always stable)


@register_function(torch.argsort)
def argsort(input: Tensor, dim=-1, descending=False, *, stable=False):
    return ops.argsort(input, dim, descending)


@register_function(torch.msort)
def msort(input: Tensor, *, out=None):
    return ops.sort(input, 0)[0]


@register_function(torch.topk)
def topk(input: Tensor, k, dim=-1, largest=True, sorted=True, *, out=None):
    return SortResult(*ops.topk(input, int(k), dim, largest))  # (sorted either way)


@register_function(torch.kthvalue)
def kthvalue(input: Tensor, k, dim=-1, keepdim=False, *, out=None):
    return SortResult(*ops.kthvalue(input, int(k), dim, keepdim))


@register_function(torch.median)
def median(input: Tensor, dim=None, keepdim=False, *, out=None):
    if dim is None:  # the lower median of all elements, without an index
        if isinstance(input.size, int) and input.size == 0:  # of no elements: NaN, as torch
            return ops.full([], float('nan'), input.dtype, input.device)
        return ops.median(ops.reshape(input, [-1]), 0)[0]
    return SortResult(*ops.median(input, dim, keepdim))


@register_function(inductor_prims.fma)
def fma(a, b, c):
    """a * b + c: dynamo decomposes in-place ``addcmul_`` / ``addcdiv_`` with a value, and ``add_`` / ``sub_``
    with a tensor alpha, into ``prims.fma`` and ``copy_``."""
    return ops.add(ops.multiply(a, b), c)


@register_function(torch.round)
def round_(input: Tensor, *, decimals: int = 0):
    """Half to even at ``decimals`` digits, as torch: round(x * 10^d) / 10^d (d < 0: round(x / 10^-d) * 10^-d)."""
    if decimals == 0:
        return ops.round(input)
    if decimals > 0:
        scale = float(10 ** decimals)
        return ops.divide(ops.round(ops.multiply(input, scale)), scale)
    scale = float(10 ** -decimals)
    return ops.multiply(ops.round(ops.divide(input, scale)), scale)
