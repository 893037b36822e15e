"""Conversions of torch functions, Python operators and builtins (fx ``call_function`` targets)
to hidet.ops: elementwise math, comparisons, reductions, shape and indexing ops, creation-like ops.
The neural-network functions (torch.nn.functional) are in register_nn_functions.py, elementwise math and
bitwise logic in register_math_functions.py.

Each conversion takes the fx call's arguments (hidet Tensors where torch had tensors, Python values
elsewhere) with the torch function's parameter names and defaults, so ``inspect.signature().bind``
picks the right overload. Calls whose inputs are all constants never reach these conversions: the
interpreter evaluates them with torch itself (see interpreter.py)."""
import builtins
import operator
from collections import namedtuple
from typing import Optional

import torch

import hidet
from hidet import ops
from hidet.graph.tensor import Tensor
from hidet.frontend.torch.registry import register_function
from hidet.graph.ops.utils import normalize_axis
from hidet.frontend.torch.utils import (
    as_float, dims_arg, is_tensor, same_dtype, shape_arg, to_hidet_device, torch_size, to_hidet_dtype, to_torch_device,
    to_torch_dtype,
)

MinMax = namedtuple('MinMax', ['values', 'indices'])


# ---------------------------------------------------------------- no-ops (context managers dynamo records)
def _noop_targets():
    targets = [torch._C._set_grad_enabled]
    for mod, name in ((torch.amp.autocast_mode, '_enter_autocast'), (torch.amp.autocast_mode, '_exit_autocast'),
                      (torch, '_assert'), (torch, '_check'), (torch._C, '_log_api_usage_once'),
                      (torch.autograd.grad_mode, '_enter_inference_mode'),
                      (torch.autograd.grad_mode, '_exit_inference_mode')):
        if hasattr(mod, name):
            targets.append(getattr(mod, name))
    return targets


@register_function(*_noop_targets())
def noop(*args, **kwargs):
    return None


# ---------------------------------------------------------------- Python builtins on tensors and values
@register_function(builtins.getattr)
def getattr_(obj, name: str, *default):
    if is_tensor(obj):
        if name == 'shape':
            return torch_size(obj.shape)
        if name == 'dtype':
            return to_torch_dtype(obj.dtype)
        if name == 'device':
            return to_torch_device(obj.device)
        if name == 'ndim':
            return obj.ndim
        if name == 'is_cuda':
            return obj.device.is_cuda()
        if name in ('data', 'real'):
            return obj
        if name == 'T':
            return ops.permute(obj, list(reversed(range(obj.ndim))))
        if name == 'mT':
            return ops.transpose(obj, -1, -2)
    return builtins.getattr(obj, name, *default)


@register_function(operator.getitem)
def getitem(obj, key):
    return obj[key]  # hidet.Tensor.__getitem__ follows torch's indexing rules


@register_function(operator.setitem)
def setitem(obj, key, value):
    """``obj[key] = value`` as a new tensor (hidet.ops.index_assign); the interpreter rebinds ``obj`` to it."""
    if not isinstance(obj, Tensor):
        raise NotImplementedError(f'setitem on a {type(obj).__name__}: only tensors')
    if isinstance(value, torch.Tensor) or not isinstance(value, (Tensor, int, float, bool)):
        raise NotImplementedError(f'assigning a {type(value).__name__} into a tensor')
    return ops.index_assign(obj, key, value)


# ---------------------------------------------------------------- binary arithmetic
def _py_or_hidet(py_op, hidet_op):
    def apply(a, b):
        if is_tensor(a) or is_tensor(b):
            return hidet_op(a, b)
        return py_op(a, b)

    return apply


_add = _py_or_hidet(operator.add, ops.add)
_sub = _py_or_hidet(operator.sub, ops.subtract)
_mul = _py_or_hidet(operator.mul, ops.multiply)
_truediv = _py_or_hidet(operator.truediv, ops.divide)


@register_function(operator.add, operator.iadd)
def add(a, b):
    return _add(a, b)


@register_function(torch.add)
def torch_add(input, other, *, alpha=1, out=None):
    return _add(input, _mul(other, alpha) if alpha != 1 else other)


