"""Fused attention: out = softmax(q @ kᵀ · scale + mask) @ v as one operator and one kernel.

q [*B, Sq, D], k [*B, Sk, D], v [*B, Sk, Dv] (the same batch dims *B), an optional mask broadcastable to
[*B, Sq, Sk] (float: added to the scores; bool: keeps the positions where it is True) or ``causal``
(key j visible from query i when j <= i). Scores, softmax and the weighted sum are computed in float32;
the output has q's dtype. ``scaled_dot_product_attention`` builds it, and the graph pass
``fuse_attention`` rewrites matmul → softmax → matmul chains into it.

The task's compute definition is the reference semantics (the auto-scheduler runs it where no template
applies); the templates of hidet/kernels/attention/ run it on the CPU and on CUDA, computing the softmax
online over key tiles so that the [Sq, Sk] scores never reach memory. Its producers and consumers are not
fused into it (``fusible = False``): the templates read q, k, v and the mask as they are, with two exceptions
the graph pass ``attention_views`` sets up so that no kernel only moves data around attention:
- ``views``: q, k or v may be a *strided view* of the tensor given (View: logical shape, element offset and
  strides, the last stride 1): the heads of a fused QKV projection's output read in place through the
  split / reshape / permute the model wrote, or heads broadcast along a dimension of size 1 (stride 0; GQA's
  repeat_kv, where query head h reads key head h / 2, is no strided view and stays a copy);
- ``out_dims``: the output stored with its dimensions permuted (the last one staying last), e.g. [B, S, H, D]
  for the permute back to merged heads that the output projection reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import broadcast_shapes, input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute, reduce
from hidet.ir.dtypes import boolean, float32
from hidet.ir.expr import binary, call, cast, convert, select
from hidet.ir.schedulers.lowering import broadcast_indices, unflatten
from hidet.ir.task import Task


@dataclass(frozen=True)
class View:
    """A logical tensor of ``shape`` over the flat elements of a base tensor: element ``idx`` is
    ``base.flat[offset + sum(idx[d] * strides[d])]``."""
    shape: Tuple[int, ...]
    offset: int
    strides: Tuple[int, ...]

    def flat(self, idx: Sequence):
        """The base's flat index of logical element ``idx`` (expressions)."""
        terms = [i if s == 1 else i * s for i, s in zip(idx, self.strides) if s != 0]
        total = terms[0] if terms else convert(0)
        for t in terms[1:]:
            total = total + t
        return total + self.offset if self.offset else total


def _read(node, view: Optional[View], idx):
    """Element ``idx`` of the logical tensor input ``node`` holds (through ``view`` where there is one)."""
    if view is None:
        return node[idx]
    return node[tuple(unflatten(view.flat(idx), node.shape))]


def mask_kind(mask: Optional[Tensor]) -> str:
    if mask is None:
        return 'none'
    return 'bool' if mask.dtype.is_boolean() else 'add'


class AttentionOp(Operator):
    fusible = False

    def __init__(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None, scale: float = 1.0,
                 causal: bool = False, views: Optional[Sequence[Optional[View]]] = None,
                 out_dims: Optional[Sequence[int]] = None):
        views = tuple(views) if views is not None else (None, None, None)
        for name, t, view in zip('qkv', (q, k, v), views):
            if view is not None:
                _check_view(name, t, view)
        qs, ks, vs = (tuple(view.shape) if view is not None else tuple(t.shape) for t, view in zip((q, k, v), views))
        if len(qs) < 2 or len(ks) != len(qs) or len(vs) != len(qs) or qs[:-2] != ks[:-2] \
                or qs[:-2] != vs[:-2] or qs[-1] != ks[-1] or ks[-2] != vs[-2]:
            raise ValueError(f'attention: q {qs}, k {ks}, v {vs} do not match: they need the same '
                             'batch dimensions, q and k the same last dimension, k and v the same sequence length')
        if causal and mask is not None:
            raise ValueError('attention: give a mask or causal, not both')
        batch, (sq, d), sk, dv = qs[:-2], qs[-2:], ks[-2], vs[-1]
        out_shape = batch + (sq, dv)
        out_dims = tuple(out_dims) if out_dims is not None else tuple(range(len(out_shape)))
        if sorted(out_dims) != list(range(len(out_shape))) or out_dims[-1] != len(out_shape) - 1:
            raise ValueError(f'attention: out_dims {out_dims} is not a permutation of the output\'s '
                             f'{len(out_shape)} dimensions that keeps the last one last')
        if mask is not None:
            scores = tuple(batch) + (sq, sk)
            if mask.ndim > len(scores):
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
            s = reduce([d], lambda e: cast(_read(qn, views[0], b + (i, e)), float32)
                       * cast(_read(kn, views[1], b + (j, e)), float32), 'sum') \
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
            total = reduce([sk], lambda j: weights[r + (j,)] * cast(_read(vn, views[2], r[:-1] + (j, c)), float32),
                           'sum')
            return cast(total / row_sum[r], q.dtype)

        def stored(*pidx):  # the output element at stored index pidx: the logical element it permutes
            logical = [None] * len(pidx)
            for pos, dim in enumerate(out_dims):
                logical[dim] = pidx[pos]
            return output(*logical)

        out = compute('out', tuple(out_shape[dim] for dim in out_dims), stored)
        attrs = {'scale': float(scale), 'causal': bool(causal), 'mask': mask_kind(mask)}
        if any(view is not None for view in views):
            attrs['views'] = tuple(None if w is None else (w.shape, w.offset, w.strides) for w in views)
        if out_dims != tuple(range(len(out_shape))):
            attrs['out_dims'] = out_dims
        super().__init__([q, k, v] + ([mask] if mask is not None else []), attrs,
                         Task('attention', nodes, [out], attrs=attrs))

    @property
    def views(self) -> Tuple[Optional[View], ...]:
        """Per q, k, v: the view its input is read through, or None (the input as it is)."""
        return tuple(None if w is None else View(*w) for w in self.attrs.get('views', (None, None, None)))

    @property
    def out_dims(self) -> Tuple[int, ...]:
        """The output's logical dimensions in the order they are stored."""
        return tuple(self.attrs.get('out_dims', range(len(self.outputs[0].shape))))


def _check_view(name: str, t: Tensor, view: View) -> None:
    """A view reads inside its base tensor, along a unit-stride last dimension."""
    if not all(isinstance(x, int) for x in tuple(t.shape) + tuple(view.shape)):
        raise ValueError(f'attention: {name} is a view of {t.shape} as {view.shape}: views need static shapes')
    if len(view.strides) != len(view.shape) or view.strides[-1] != 1 or view.offset < 0 \
            or any(s < 0 for s in view.strides):
        raise ValueError(f'attention: the view of {name} ({view}) needs one non-negative stride per dimension, '
                         'the last one 1')
    last = view.offset + sum((n - 1) * s for n, s in zip(view.shape, view.strides)) if all(view.shape) else 0
    numel = 1
    for n in t.shape:
        numel *= n
    if last >= numel:
        raise ValueError(f'attention: the view of {name} ({view}) reads past the end of its tensor {t.shape}')


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None, scale: float = 1.0,
              causal: bool = False, views: Optional[Sequence[Optional[View]]] = None,
              out_dims: Optional[Sequence[int]] = None) -> Tensor:
    """softmax(q @ kᵀ · scale + mask) @ v in one kernel (see the module's docstring)."""
    return AttentionOp(q, k, v, mask, scale, causal, views, out_dims).get_output(0)
