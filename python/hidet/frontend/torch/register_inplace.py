"""In-place updates that dynamo leaves in graphs: ``index_put_`` / ``index_put``, ``fill_`` and ``zero_``, and the
in-place (and method) twins of mapped operators that have no conversion of their own (``x.square_()``,
``x.lt_(y)``, ``x.tril_()``, ``torch.relu_(x)``, ``x.baddbmm(...)``…), which convert like their out-of-place
twin. The interpreter rebinds the updated tensor to the result, cast back to its dtype (interpreter.py).

Imported after the other register_* modules: the twins copy the conversions registered by then.
"""
from typing import Optional, Sequence

import torch

from hidet import ops
from hidet.graph.tensor import Tensor
from hidet.frontend.torch.registry import default_registry, register_function, register_method

T = torch.Tensor


@register_function(torch.index_put, torch.index_put_)
@register_method(T.index_put, T.index_put_)
def index_put(input: Tensor, indices: Sequence[Optional[Tensor]], values, accumulate=False):
    if isinstance(values, torch.Tensor):  # (a constant folded to torch: cannot happen with hidet inputs)
        raise NotImplementedError('index_put with a torch tensor of values')
    return ops.index_put(input, list(indices), values, bool(accumulate))


@register_method(T.fill_)
def fill_(self: Tensor, value):
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f'fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} '
                               'dimensions.')
        return ops.broadcast(ops.cast(value, self.dtype), list(self.shape))
    return ops.full(list(self.shape), value, self.dtype, self.device)


@register_method(T.zero_)
def zero_(self: Tensor):
    return ops.full(list(self.shape), 0, self.dtype, self.device)


# methods whose twin must not stand in for them: random draws, memory and storage changes
_NOT_TWINS = frozenset({
    'bernoulli_', 'cauchy_', 'exponential_', 'geometric_', 'log_normal_', 'normal_', 'random_', 'uniform_',
    'resize_', 'resize_as_', 'set_', 'share_memory_', 'as_strided_', 'apply_', 'map_', 'map2_', 'requires_grad_',
    'retain_grad', 'record_stream', 'storage', 'untyped_storage', 'data_ptr', 'item', 'tolist', 'numpy',
    'backward', 'register_hook', 'pin_memory', 'is_pinned', 'share_memory_',
})


def _register_twins() -> None:
    """Each torch.Tensor method without a conversion converts like its out-of-place twin (``square_`` like
    ``square``) or like the torch function of its name (``baddbmm`` like ``torch.baddbmm``); each in-place torch
    function (``torch.relu_``) like its out-of-place one."""
    registry = default_registry
    for name in dir(T):
        if name.startswith('_') or name in _NOT_TWINS or registry.has_method(name):
            continue
        base = name[:-1] if name.endswith('_') else name
        overloads = registry.methods(base)
        if not overloads and callable(getattr(torch, base, None)):
            overloads = registry.functions(getattr(torch, base))
        for fn in reversed(overloads):  # (oldest first: the registry keeps the newest first)
            register_method(name)(fn)
    for name in dir(torch):
        if not name.endswith('_') or name.startswith('_') or name in _NOT_TWINS:
            continue
        function, base = getattr(torch, name), getattr(torch, name[:-1], None)
        if callable(function) and base is not None and not registry.has_function(function):
            for fn in reversed(registry.functions(base)):
                register_function(function)(fn)


_register_twins()
