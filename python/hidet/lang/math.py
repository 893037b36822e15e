"""Math functions for Hidet Script: on IR values they become calls (std:: on the CPU, CUDA's math
library on the GPU; 16-bit floats compute in float32); on Python numbers they compute at once."""
from __future__ import annotations

import builtins
import math as _pymath

from hidet.ir.dtypes import boolean, float32
from hidet.ir.expr import Expr, call, cast, maximum, minimum

__all__ = ['exp', 'exp2', 'expm1', 'log', 'log2', 'log1p', 'sqrt', 'rsqrt', 'sin', 'cos', 'tan', 'tanh', 'sinh',
           'cosh', 'asin', 'acos', 'atan', 'erf', 'pow', 'abs', 'floor', 'ceil', 'round', 'trunc', 'fmod', 'max',
           'min', 'isnan']


def _float(x) -> Expr:
    return x if x.dtype.is_float() else cast(x, float32)


def _unary(name: str, py):
    def fn(x):
        if isinstance(x, Expr):
            return call(name, _float(x))
        return py(x)

    fn.__name__ = name
    fn.__doc__ = f'{name}(x)'
    return fn


exp = _unary('exp', _pymath.exp)
exp2 = _unary('exp2', lambda x: 2.0 ** x)
expm1 = _unary('expm1', _pymath.expm1)
log = _unary('log', _pymath.log)
log2 = _unary('log2', _pymath.log2)
log1p = _unary('log1p', _pymath.log1p)
sqrt = _unary('sqrt', _pymath.sqrt)
rsqrt = _unary('rsqrt', lambda x: 1.0 / _pymath.sqrt(x))
sin = _unary('sin', _pymath.sin)
cos = _unary('cos', _pymath.cos)
tan = _unary('tan', _pymath.tan)
tanh = _unary('tanh', _pymath.tanh)
sinh = _unary('sinh', _pymath.sinh)
cosh = _unary('cosh', _pymath.cosh)
asin = _unary('asin', _pymath.asin)
acos = _unary('acos', _pymath.acos)
atan = _unary('atan', _pymath.atan)
erf = _unary('erf', _pymath.erf)
floor = _unary('floor', _pymath.floor)
ceil = _unary('ceil', _pymath.ceil)
round = _unary('round', builtins.round)
trunc = _unary('trunc', _pymath.trunc)


def abs(x):
    return call('abs', x) if isinstance(x, Expr) else builtins.abs(x)


def pow(x, y):
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        return x ** y
    x = _float(x) if isinstance(x, Expr) else cast(x, _float(y).dtype)
    return call('pow', x, y)


def fmod(x, y):
    if not isinstance(x, Expr) and not isinstance(y, Expr):
        return _pymath.fmod(x, y)
    x = _float(x) if isinstance(x, Expr) else cast(x, _float(y).dtype)
    return call('fmod', x, y)


def max(a, b):
    return maximum(a, b) if isinstance(a, Expr) or isinstance(b, Expr) else builtins.max(a, b)


def min(a, b):
    return minimum(a, b) if isinstance(a, Expr) or isinstance(b, Expr) else builtins.min(a, b)


def isnan(x):
    return call('isnan', x, dtype=boolean) if isinstance(x, Expr) else _pymath.isnan(x)