@register_function(operator.sub, operator.isub)
def sub(a, b):
    return _sub(a, b)


@register_function(torch.sub, torch.subtract)
def torch_sub(input, other, *, alpha=1, out=None):
    return _sub(input, _mul(other, alpha) if alpha != 1 else other)


@register_function(torch.rsub)
def torch_rsub(input, other, *, alpha=1):
    return _sub(other, _mul(input, alpha) if alpha != 1 else input)


@register_function(operator.mul, operator.imul, torch.mul, torch.multiply)
def mul(input, other, *, out=None):
    return _mul(input, other)


@register_function(operator.truediv, operator.itruediv, torch.true_divide)
def truediv(input, other, *, out=None):
    return _truediv(input, other)


def _floor_div(a, b):
    if not is_tensor(a) and not is_tensor(b):
        return a // b
    return ops.floor_divide(a, b)


@register_function(torch.div, torch.divide)
def torch_div(input, other, *, rounding_mode: Optional[str] = None, out=None):
    if rounding_mode is None:
        return _truediv(input, other)
    if rounding_mode == 'floor':
        return _floor_div(input, other)
    if rounding_mode == 'trunc':
        return ops.trunc_divide(input, other)
    raise ValueError(f'torch.div: unknown rounding_mode {rounding_mode!r}')


@register_function(operator.floordiv, operator.ifloordiv, torch.floor_divide)
def floordiv(input, other):
    return _floor_div(input, other)


@register_function(operator.mod, torch.remainder)
def mod(input, other):
    if not is_tensor(input) and not is_tensor(other):
        return input % other
    return ops.remainder(input, other)


@register_function(torch.float_power)
def float_power(input, exponent):
    """``pow`` in float64, as torch (the result is float64 whatever the inputs)."""
    def double(v):
        return ops.cast(v, 'float64') if is_tensor(v) else float(v)

    return pow_(double(input), double(exponent))


@register_function(operator.pow, operator.ipow, torch.pow)
def pow_(input, exponent):
    if not is_tensor(input) and not is_tensor(exponent):
        return input ** exponent
    if is_tensor(input) and not is_tensor(exponent):
        if exponent == 2:
            return ops.multiply(input, input)
        if exponent == 1:
            return input
        if exponent == 0.5:
            return ops.sqrt(input)
        if not input.dtype.is_float():
            input = ops.cast(input, 'float32')
    return ops.pow(input, exponent)


@register_function(torch.square)
def square(input):
    return ops.multiply(input, input)


@register_function(operator.matmul, operator.imatmul, torch.matmul, torch.mm, torch.bmm)
def matmul(input, other, *, out=None):
    same_dtype('matmul', input, other)
    return ops.matmul(input, other)


@register_function(torch.addmm)
def addmm(input, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1, out=None):
    same_dtype('addmm', input, mat1, mat2)
    y = ops.matmul(mat1, mat2)
    if alpha != 1:
        y = ops.multiply(y, alpha)
    return ops.add(y, ops.multiply(input, beta) if beta != 1 else input) if beta != 0 else y


@register_function(torch.baddbmm)
def baddbmm(input, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1, out=None):
    return addmm(input, batch1, batch2, beta=beta, alpha=alpha)


# ---------------------------------------------------------------- comparisons and logic
def _compare(py_op, hidet_op):
    def convert(input, other, *, out=None):
        if not is_tensor(input) and not is_tensor(other):
            return py_op(input, other)
        return hidet_op(input, other)

    return convert


for _targets, _py, _hidet in (
        ((operator.eq, torch.eq), operator.eq, ops.equal),
        ((operator.ne, torch.ne, torch.not_equal), operator.ne, ops.not_equal),
        ((operator.lt, torch.lt, torch.less), operator.lt, ops.less),
        ((operator.le, torch.le, torch.less_equal), operator.le, ops.less_equal),
        ((operator.gt, torch.gt, torch.greater), operator.gt, ops.greater),
        ((operator.ge, torch.ge, torch.greater_equal), operator.ge, ops.greater_equal)):
    register_function(*_targets)(_compare(_py, _hidet))


