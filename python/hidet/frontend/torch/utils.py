"""Helpers shared by the conversions: torch dtypes/devices → hidet, dimension arguments, and the
``Tensor``-or-Python-value checks the conversions need."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

import torch

import hidet
from hidet.graph.tensor import Tensor
from hidet.ir.expr import Expr
from hidet.ir.dtypes import DataType, data_type


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def to_hidet_dtype(dtype) -> Optional[DataType]:
    """A torch dtype (or a hidet one, or a name) as a hidet DataType; None stays None."""
    if dtype is None:
        return None
    if dtype is float:
        return hidet.float32
    if dtype is int:
        return hidet.int64
    if dtype is bool:
        return hidet.boolean
    return data_type(dtype)


def to_torch_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    return getattr(torch, data_type(dtype).name)


def to_hidet_device(device) -> Optional[hidet.Device]:
    if device is None:
        return None
    if isinstance(device, torch.device):
        device = str(device)
    if isinstance(device, int):
        device = f'cuda:{device}'
    return hidet.device(device)


def to_torch_device(device) -> torch.device:
    return torch.device('cpu') if device.kind == 'cpu' else torch.device('cuda', device.id)


def dims_arg(dims) -> Optional[List[int]]:
    """A dim argument (int, sequence of ints, or None) as a list of ints, or None."""
    if dims is None:
        return None
    if isinstance(dims, (list, tuple, torch.Size)):
        return [int(d) for d in dims]
    return [int(dims)]


def shape_arg(args: Sequence[Any]) -> List[int]:
    """``(2, 3)``, ``([2, 3],)`` or ``(torch.Size([2, 3]),)`` (the ways torch takes a shape) as ``[2, 3]``."""
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        args = args[0]
    return [s if isinstance(s, Expr) else int(s) for s in args]  # symbolic sizes stay expressions


def same_dtype(op: str, *tensors) -> None:
    """The dtype rule eager enforces for products (matmul, linear, convolution): every operand of one dtype; a
    float32 model called with float64 or int32 inputs fails as it does in eager, instead of promoting."""
    dtypes = [t.dtype.name for t in tensors if t is not None and hasattr(t, 'dtype')]
    if len(set(dtypes)) > 1:
        raise TypeError(f'{op}: expected all operands to have the same dtype (as torch), got {", ".join(dtypes)}; '
                        f'cast the input to the weights\' dtype (e.g. x.to(torch.{dtypes[-1]}))')


def pair(value: Union[int, Sequence[int]], n: int = 2) -> List[int]:
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return [int(value[0])] * n
        return [int(v) for v in value]
    return [int(value)] * n


def float_dtype_of(*values) -> DataType:
    """The floating dtype torch computes a floating result in: the first float tensor's, else float32."""
    for v in values:
        if is_tensor(v) and v.dtype.is_float():
            return v.dtype
    return hidet.float32


def as_float(x: Tensor) -> Tensor:
    """Integer and bool tensors as float32 (torch's rule for floating math); floats unchanged."""
    return x if x.dtype.is_float() else hidet.ops.cast(x, 'float32')


def constant_like(value, like: Tensor, dtype=None) -> Tensor:
    """A concrete tensor holding ``value`` on ``like``'s device."""
    return hidet.asarray(value, dtype=dtype or like.dtype, device=like.device)


def torch_size(shape) -> Any:
    """A shape as torch.Size, or as a tuple where it has symbolic sizes (which torch.Size cannot hold)."""
    return tuple(shape) if any(isinstance(d, Expr) for d in shape) else torch.Size(shape)
