"""Attention: ``matmul(q, kᵀ) [· scale | / scale] [+ mask] → softmax(-1) [→ cast] → matmul(·, v)`` becomes one
attention operator (hidet/graph/ops/attention.py), whose kernel never writes the [Sq, Sk] scores.

The softmax is recognized in its composed form (ops.softmax: max, subtract, exp, sum, divide, with
casts around it). Every intermediate must be read only by the next step of the chain (attention
weights returned to the user keep the chain as it is), q, kᵀ and v must share their batch dimensions,
and an additive mask must broadcast to the scores. kᵀ's transpose is dropped when it is one; otherwise a
transpose is inserted.

An attention operator whose mask is a constant that keeps exactly the keys j <= i of query i (a boolean
lower-triangular mask, or an additive one of 0 and -inf, the same for every batch entry: what a decoder
builds from its sequence length) becomes causal attention with no mask, which reads no mask and skips the
key tiles past each query block; a constant mask that keeps every key (an encoder's padding mask built from
an all-ones attention mask) is dropped.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from hidet.graph import ops
from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator
from hidet.graph.ops.arithmetic import BinaryElementwiseOp, UnaryElementwiseOp
from hidet.graph.ops.attention import AttentionOp, attention
from hidet.graph.ops.matmul import MatmulOp
from hidet.graph.ops.reduce import ReduceOp
from hidet.graph.ops.transform import PermuteOp
from hidet.graph.tensor import Tensor, _host_values
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext


def _producer(t: Tensor) -> Optional[Operator]:
    return t.trace[0] if t.trace is not None else None


def _is(node: Optional[Operator], op: str) -> bool:
    return isinstance(node, (UnaryElementwiseOp, BinaryElementwiseOp)) and node.attrs.get('op') == op


def _is_cast(node: Optional[Operator]) -> bool:
    return isinstance(node, UnaryElementwiseOp) and node.attrs.get('op', '').startswith('cast_')


def _is_last_axis_reduce(node: Optional[Operator], kind: str, x: Tensor) -> bool:
    return isinstance(node, ReduceOp) and node.attrs['kind'] == kind and node.attrs['keepdim'] \
        and list(node.attrs['axes']) == [x.ndim - 1] and node.inputs[0] is x


def _scalar_value(t: Tensor) -> Optional[float]:
    """The value of a one-element constant tensor, else None."""
    if t.is_symbolic() or t.numel() != 1 or not t.dtype.is_float():
        return None
    return float(_host_values(t).reshape(-1)[0])


class _Match:
    def __init__(self):
        self.chain: List[Operator] = []  # every node between the two matmuls, the first matmul included
        self.scale = 1.0
        self.mask: Optional[Tensor] = None
        self.mask_add: Optional[Operator] = None  # the node adding the mask
        self.scores_mm: Optional[MatmulOp] = None


def _softmax_input(p: Tensor, m: _Match) -> Optional[Tensor]:
    """The tensor ``p`` is the last-axis softmax of (through ops.softmax's composition), or None."""
    div = _producer(p)
    if _is_cast(div):
        m.chain.append(div)
        div = _producer(div.inputs[0])
    if not _is(div, 'divide') or not isinstance(div, BinaryElementwiseOp):
        return None
    e, total = div.inputs
    if not _is_last_axis_reduce(_producer(total), 'sum', e):
        return None
    exp = _producer(e)
    if not _is(exp, 'exp'):
        return None
    sub = _producer(exp.inputs[0])
    if not _is(sub, 'subtract') or not isinstance(sub, BinaryElementwiseOp):
        return None
    x, top = sub.inputs
    if not _is_last_axis_reduce(_producer(top), 'max', x):
        return None
    m.chain += [div, _producer(total), exp, sub, _producer(top)]
    up = _producer(x)
    if _is_cast(up):
        m.chain.append(up)
        x = up.inputs[0]
    return x


def _match(mm: MatmulOp) -> Optional[_Match]:
    p, v = mm.inputs
    m = _Match()
    x = _softmax_input(p, m)
    if x is None:
        return None
    node = _producer(x)
    if _is(node, 'add') and isinstance(node, BinaryElementwiseOp):  # + mask
        a, b = node.inputs
        side = a if _producer(a) is not None and (isinstance(_producer(a), MatmulOp) or
                                                   _is(_producer(a), 'multiply') or _is(_producer(a), 'divide')) else b
        m.mask = b if side is a else a
        m.mask_add = node
        m.chain.append(node)
        node = _producer(side)
    if _is(node, 'multiply') or _is(node, 'divide'):  # · scale
        if isinstance(node, UnaryElementwiseOp):
            if node.attrs.get('scalar_first') or not isinstance(node.attrs.get('scalar'), (int, float)):
                return None
            value, scores = float(node.attrs['scalar']), node.inputs[0]
        else:
            a, b = node.inputs
            value, scores = _scalar_value(b), a
            if value is None and node.attrs['op'] == 'multiply':
                value, scores = _scalar_value(a), b
            if value is None:
                return None
        m.scale = value if node.attrs['op'] == 'multiply' else 1.0 / value
        m.chain.append(node)
        node = _producer(scores)
    if not isinstance(node, MatmulOp):
        return None
    m.scores_mm = node
    m.chain.append(node)
    q, kt = node.inputs
    if not (q.ndim == kt.ndim == v.ndim >= 2 and q.shape[:-2] == kt.shape[:-2] == v.shape[:-2]):
        return None
    scores_shape = node.outputs[0].shape
    if m.mask is not None:
        mask = m.mask
        if mask.ndim > len(scores_shape) or any(e not in (1, s) for e, s in zip(mask.shape[::-1], scores_shape[::-1])):
            return None
    return m


def _single_use(m: _Match, mm: MatmulOp, users: Dict[int, List[Operator]], outputs) -> bool:
    """Everything the chain computes is read only inside the chain (then by the final matmul)."""
    inside = {id(n) for n in m.chain} | {id(mm)}
    for node in m.chain:
        for t in node.outputs:
            if id(t) in outputs or any(id(u) not in inside for u in users.get(id(t), [])):
                return False
    return True


def _keys(kt: Tensor) -> Tensor:
    """k for kᵀ: a permutation of kᵀ's producer's input where kᵀ is a permutation (none where that is the
    identity), else a transpose of kᵀ."""
    node = _producer(kt)
    if isinstance(node, PermuteOp):
        dims = list(node.attrs['dims'])
        dims[-2], dims[-1] = dims[-1], dims[-2]
        x = node.inputs[0]
        return x if dims == list(range(kt.ndim)) else ops.permute(x, dims)
    return ops.transpose(kt, -1, -2)


def _kept(mask: Tensor, sq, sk) -> Optional[np.ndarray]:
    """Which keys constant ``mask``, broadcast to [..., sq, sk], keeps (a boolean mask's True, an additive
    mask's 0 where every other value is -inf), or None where that is not known."""
    if mask.is_symbolic() or not (isinstance(sq, int) and isinstance(sk, int)) or mask.ndim < 2:
        return None
    values = _host_values(mask)
    if mask.dtype.is_boolean():
        keep = values.astype(bool)
    else:
        keep = values == 0
        if not np.all(keep | np.isneginf(values)):
            return None
    try:
        return np.broadcast_to(keep, keep.shape[:-2] + (sq, sk))
    except ValueError:
        return None


def _mask_facts(mask: Optional[Tensor], sq, sk) -> Tuple[bool, bool]:
    """(whether constant ``mask``, broadcast to [..., sq, sk], keeps every key of every query; whether it keeps
    exactly the keys j <= i of each query i), from one read of its values."""
    keep = _kept(mask, sq, sk) if mask is not None else None
    if keep is None:
        return False, False
    causal = np.array_equal(keep, np.broadcast_to(np.tril(np.ones((sq, sk), dtype=bool)), keep.shape))
    return bool(keep.all()), bool(causal)


def _simplify_mask(node: Operator, inputs: List[Tensor]) -> Optional[List[Tensor]]:
    """An attention operator with a constant causal mask as causal attention without it; with a constant mask
    that keeps every key, without it."""
    if not isinstance(node, AttentionOp) or len(inputs) != 4:
        return None
    q, k, v, mask = inputs
    (vq, vk, _) = node.views
    sq, sk = (vq.shape if vq else q.shape)[-2], (vk.shape if vk else k.shape)[-2]
    every, causal = _mask_facts(mask, sq, sk)
    if every:
        return [attention(q, k, v, None, node.attrs['scale'], node.attrs['causal'], node.views, node.out_dims)]
    if not causal:
        return None
    return [attention(q, k, v, None, node.attrs['scale'], True, node.views, node.out_dims)]


class FuseAttention(GraphPass):
    name = 'fuse_attention'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        users = graph.consumers()
        outputs = {id(t) for t in graph.outputs}
        matches = {}
        for node in graph.nodes:
            if isinstance(node, MatmulOp):
                m = _match(node)
                if m is not None and _single_use(m, node, users, outputs):
                    matches[id(node)] = m
        if not matches:
            return rewrite_graph(graph, _simplify_mask)

        firsts = {id(m.scores_mm): m for m in matches.values()}
        adds = {id(m.mask_add) for m in matches.values() if m.mask_add is not None}
        mapped: Dict[int, List[Tensor]] = {}  # the rewritten inputs of each match's scores matmul and mask add

        def rewrite(node, inputs):
            if id(node) in firsts or id(node) in adds:
                mapped[id(node)] = inputs
                return None
            m = matches.get(id(node))
            if m is None:
                return _simplify_mask(node, inputs)
            q, kt = mapped[id(m.scores_mm)]
            mask = None
            if m.mask is not None:
                add = m.mask_add
                mask = mapped[id(add)][[id(t) for t in add.inputs].index(id(m.mask))]
            every, causal = _mask_facts(mask, q.shape[-2], kt.shape[-1])
            if every:
                mask = None
            out = attention(q, _keys(kt), inputs[1], None if causal else mask, m.scale, causal)
            return [ops.cast(out, node.outputs[0].dtype)]

        return rewrite_graph(graph, rewrite)
