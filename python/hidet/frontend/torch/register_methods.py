"""Conversions of torch.Tensor methods (fx ``call_method`` nodes, keyed by the method's name; the
first argument is the tensor). In-place methods (``add_``, ``masked_fill_``, …) convert like their
functional twins; the interpreter then rebinds the mutated tensor to the result."""
from typing import Optional

import torch

import hidet
from hidet import ops
from hidet.frontend.torch import (register_functions as fn, register_linalg_functions as la,
                                        register_math_functions as mf, register_nn_functions as nn_fn)
from hidet.frontend.torch.registry import register_method
from hidet.frontend.torch.utils import is_tensor, shape_arg, to_hidet_device, to_hidet_dtype, torch_size
from hidet.graph.tensor import Tensor

T = torch.Tensor


# ---------------------------------------------------------------- metadata
@register_method(T.size)
def size(self: Tensor, dim: Optional[int] = None):
    return torch_size(self.shape) if dim is None else self.shape[dim]


@register_method(T.dim, T.ndimension)
def dim(self: Tensor):
    return self.ndim


@register_method(T.numel, 'nelement')
def numel(self: Tensor):
    return self.numel()


@register_method(T.is_floating_point)
def is_floating_point(self: Tensor):
    return self.dtype.is_float()


@register_method(T.get_device)
def get_device(self: Tensor):
    return self.device.id if self.device.is_cuda() else -1


@register_method(T.item)
def item(self: Tensor):
    """A one-element tensor's value. dynamo calls ``.item()`` in the graph on a Python number passed to the
    compiled function that changed between calls (a temperature, a scale: it passes the number as a 0-d float64
    or int64 tensor, moved to the graph's device at each call): the value stays that 0-d tensor, which the ops
    then read as torch reads the number (a 0-d operand does not promote the other's dtype within its category:
    hidet.ops' arithmetic), so one build serves every value. A constant's value is the Python number."""
    if self.numel() != 1:
        raise ValueError(f'item: a tensor of {self.numel()} elements {list(self.shape)} has no single value '
                         f'(torch: a Tensor with {self.numel()} elements cannot be converted to Scalar)')
    if not self.is_symbolic():
        return self.numpy().reshape(()).item() if self.dtype.name != 'bfloat16' else \
            self.to('float32').numpy().reshape(()).item()
    return ops.reshape(self, []) if self.ndim else self


@register_method(T.contiguous, T.clone, T.detach, T.detach_, T.requires_grad_)
def identity(self: Tensor, *args, **kwargs):
    return self


# ---------------------------------------------------------------- dtype and device
def _cast(self: Tensor, dtype) -> Tensor:
    return ops.cast(self, to_hidet_dtype(dtype))


@register_method(T.to)
def to(self: Tensor, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    for a in args:
        if is_tensor(a):
            dtype, device = a.dtype, a.device
        elif isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, (str, torch.device, int)) and not isinstance(a, bool):  # (bools: non_blocking, copy)
            device = a
    if device is not None:
        target = to_hidet_device(device)
        if target != self.device:
            if self.is_symbolic():
                raise NotImplementedError(f'moving a tensor from {self.device} to {target} inside a compiled graph '
                                          'is not supported')
            self = self.to(device=target)
    return _cast(self, dtype) if dtype is not None else self


@register_method(T.type)
def type_(self: Tensor, dtype=None, non_blocking=False):
    if dtype is None:
        raise NotImplementedError('Tensor.type() without a dtype (the type name) is not supported')
    if isinstance(dtype, str):
        dtype = {'torch.FloatTensor': torch.float32, 'torch.HalfTensor': torch.float16,
                 'torch.LongTensor': torch.int64, 'torch.IntTensor': torch.int32,
                 'torch.BoolTensor': torch.bool}.get(dtype, dtype)
    return _cast(self, dtype)


@register_method(T.type_as)
def type_as(self: Tensor, other: Tensor):
    return ops.cast(self, other.dtype)


for _name, _dtype in (('float', 'float32'), ('half', 'float16'), ('bfloat16', 'bfloat16'), ('double', 'float64'),
                      ('int', 'int32'), ('long', 'int64'), ('bool', 'bool'), ('short', 'int16'), ('char', 'int8'),
                      ('byte', 'uint8')):
    register_method(_name)(lambda self, memory_format=None, _d=_dtype: ops.cast(self, _d))


