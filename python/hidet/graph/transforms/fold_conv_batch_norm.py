"""Conv + batch-norm folding: a convolution with constant weights followed by per-channel affine
ops with constant operands (bias add, inference batch norm: subtract mean, multiply by the inverse
std, scale, shift) becomes one convolution with scaled weights plus one per-channel add.

    y = (conv(x, W) + b - mean) * inv_std * gamma + beta   →   conv(x, W * s) + t

The chain may widen the convolution's result to another float type and narrow it back (a float16 model's
batch norm computes in float32, as torch's): a cast is the identity step of the chain. A float32
convolution's folded weights and shift keep its dtype; where the chain ends in another dtype, the add is
cast to it. A float16 convolution keeps its weights and gets a float32 scale and shift instead,

    y = cast(cast(conv(x, W), float32) * s + t, float16)

since scaling float16 weights rounds each of them once more, and a float16 shift is one more rounding of
every output (a resnet of basic blocks in float16 on the CPU: 1.2x eager's RMS error folded that way, 1.0x
this way); the fused epilogue computes it in float32 and rounds once, so ``s * W`` past float16's range needs
no special case either. The chain is folded while each op's result has a single reader; after it the fusion pass turns
the convolution and its scale and shift (and any activation) into one kernel.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator
from hidet.graph.ops import arithmetic as ew
from hidet.graph.ops.arithmetic import BinaryElementwiseOp, UnaryElementwiseOp
from hidet.graph.ops.conv import ConvOp
from hidet.graph.tensor import Tensor, _from_host_values, _host_values
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.dtypes import float32

_FOLDABLE = ('add', 'subtract', 'multiply', 'divide')


class FoldConvBatchNorm(GraphPass):
    name = 'fold_conv_batch_norm'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        users = graph.consumers()
        outputs = {id(t) for t in graph.outputs}
        plans: Dict[int, Tuple[Operator, np.ndarray, np.ndarray]] = {}  # id(chain end) → (conv, scale, shift)
        for node in graph.nodes:
            if not isinstance(node, ConvOp) or node.inputs[1].is_symbolic() or not node.outputs[0].dtype.is_float():
                continue
            channels = node.outputs[0].shape[1]
            scale, shift = np.ones(channels, np.float64), np.zeros(channels, np.float64)
            current, end, affine = node.outputs[0], None, False
            while id(current) not in outputs and len(users.get(id(current), [])) == 1:
                step = _affine_step(users[id(current)][0], current, channels)
                if step is None:
                    break
                op, c, nxt = step
                affine = affine or op != 'cast'
                if op == 'add':
                    shift += c
                elif op == 'subtract':
                    shift -= c
                elif op == 'multiply':
                    scale, shift = scale * c, shift * c
                elif op == 'divide':
                    scale, shift = scale / c, shift / c
                current, end = nxt.outputs[0], nxt
            if affine:  # (casts alone are no batch norm)
                plans[id(end)] = (node, scale, shift)

        convs = {id(conv) for conv, _, _ in plans.values()}
        conv_inputs: Dict[int, List[Tensor]] = {}

        def fold(node: Operator, inputs: List[Tensor]):
            if id(node) in convs:
                conv_inputs[id(node)] = inputs  # the conv's inputs in the graph being built
            if id(node) not in plans:
                return None
            conv, scale, shift = plans[id(node)]
            w = conv.inputs[1]
            if w.dtype.name == 'float16':
                return [_scale_and_shift_in_float32(conv.clone(conv_inputs[id(conv)]).outputs[0], scale, shift,
                                                    node.outputs[0].dtype)]
            w_values = _host_values(w).astype(np.float64) if w.dtype.name != 'bfloat16' else None
            if w_values is None:
                return None  # bfloat16 weights: keep the ops (host bf16 math is not worth it here)
            new_w = w_values * scale.reshape([-1] + [1] * (w.ndim - 1))
            if not (_fits(new_w, w.dtype) and _fits(shift, w.dtype)):
                return None  # folded values past the dtype's range (a tiny variance in float16): keep the ops
            x = conv_inputs[id(conv)][0]
            new_w = _from_host_values(new_w.astype(w.dtype.np_dtype), w.dtype, w.device)
            conv_out = conv.clone([x, new_w]).outputs[0]
            t = _from_host_values(shift.reshape([-1] + [1] * (conv_out.ndim - 2)).astype(w.dtype.np_dtype),
                                  w.dtype, w.device)
            return [ew.cast_(ew.add(conv_out, t), node.outputs[0].dtype)]

        return rewrite_graph(graph, fold)


def _scale_and_shift_in_float32(y: Tensor, scale: np.ndarray, shift: np.ndarray, dtype) -> Tensor:
    """``cast(cast(y, float32) * scale + shift, dtype)``, per channel (dimension 1); no multiply for a unit
    scale (a bias alone), no add for a zero shift."""
    def per_channel(values: np.ndarray) -> Tensor:
        shape = [-1] + [1] * (y.ndim - 2)
        return _from_host_values(values.reshape(shape).astype(np.float32), float32, y.device)

    unit, zero = bool(np.all(scale == 1.0)), bool(np.all(shift == 0.0))
    if unit and zero:
        return ew.cast_(y, dtype)
    out = ew.cast_(y, float32)
    if not unit:
        out = ew.multiply(out, per_channel(scale))
    if not zero:
        out = ew.add(out, per_channel(shift))
    return ew.cast_(out, dtype)


def _fits(values: np.ndarray, dtype) -> bool:
    """Whether float64 ``values`` stay finite once cast to ``dtype`` (scale and shift are folded in float64)."""
    return bool(np.all(np.abs(values) <= np.finfo(dtype.np_dtype).max))


def _affine_step(user: Operator, current: Tensor, channels: int) -> Optional[Tuple[str, np.ndarray, Operator]]:
    """(op, per-channel constant, user) when ``user`` is ``current`` ∘ constant, constant per channel; ('cast',
    None, user) when ``user`` casts ``current`` to another float type."""
    if isinstance(user, UnaryElementwiseOp):
        return _unary_step(user, current, channels)
    if not isinstance(user, BinaryElementwiseOp) or user.attrs.get('op') not in _FOLDABLE:
        return None
    op = user.attrs['op']
    if user.inputs[0] is current and not user.inputs[1].is_symbolic():
        const = user.inputs[1]
    elif user.inputs[1] is current and not user.inputs[0].is_symbolic() and op in ('add', 'multiply'):
        const = user.inputs[0]
    else:
        return None
    if user.outputs[0].shape != current.shape or const.dtype.name == 'bfloat16':
        return None
    values = _per_channel(_host_values(const).astype(np.float64), current.ndim, channels)
    return None if values is None else (op, values, user)


def _unary_step(user: Operator, current: Tensor, channels: int) -> Optional[Tuple[str, np.ndarray, Operator]]:
    """A cast between float types, or ``current`` ∘ a Python scalar (x + c, x - c, x * c, x / c, c + x, c * x)."""
    op, out = user.attrs['op'], user.outputs[0]
    if op.startswith('cast_'):
        return ('cast', None, user) if out.dtype.is_float() and out.dtype.name != 'bfloat16' else None
    scalar = user.attrs.get('scalar')
    if op not in _FOLDABLE or isinstance(scalar, bool) or not isinstance(scalar, (int, float)):
        return None
    if user.attrs.get('scalar_first') and op not in ('add', 'multiply'):
        return None
    return op, np.full(channels, float(scalar)), user


def _per_channel(values: np.ndarray, ndim: int, channels: int) -> Optional[np.ndarray]:
    """``values`` as a vector over dimension 1 of an ``ndim``-D tensor, if it broadcasts that way."""
    shape = (1,) * (ndim - values.ndim) + values.shape
    if any(s != 1 for d, s in enumerate(shape) if d != 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(values.reshape(-1), (channels,)).copy()
