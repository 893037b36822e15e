"""Fused attention: out = softmax(q @ kᵀ · scale + mask) @ v as one operator and one kernel.

q [*B, Sq, D], k [*B, Sk, D], v [*B, Sk, Dv] (the same batch dims *B), an optional mask broadcastable to
[*B, Sq, Sk] (float: added to the scores; bool: keeps the positions where it is True) or ``causal``
(key j visible from query i when j <= i). Scores, softmax and the weighted sum are computed in float32;
the output has q's dtype. ``scaled_dot_product_attention`` builds it, and the graph pass
``fuse_attention`` rewrites matmul → softmax → matmul chains into it.

The task's compute definition is the reference semantics (the auto-scheduler runs it where no template
applies); the templates of hidet/kernels/attention/ run it on the CPU and on CUDA, computing the softmax
online over key tiles so that the [Sq, Sk] scores never reach memory. Its producers and consumers are not
fused into it (``fusible = False``): the templates read q, k, v and the mask as they are.
"""
from __future__ import annotations

from typing import Optional

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import broadcast_shapes, input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute, reduce
from hidet.ir.dtypes import boolean, float32
from hidet.ir.expr import binary, call, cast, convert, select
from hidet.ir.schedulers.lowering import broadcast_indices
from hidet.ir.task import Task



def mask_kind(mask: Optional[Tensor]) -> str:
    if mask is None:
        return 'none'
    return 'bool' if mask.dtype.is_boolean() else 'add'


class AttentionOp(Operator):
    fusible = False

    def __init__(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None, scale: float = 1.0,
                 causal: bool = False):
        if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim or q.shape[:-2] != k.shape[:-2] \
                or q.shape[:-2] != v.shape[:-2] or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
            raise ValueError(f'attention: q {q.shape}, k {k.shape}, v {v.shape} do not match: they need the same '
                             'batch dimensions, q and k the same last dimension, k and v the same sequence length')
        if causal and mask is not None:
            raise ValueError('attention: give a mask or causal, not both')
        batch, (sq, d), sk, dv = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
        if mask is not None:
            scores = tuple(batch) + (sq, sk)
            if mask.ndim > q.ndim:
                raise ValueError(f'attention: mask {mask.shape} has more dimensions than the scores {scores}')
            if broadcast_shapes('attention mask', mask.shape, scores) != scores:
                raise ValueError(f'attention: mask {mask.shape} does not broadcast to the scores {scores}: a mask '
                                 'dimension may be 1 or the scores\' size, not larger')
        nodes = [input_node('q', q), input_node('k', k), input_node('v', v)]
        qn, kn, vn = nodes
        mn = input_node('mask', mask) if mask is not None else None
        if mn is not None:
            nodes.append(mn)

        def score(*idx):
            b, i, j = idx[:-2], idx[-2], idx[-1]
            s = reduce([d], lambda e: cast(qn[b + (i, e)], float32) * cast(kn[b + (j, e)], float32), 'sum') \
                * convert(float(scale), float32)
            if mn is not None:
                m = mn[tuple(broadcast_indices(idx, mn.shape))]
                s = select(cast(m, boolean), s, convert(float('-inf'), float32)) if mask.dtype.is_boolean() \
                    else s + cast(m, float32)
            if causal:
                s = select(binary('<=', j, i), s, call('hidet_lowest', dtype=float32))
            return s

        scores = compute('scores', batch + (sq, sk), score)
        row_max = compute('row_max', batch + (sq,), lambda *r: reduce([sk], lambda j: scores[r + (j,)], 'max'))
        weights = compute('weights', batch + (sq, sk), lambda *idx: call('exp', scores[idx] - row_max[idx[:-1]]))
        row_sum = compute('row_sum', batch + (sq,), lambda *r: reduce([sk], lambda j: weights[r + (j,)], 'sum'))

        def output(*idx):
            r, c = idx[:-1], idx[-1]
            total = reduce([sk], lambda j: weights[r + (j,)] * cast(vn[r[:-1] + (j, c)], float32), 'sum')
            return cast(total / row_sum[r], q.dtype)

        out = compute('out', batch + (sq, dv), output)
        attrs = {'scale': float(scale), 'causal': bool(causal), 'mask': mask_kind(mask)}
        super().__init__([q, k, v] + ([mask] if mask is not None else []), attrs,
                         Task('attention', nodes, [out], attrs=attrs))


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None, scale: float = 1.0,
              causal: bool = False) -> Tensor:
    """softmax(q @ kᵀ · scale + mask) @ v in one kernel (see the module's docstring)."""
    return AttentionOp(q, k, v, mask, scale, causal).get_output(0)