@register_method('cuda')
def cuda(self: Tensor, device=None, non_blocking=False, memory_format=None):
    return to(self, device=device if device is not None else 'cuda')


@register_method('cpu')
def cpu(self: Tensor, memory_format=None):
    return to(self, device='cpu')


# ---------------------------------------------------------------- shape
@register_method(T.view, T.reshape)
def view(self: Tensor, *shape):
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        raise NotImplementedError('Tensor.view(dtype) (reinterpreting bits) is not supported')
    return ops.reshape(self, shape_arg(shape))


@register_method(T.view_as, T.reshape_as)
def view_as(self: Tensor, other: Tensor):
    return ops.reshape(self, list(other.shape))


@register_method(T.expand)
def expand(self: Tensor, *sizes):
    return ops.broadcast(self, shape_arg(sizes))


@register_method(T.expand_as)
def expand_as(self: Tensor, other: Tensor):
    return ops.broadcast(self, list(other.shape))


@register_method(T.repeat)
def repeat(self: Tensor, *sizes):
    return ops.repeat(self, shape_arg(sizes))


@register_method(T.permute)
def permute(self: Tensor, *dims):
    return ops.permute(self, shape_arg(dims))


@register_method(T.flatten)
def flatten(self: Tensor, start_dim=0, end_dim=-1):
    return ops.flatten(self, start_dim, end_dim)


@register_method(T.unflatten)
def unflatten(self: Tensor, dim, sizes):
    dim = dim % self.ndim
    sizes = list(sizes)
    if -1 in sizes:
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        sizes[sizes.index(-1)] = self.shape[dim] // known
    return ops.reshape(self, list(self.shape[:dim]) + sizes + list(self.shape[dim + 1:]))


for _method, _conv in (
        (T.transpose, fn.transpose), (T.t, fn.t), (T.squeeze, fn.squeeze), (T.unsqueeze, fn.unsqueeze),
        (T.split, fn.split), (T.chunk, fn.chunk), (T.unbind, fn.unbind), (T.tril, fn.tril), (T.triu, fn.triu),
        (T.gather, fn.gather), (T.index_select, fn.index_select), (T.flip, fn.flip), (T.roll, fn.roll),
        (T.repeat_interleave, fn.repeat_interleave), (T.narrow, fn.narrow), (T.select, fn.select),
        (T.swapaxes, fn.transpose), (T.swapdims, fn.transpose), (T.broadcast_to, fn.broadcast_to),
        (T.movedim, la.movedim), (T.moveaxis, la.movedim), (T.diagonal, la._diagonal), (T.diag, la.diag),
        (T.trace, la.trace), (T.outer, la.outer), (T.ger, la.outer), (T.inner, la.inner), (T.dot, la.inner),
        (T.vdot, la.inner), (T.mv, la.mv), (T.kron, la.kron), (T.addmv, la.addmv), (T.addbmm, la.addbmm),
        (T.take_along_dim, la.take_along_dim), (T.tensor_split, la.tensor_split), (T.hsplit, la.hsplit),
        (T.vsplit, la.vsplit), (T.rot90, la.rot90), (T.scatter, la.scatter), (T.scatter_, la.scatter),
        (T.scatter_add, la.scatter_add), (T.scatter_add_, la.scatter_add), (T.scatter_reduce, la.scatter_reduce),
        (T.scatter_reduce_, la.scatter_reduce), (T.index_copy, la.index_copy), (T.index_copy_, la.index_copy),
        (T.index_add, la.index_add), (T.index_add_, la.index_add), (T.index_fill, la.index_fill),
        (T.index_fill_, la.index_fill)):
    register_method(_method)(_conv)


@register_method(T.split)
def split(self: Tensor, split_size, dim=0):
    return fn.split(self, split_size, dim)


@register_method(T.tile)
def tile(self: Tensor, *dims):
    return ops.tile(self, shape_arg(dims))


@register_method(T.__getitem__)
def getitem(self: Tensor, key):
    return self[key]


@register_method(T.__setitem__)
def setitem(self: Tensor, key, value):
    return fn.setitem(self, key, value)


@register_method('copy_')
def copy_(self: Tensor, src, non_blocking=False):
    """``self`` holding ``src`` (broadcast, cast to self's dtype): the interpreter rebinds ``self`` to it."""
    src = src if isinstance(src, Tensor) else ops.full([], src, self.dtype, self.device)
    return ops.broadcast(ops.cast(src, self.dtype), list(self.shape))