@register_function(operator.not_)
def not_(x):
    return not x


@register_function(operator.neg, torch.neg, torch.negative)
def neg(x):
    return ops.neg(x) if is_tensor(x) else -x


@register_function(operator.pos, torch.positive)
def pos(x):
    return x


@register_function(torch.where)
def where(condition: Tensor, input, other):
    if not is_tensor(input) and not is_tensor(other):
        input = hidet.asarray(input, device=condition.device)
    return ops.where(condition, input, other)


@register_function(torch.clamp, torch.clip)
def clamp(input: Tensor, min=None, max=None, *, out=None):  # noqa: A002
    if is_tensor(min) or is_tensor(max):
        if min is not None:
            input = ops.maximum(input, min)
        if max is not None:
            input = ops.minimum(input, max)
        return input
    if min is None and max is None:
        return input
    return ops.clamp(input, min, max)


@register_function(torch.clamp_min)
def clamp_min(input: Tensor, min):  # noqa: A002
    return clamp(input, min=min)


@register_function(torch.clamp_max)
def clamp_max(input: Tensor, max):  # noqa: A002
    return clamp(input, max=max)


@register_function(torch.maximum, torch.fmax)
def maximum(input, other, *, out=None):
    return ops.maximum(input, other)


@register_function(torch.minimum, torch.fmin)
def minimum(input, other, *, out=None):
    return ops.minimum(input, other)


@register_function(torch.masked_fill)
def masked_fill(input: Tensor, mask: Tensor, value):
    if is_tensor(value):
        value = ops.cast(value, input.dtype)
    return ops.where(mask, value, input) if is_tensor(value) else ops.where(mask, _scalar_like(value, input), input)


def _scalar_like(value, like: Tensor):
    """A Python scalar for a tensor of ``like``'s dtype (``-inf`` stays a float for float tensors)."""
    if like.dtype.is_float():
        return float(value)
    if like.dtype.name == 'bool':
        return bool(value)
    return int(value)


# ---------------------------------------------------------------- reductions
def _sum_dtype(input: Tensor, dtype):
    if dtype is not None:
        return ops.cast(input, to_hidet_dtype(dtype))
    if not input.dtype.is_float():
        return ops.cast(input, 'int64')  # torch sums integers and bools in int64
    return input


@register_function(torch.sum)
def sum_(input: Tensor, dim=None, keepdim=False, *, dtype=None, out=None):
    return ops.sum(_sum_dtype(input, dtype), dims_arg(dim), keepdim)


@register_function(torch.mean)
def mean(input: Tensor, dim=None, keepdim=False, *, dtype=None, out=None):
    if dtype is not None:
        input = ops.cast(input, to_hidet_dtype(dtype))
    return ops.mean(input, dims_arg(dim), keepdim)


@register_function(torch.prod)
def prod(input: Tensor, dim=None, keepdim=False, *, dtype=None):
    return ops.prod(_sum_dtype(input, dtype), dims_arg(dim), keepdim)


def _extreme(kind: str):
    reduce_fn, arg_fn, pair_fn = (ops.max, ops.argmax, ops.maximum) if kind == 'max' else \
        (ops.min, ops.argmin, ops.minimum)

    def convert(input: Tensor, dim=None, keepdim=False, *, out=None):
        if is_tensor(dim):  # torch.max(input, other)
            return pair_fn(input, dim)
        if dim is None:
            if isinstance(input.size, int) and input.size == 0:  # as torch: no value to give
                raise ValueError(f'{kind}(): an empty tensor {input.shape} has no {kind}imum (give a dim)')
            return reduce_fn(input)
        return MinMax(reduce_fn(input, [int(dim)], keepdim), arg_fn(input, int(dim), keepdim))

    return convert


register_function(torch.max)(_extreme('max'))
register_function(torch.min)(_extreme('min'))


@register_function(torch.amax)
def amax(input: Tensor, dim=(), keepdim=False, *, out=None):
    return ops.max(input, dims_arg(dim) or None, keepdim)


@register_function(torch.amin)
def amin(input: Tensor, dim=(), keepdim=False, *, out=None):
    return ops.min(input, dims_arg(dim) or None, keepdim)


