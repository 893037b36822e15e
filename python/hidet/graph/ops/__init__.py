"""hidet.ops: the operator library, imperative on concrete tensors (each op compiles its kernel on
first use; kernels are cached on disk and in the process)."""
from .arithmetic import (
    abs, add, cast_ as cast, ceil, clamp, cos, divide, equal, erf, exp, floor, gelu, greater, greater_equal,
    hardswish, isnan, leaky_relu, less, less_equal, log, logical_and, logical_not_ as logical_not, logical_or,
    maximum_ as maximum, minimum_ as minimum, multiply, neg, not_equal, pow, relu, round, rsqrt, sigmoid, silu, sin,
    sqrt, subtract, tanh, where,
)
from .matmul import matmul
from .reduce import all, any, max, mean, min, prod, sum