# ---------------------------------------------------------------- arithmetic (and in-place twins)
for _names, _conv in (
        (('add', 'add_', '__add__', '__iadd__'), fn.torch_add), (('sub', 'sub_', 'subtract', '__sub__'), fn.torch_sub),
        (('mul', 'mul_', 'multiply', '__mul__'), fn.mul), (('div', 'div_', 'divide', '__truediv__'), fn.torch_div),
        (('true_divide',), fn.truediv), (('floor_divide',), fn.floordiv), (('remainder',), fn.mod),
        (('pow', 'pow_', '__pow__'), fn.pow_), (('square',), fn.square),
        (('matmul', 'mm', 'bmm', '__matmul__'), fn.matmul), (('addmm',), fn.addmm),
        (('maximum',), fn.maximum), (('minimum',), fn.minimum),
        (('clamp', 'clamp_', 'clip', 'clip_'), fn.clamp), (('clamp_min', 'clamp_min_'), fn.clamp_min),
        (('clamp_max', 'clamp_max_'), fn.clamp_max),
        (('masked_fill', 'masked_fill_'), fn.masked_fill)):
    register_method(*_names)(_conv)


@register_method('rsub')
def rsub(self: Tensor, other, alpha=1):
    return fn.torch_rsub(self, other, alpha=alpha)


@register_method('__radd__')
def radd(self: Tensor, other):
    return ops.add(other, self)


@register_method('__rsub__')
def rsub_(self: Tensor, other):
    return ops.subtract(other, self)


@register_method('__rmul__')
def rmul(self: Tensor, other):
    return ops.multiply(other, self)


@register_method('__rtruediv__')
def rtruediv(self: Tensor, other):
    return ops.divide(other, self)


for _names, _hidet in ((('eq', 'eq_', '__eq__'), ops.equal), (('ne', 'ne_', 'not_equal', '__ne__'), ops.not_equal),
                       (('lt', 'less', '__lt__'), ops.less), (('le', 'less_equal', '__le__'), ops.less_equal),
                       (('gt', 'greater', '__gt__'), ops.greater),
                       (('ge', 'greater_equal', '__ge__'), ops.greater_equal),
                       (('logical_and',), ops.logical_and), (('logical_or',), ops.logical_or),
                       (('bitwise_and', '__and__', '__iand__', '__rand__'), ops.bitwise_and),
                       (('bitwise_or', '__or__', '__ior__', '__ror__'), ops.bitwise_or),
                       (('bitwise_xor', '__xor__', '__ixor__', '__rxor__'), ops.bitwise_xor)):
    register_method(*_names)(lambda self, other, _f=_hidet: _f(self, other))


@register_method('logical_not')
def logical_not(self: Tensor):
    return ops.logical_not(self)


@register_method('bitwise_not', '__invert__')
def invert(self: Tensor):
    return ops.bitwise_not(self)


@register_method('logical_xor')
def logical_xor(self: Tensor, other):
    return mf.logical_xor(self, other)


@register_method('where')
def where(self: Tensor, condition: Tensor, other):
    return fn.where(condition, self, other)


# ---------------------------------------------------------------- unary math (and in-place twins)
for _names, _hidet in ((('exp', 'exp_'), ops.exp), (('log', 'log_'), ops.log), (('sqrt', 'sqrt_'), ops.sqrt),
                       (('rsqrt', 'rsqrt_'), ops.rsqrt), (('sin', 'sin_'), ops.sin), (('cos', 'cos_'), ops.cos),
                       (('tanh', 'tanh_'), ops.tanh), (('erf', 'erf_'), ops.erf), (('erfc', 'erfc_'), ops.erfc),
                       (('floor', 'floor_'), ops.floor), (('ceil', 'ceil_'), ops.ceil),
                       (('trunc', 'trunc_', 'fix', 'fix_'), ops.trunc), (('abs', 'abs_', 'absolute'), ops.abs),
                       (('sigmoid', 'sigmoid_'), ops.sigmoid), (('relu', 'relu_'), ops.relu),
                       (('tan', 'tan_'), ops.tan), (('asin', 'asin_', 'arcsin'), ops.asin),
                       (('acos', 'acos_', 'arccos'), ops.acos), (('atan', 'atan_', 'arctan'), ops.atan),
                       (('sinh', 'sinh_'), ops.sinh), (('cosh', 'cosh_'), ops.cosh),
                       (('asinh', 'asinh_', 'arcsinh'), ops.asinh), (('acosh', 'acosh_', 'arccosh'), ops.acosh),
                       (('atanh', 'atanh_', 'arctanh'), ops.atanh), (('exp2', 'exp2_'), ops.exp2),
                       (('expm1', 'expm1_'), ops.expm1), (('log2', 'log2_'), ops.log2),
                       (('log10', 'log10_'), ops.log10),
                       (('log1p', 'log1p_'), ops.log1p), (('isinf',), ops.isinf), (('isfinite',), ops.isfinite),
                       (('isnan',), ops.isnan)):
    register_method(*_names)(lambda self, _f=_hidet: _f(self))