@register_function(torch.argmax)
def argmax(input: Tensor, dim=None, keepdim=False):
    return ops.argmax(input, dim, keepdim)


@register_function(torch.argmin)
def argmin(input: Tensor, dim=None, keepdim=False):
    return ops.argmin(input, dim, keepdim)


@register_function(torch.any)
def any_(input: Tensor, dim=None, keepdim=False, *, out=None):
    return ops.any(input, dims_arg(dim), keepdim)


@register_function(torch.all)
def all_(input: Tensor, dim=None, keepdim=False, *, out=None):
    return ops.all(input, dims_arg(dim), keepdim)


def _correction(unbiased, correction) -> int:
    if correction is not None:
        return int(correction)
    return 0 if unbiased is False else 1


@register_function(torch.var)
def var(input: Tensor, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    if isinstance(dim, bool):  # torch.var(input, unbiased)
        dim, unbiased = None, dim
    return ops.var(input, dims_arg(dim), keepdim, _correction(unbiased, correction))


@register_function(torch.std)
def std(input: Tensor, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    if isinstance(dim, bool):  # torch.std(input, unbiased)
        dim, unbiased = None, dim
    return ops.std(input, dims_arg(dim), keepdim, _correction(unbiased, correction))


def _cumulative(op, input: Tensor, dim, dtype):
    """cumsum / cumprod as torch: integer and bool inputs accumulate in int64 unless ``dtype`` says otherwise; a
    0-d input is its own cumulative sum or product (dim 0 or -1)."""
    if dtype is not None:
        input = ops.cast(input, to_hidet_dtype(dtype))
    elif not input.dtype.is_float():
        input = ops.cast(input, 'int64')
    if input.ndim == 0:
        normalize_axis(op.__name__, dim, 0)
        return ops.reshape(op(ops.reshape(input, [1]), 0), [])
    return op(input, dim)


@register_function(torch.cumsum)
def cumsum(input: Tensor, dim, *, dtype=None, out=None):
    return _cumulative(ops.cumsum, input, dim, dtype)


@register_function(torch.cumprod)
def cumprod(input: Tensor, dim, *, dtype=None, out=None):
    return _cumulative(ops.cumprod, input, dim, dtype)


@register_function(torch.norm, torch.linalg.vector_norm)
def norm(input: Tensor, p=2, dim=None, keepdim=False, *, dtype=None, out=None):
    x = as_float(input)
    if x.dtype.name in ('float16', 'bfloat16'):  # as torch: computed in float32 (squares of 256 overflow float16)
        return ops.cast(_norm(ops.cast(x, 'float32'), p, dim, keepdim), x.dtype)
    return _norm(x, p, dim, keepdim)


def _norm(x: Tensor, p, dim, keepdim) -> Tensor:
    if p in (2, 'fro', None):
        return ops.sqrt(ops.sum(ops.multiply(x, x), dims_arg(dim), keepdim))
    if p == 1:
        return ops.sum(ops.abs(x), dims_arg(dim), keepdim)
    if p == float('inf'):
        return ops.max(ops.abs(x), dims_arg(dim), keepdim)
    if p == float('-inf'):
        return ops.min(ops.abs(x), dims_arg(dim), keepdim)
    if isinstance(p, str):
        raise NotImplementedError(f'norm with p={p!r} (a matrix norm: nuclear needs an SVD) is not supported; '
                                  'p may be a number, \'fro\' or None')
    if p == 0:  # how many elements are not zero
        return ops.sum(ops.cast(ops.not_equal(x, 0), x.dtype), dims_arg(dim), keepdim)
    return ops.pow(ops.sum(ops.pow(ops.abs(x), float(p)), dims_arg(dim), keepdim), 1.0 / p)


@register_function(torch.linalg.vector_norm)
def vector_norm(x: Tensor, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    if dtype is not None:
        x = ops.cast(x, to_hidet_dtype(dtype))
    return norm(x, ord, dim, keepdim)


# ---------------------------------------------------------------- shape and data movement
@register_function(torch.flatten)
def flatten(input: Tensor, start_dim=0, end_dim=-1):
    return ops.flatten(input, start_dim, end_dim)


@register_function(torch.reshape)
def reshape(input: Tensor, shape):
    return ops.reshape(input, shape_arg([shape]))


@register_function(torch.permute)
def permute(input: Tensor, dims):
    return ops.permute(input, dims_arg(dims))


@register_function(torch.transpose, torch.swapaxes, torch.swapdims)
def transpose(input: Tensor, dim0, dim1):
    return ops.transpose(input, dim0, dim1)


@register_function(torch.t)
def t(input: Tensor):
    return input if input.ndim < 2 else ops.transpose(input, 0, 1)


@register_function(torch.squeeze)
def squeeze(input: Tensor, dim=None):
    return ops.squeeze(input, dims_arg(dim))


@register_function(torch.unsqueeze)
def unsqueeze(input: Tensor, dim):
    return ops.unsqueeze(input, [int(dim)])


def _tensors_on_one_device(tensors):
    """Python scalars (and constants on the CPU beside CUDA tensors) made into tensors on the device
    of the others, for cat/stack."""
    tensors = list(tensors)
    dev = next((t.device for t in tensors if is_tensor(t) and t.is_symbolic()), None) or \
        next((t.device for t in tensors if is_tensor(t)), None)
    return [t.to(device=dev) if is_tensor(t) and not t.is_symbolic() and t.device != dev else t for t in tensors]


@register_function(torch.cat, torch.concat, torch.concatenate)
def cat(tensors, dim=0, *, out=None):
    return ops.concat(_tensors_on_one_device(tensors), dim)


@register_function(torch.stack)
def stack(tensors, dim=0, *, out=None):
    return ops.stack(_tensors_on_one_device(tensors), dim)


@register_function(torch.split)
def split(tensor: Tensor, split_size_or_sections, dim=0):
    return tuple(ops.split(tensor, split_size_or_sections, dim))


@register_function(torch.chunk)
def chunk(input: Tensor, chunks: int, dim=0):
    n = input.shape[dim]
    if isinstance(n, int) and n == 0:  # as torch: ``chunks`` empty pieces (a split would give one)
        return tuple(ops.strided_slice(input, [0], [0], axes=[dim]) for _ in range(chunks))
    size = -(-n // chunks)
    return tuple(ops.split(input, size, dim))


@register_function(torch.unbind)
def unbind(input: Tensor, dim=0):
    return tuple(ops.squeeze(p, [dim]) for p in ops.split(input, 1, dim))


@register_function(torch.tril)
def tril(input: Tensor, diagonal=0, *, out=None):
    return ops.tril(input, diagonal)


@register_function(torch.triu)
def triu(input: Tensor, diagonal=0, *, out=None):
    return ops.triu(input, diagonal)


@register_function(torch.gather)
def gather(input: Tensor, dim, index: Tensor, *, sparse_grad=False, out=None):
    return ops.gather(input, dim, index)


@register_function(torch.index_select)
def index_select(input: Tensor, dim, index: Tensor, *, out=None):
    return ops.index_select(input, dim, index)


@register_function(torch.flip)
def flip(input: Tensor, dims):
    return ops.flip(input, dims_arg(dims))


@register_function(torch.roll)
def roll(input: Tensor, shifts, dims=None):
    if dims is None:
        return ops.reshape(roll(ops.reshape(input, [-1]), shifts, 0), list(input.shape))
    for s, d in zip(dims_arg(shifts), dims_arg(dims)):
        n = input.shape[d]
        s = s % n if n else 0  # (an empty dimension: nothing to move)
        if s:
            a, b = ops.split(input, [n - s, s], d)
            input = ops.concat([b, a], d)
    return input


@register_function(torch.tile)
def tile(input: Tensor, dims):
    return ops.tile(input, dims_arg(dims))


@register_function(torch.repeat_interleave)
def repeat_interleave(input: Tensor, repeats, dim=None, *, output_size=None):
    if is_tensor(repeats):
        raise NotImplementedError('repeat_interleave with a tensor of repeats is not supported')
    if dim is None:
        input, dim = ops.reshape(input, [-1]), 0
    dim = dim % input.ndim
    shape = list(input.shape)
    x = ops.unsqueeze(input, [dim + 1])
    x = ops.broadcast(x, shape[:dim + 1] + [int(repeats)] + shape[dim + 1:])
    return ops.reshape(x, shape[:dim] + [shape[dim] * int(repeats)] + shape[dim + 1:])


@register_function(torch.broadcast_to)
def broadcast_to(input: Tensor, size):
    return ops.broadcast(input, shape_arg([size]))


@register_function(torch.narrow)
def narrow(input: Tensor, dim, start, length):
    if isinstance(start, Tensor):
        raise NotImplementedError('narrow with a tensor start: the slice would depend on the tensor\'s value, '
                                  'which hidet does not know when it compiles; pass an int')
    return ops.strided_slice(input, [start], [start + length], [dim])


@register_function(torch.select)
def select(input: Tensor, dim, index):
    return ops.squeeze(ops.strided_slice(input, [index], [index + 1 if index != -1 else input.shape[dim]], [dim]),
                       [dim])


@register_function(torch.clone, torch.detach)
def clone(input, *, memory_format=None):
    return input


# ---------------------------------------------------------------- creation like a (dynamic) tensor
def _like(value_fn):
    def convert(input: Tensor, *args, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False,
                memory_format=None):
        dtype = to_hidet_dtype(dtype) or input.dtype
        device = to_hidet_device(device) or input.device
        return value_fn(list(input.shape), dtype, device, *args)

    return convert


register_function(torch.zeros_like, torch.empty_like)(_like(lambda s, dt, dev: hidet.zeros(s, dt, dev)))
register_function(torch.ones_like)(_like(lambda s, dt, dev: hidet.ones(s, dt, dev)))
register_function(torch.full_like)(_like(lambda s, dt, dev, v: hidet.full(s, v, dt, dev)))


# ---------------------------------------------------------------- symbolic sizes
@register_function(torch.Size)
def size_of(sizes=()):
    return torch_size(list(sizes))


@register_function(torch.ops.aten.sym_size.int)
def sym_size(input: Tensor, dim: int):
    return input.shape[dim]


@register_function(torch.ops.aten.sym_numel.default)
def sym_numel(input: Tensor):
    return input.numel()  # (an expression of the symbols for a symbolic tensor)


@register_function(torch.ops.aten._assert_scalar.default)
def assert_scalar(cond, msg=''):
    """dynamo's checks of its assumptions on sizes (``s0 >= 1``): hidet cannot evaluate a symbolic one before
    the graph runs, where dynamo's guards have already checked them; a static False fails the build."""
    if isinstance(cond, bool) and not cond:
        raise ValueError(f'a size assertion of the graph fails: {msg}')


# ---------------------------------------------------------------- creation of symbolic sizes
# (with static sizes these calls have no dynamic argument: the interpreter runs them in torch at once)
@register_function(torch.arange)
def arange(*args, dtype=None, device=None, layout=None, pin_memory=False, requires_grad=False, out=None):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if dtype is None:
        dtype = torch.float32 if any(isinstance(v, float) for v in (start, end, step)) else torch.int64
    return ops.arange(start, end, step, to_hidet_dtype(dtype), to_hidet_device(device) or 'cpu')


def _filled(fill):
    def convert(*size, dtype=None, device=None, layout=None, pin_memory=False, requires_grad=False, out=None,
                memory_format=None):
        return ops.full(shape_arg(size), fill, to_hidet_dtype(dtype) or hidet.float32,
                        to_hidet_device(device) or 'cpu')

    return convert


register_function(torch.zeros, torch.empty)(_filled(0))
register_function(torch.ones)(_filled(1))


@register_function(torch.full)
def full(size, fill_value, *, dtype=None, device=None, layout=None, pin_memory=False, requires_grad=False, out=None):
    dtype = to_hidet_dtype(dtype) or (hidet.float32 if isinstance(fill_value, float) else
                                      hidet.boolean if isinstance(fill_value, bool) else hidet.int64)
    return ops.full(shape_arg([size]), fill_value, dtype, to_hidet_device(device) or 'cpu')