register_method('__abs__')(lambda self: ops.abs(self))


@register_method('round', 'round_')
def round_(self: Tensor, *, decimals: int = 0):
    return mf.round_(self, decimals=decimals)

register_method('neg', 'neg_', 'negative', 'negative_', '__neg__')(lambda self: ops.neg(self))

for _names, _conv in ((('reciprocal', 'reciprocal_'), mf.reciprocal), (('sign', 'sign_', 'sgn', 'sgn_'), mf.sign),
                      (('frac', 'frac_'), mf.frac), (('signbit',), mf.signbit), (('logit', 'logit_'), mf.logit),
                      (('isposinf',), mf.isposinf), (('isneginf',), mf.isneginf),
                      (('atan2', 'atan2_', 'arctan2'), mf.atan2), (('hypot', 'hypot_'), mf.hypot),
                      (('copysign', 'copysign_'), mf.copysign), (('fmod', 'fmod_'), mf.fmod),
                      (('logaddexp',), mf.logaddexp), (('xlogy', 'xlogy_'), mf.xlogy), (('lerp', 'lerp_'), mf.lerp),
                      (('addcmul', 'addcmul_'), mf.addcmul), (('addcdiv', 'addcdiv_'), mf.addcdiv)):
    register_method(*_names)(_conv)


@register_method('softmax')
def softmax(self: Tensor, dim, dtype=None):
    return nn_fn.torch_softmax(self, dim, dtype)


@register_method('log_softmax')
def log_softmax(self: Tensor, dim, dtype=None):
    return nn_fn.torch_log_softmax(self, dim, dtype)


# ---------------------------------------------------------------- reductions
for _names, _conv in ((('sum',), fn.sum_), (('mean',), fn.mean), (('prod',), fn.prod), (('max',), fn._extreme('max')),
                      (('min',), fn._extreme('min')), (('amax',), fn.amax), (('amin',), fn.amin),
                      (('argmax',), fn.argmax), (('argmin',), fn.argmin), (('any',), fn.any_), (('all',), fn.all_),
                      (('var',), fn.var), (('std',), fn.std), (('cumsum',), fn.cumsum), (('cumprod',), fn.cumprod),
                      (('norm',), fn.norm), (('logsumexp',), mf.logsumexp), (('nansum',), mf.nansum),
                      (('nanmean',), mf.nanmean), (('count_nonzero',), mf.count_nonzero), (('sort',), mf.sort),
                      (('argsort',), mf.argsort), (('msort',), mf.msort), (('topk',), mf.topk),
                      (('kthvalue',), mf.kthvalue), (('median',), mf.median)):
    register_method(*_names)(_conv)


# ---------------------------------------------------------------- creation from a tensor
def _new(value_fn):
    def convert(self: Tensor, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        dtype = to_hidet_dtype(dtype) or self.dtype
        device = to_hidet_device(device) or self.device
        return value_fn(hidet, shape_arg(size) if size else [], dtype, device)

    return convert


register_method('new_zeros', 'new_empty')(_new(lambda h, s, dt, dev: h.zeros(s, dt, dev)))
register_method('new_ones')(_new(lambda h, s, dt, dev: h.ones(s, dt, dev)))


@register_method('new_full')
def new_full(self: Tensor, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None,
             pin_memory=False):
    return hidet.full(shape_arg([size]), fill_value, to_hidet_dtype(dtype) or self.dtype,
                      to_hidet_device(device) or self.device)
