"""Attention reads its inputs and writes its output in place of the data movement around it.

A model hands attention its heads through operators that only move data: the fused QKV projection's
output sliced (split / strided slice), reshaped to [B, S, H, D] and permuted to [B, H, S, D]; GQA's shared
key and value heads broadcast to every query head; a one-tensor concat (an empty KV cache). Each would be a
kernel of its own, writing a copy that attention reads once. This pass walks back from each input of an
attention operator through such operators while the element attention reads stays an affine function of its
logical index (no carries between the mixed-radix digits of an intermediate shape), and gives the operator a
*view* of the tensor found (hidet/graph/ops/attention.py: View: offset and strides): the copies then have no
reader left and are gone. The walk stops where a step would break a unit-stride last dimension, or rows
starting at multiples of 8 elements that the input had (16-byte vector copies of 16-bit values).

The output: an attention output read only by a permute that keeps the last dimension last (back to merged
heads, [B, S, H, D]) is written in that order instead (``out_dims``), so the output projection reads it as
a plain row-major operand.

A split whose pieces attention now reads in place but some other operator still reads (gpt2's returned key
and value heads) keeps only those pieces, as slices: its kernel would otherwise still write every piece.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from hidet.graph import ops
from hidet.graph.flow_graph import FlowGraph
from hidet.graph.operator import Operator
from hidet.graph.ops.attention import AttentionOp, View, attention
from hidet.graph.ops.reshape import ReshapeOp
from hidet.graph.ops.transform import BroadcastOp, ConcatOp, PermuteOp, SplitOp, StridedSliceOp
from hidet.graph.tensor import Tensor
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext
from hidet.ir.schedulers.lowering import row_major_strides

ROW_ALIGN = 8  # elements: rows of 16-bit values at 16-byte boundaries

# an affine map from a logical index l to a multi-index i of a tensor: i[a] = const[a] + sum(coef[a][d] * l[d])
Affine = Tuple[List[int], List[List[int]]]


def _static(shape) -> bool:
    return all(isinstance(x, int) for x in shape)


def _digits(view: View, shape: Sequence[int]) -> Optional[Affine]:
    """``view`` (over the flat elements of a row-major tensor of ``shape``) as an affine map to that tensor's
    multi-index, when every logical dimension moves one digit of the mixed-radix index and no digit carries."""
    strides = row_major_strides(shape)
    const, rest = [], view.offset
    for s in strides:
        const.append(rest // s)
        rest %= s
    if rest:
        return None
    coef = [[0] * len(view.shape) for _ in shape]
    span = list(const)  # the largest value each digit reaches
    for d, (n, stride) in enumerate(zip(view.shape, view.strides)):
        if n == 1 or stride == 0:
            continue
        axis = next((a for a, s in enumerate(strides) if stride % s == 0 and shape[a] > 1
                     and (a == 0 or stride < strides[a - 1])), None)
        if axis is None:
            return None
        coef[axis][d] = stride // strides[axis]
        span[axis] += coef[axis][d] * (n - 1)
    if any(top >= extent for top, extent in zip(span, shape)):  # a carry into the next digit
        return None
    return const, coef


def _flatten(affine: Affine, shape: Sequence[int], logical: Sequence[int]) -> View:
    const, coef = affine
    strides = row_major_strides(shape)
    offset = sum(c * s for c, s in zip(const, strides))
    return View(tuple(logical), offset,
                tuple(sum(coef[a][d] * strides[a] for a in range(len(shape))) if logical[d] > 1 else 0
                      for d in range(len(logical))))


def _through(node: Operator, t: Tensor, affine: Affine) -> Optional[Affine]:
    """The multi-index of ``node``'s input that output ``t``'s multi-index ``affine`` reads, or None when
    ``node`` does more than move data (or moves it in a way this does not follow)."""
    const, coef = affine
    x = node.inputs[0]
    if isinstance(node, PermuteOp):
        dims = node.attrs['dims']
        new_const, new_coef = [0] * x.ndim, [None] * x.ndim
        for a, dim in enumerate(dims):
            new_const[dim], new_coef[dim] = const[a], coef[a]
        return new_const, new_coef
    if isinstance(node, StridedSliceOp):
        if any(not isinstance(v, int) or step <= 0 for v, step in zip(node.attrs['starts'], node.attrs['steps'])):
            return None
        const, coef = list(const), [list(row) for row in coef]
        for axis, start, step in zip(node.attrs['axes'], node.attrs['starts'], node.attrs['steps']):
            const[axis] = const[axis] * step + start
            coef[axis] = [c * step for c in coef[axis]]
        return const, coef
    if isinstance(node, SplitOp):
        axis = node.attrs['axis']
        const = list(const)
        const[axis] += node.attrs['offsets'][[id(o) for o in node.outputs].index(id(t))]
        return const, coef
    if isinstance(node, ConcatOp) and len(node.inputs) == 1:  # (view_of keeps the dtype)
        return affine
    if isinstance(node, BroadcastOp):
        lead = t.ndim - x.ndim
        zeros = [0] * len(coef[0]) if coef else []
        return ([0 if x.shape[b] == 1 else const[b + lead] for b in range(x.ndim)],
                [zeros if x.shape[b] == 1 else coef[b + lead] for b in range(x.ndim)])
    return None


def _aligned(view: View) -> bool:
    return view.offset % ROW_ALIGN == 0 and all(s % ROW_ALIGN == 0 for s in view.strides[:-1])


def view_of(t: Tensor) -> Tuple[Tensor, Optional[View]]:
    """(the tensor attention can read in ``t``'s place, its view) walking back from ``t``; (t, None) where no
    step applies."""
    if not _static(t.shape) or t.ndim < 2:
        return t, None
    logical = tuple(t.shape)
    base, view = t, View(logical, 0, row_major_strides(logical))
    aligned = _aligned(view)
    while base.trace is not None:
        node = base.trace[0]
        x = node.inputs[0] if node.inputs else None
        if x is None or not _static(x.shape) or x.dtype != base.dtype:
            break
        if isinstance(node, ReshapeOp):  # the same elements in the same order
            new = view
        else:
            affine = _digits(view, base.shape)
            affine = _through(node, base, affine) if affine is not None else None
            if affine is None:
                break
            new = _flatten(affine, x.shape, logical)
        if new.strides[-1] != 1 and logical[-1] > 1 or (aligned and not _aligned(new)):
            break
        base, view = x, new
    return (t, None) if base is t else (base, view)


class AttentionViews(GraphPass):
    name = 'attention_views'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        attentions = [n for n in graph.nodes if isinstance(n, AttentionOp)]
        if not attentions:
            return graph
        users = graph.consumers()
        outputs = {id(t) for t in graph.outputs}
        permute_after: Dict[int, PermuteOp] = {}  # attention → the permute that alone reads its output
        for node in attentions:
            y = node.outputs[0]
            readers = users.get(id(y), [])
            if id(y) not in outputs and len(readers) == 1 and isinstance(readers[0], PermuteOp) and _static(y.shape) \
                    and readers[0].attrs['dims'][-1] == y.ndim - 1 and node.out_dims == tuple(range(y.ndim)):
                permute_after[id(node)] = readers[0]
        written: Dict[int, Tensor] = {}  # id(permute) → the attention output written in its order

        def rewrite(node, inputs):
            if isinstance(node, AttentionOp):
                views = list(node.views)
                qkv = list(inputs[:3])
                for w in range(3):
                    if views[w] is None:
                        qkv[w], views[w] = view_of(qkv[w])
                permute = permute_after.get(id(node))
                if all(a is b for a, b in zip(qkv, inputs[:3])) and permute is None:
                    return None
                mask = inputs[3] if len(inputs) > 3 else None
                out = attention(*qkv, mask, node.attrs['scale'], node.attrs['causal'], views,
                                permute.attrs['dims'] if permute is not None else node.out_dims)
                if permute is None:
                    return [out]
                written[id(permute)] = out
                return list(node.outputs)  # read by the permute alone, which is replaced below
            if id(node) in written:
                return [written[id(node)]]
            return None

        return _prune_splits(rewrite_graph(graph, rewrite))


def _prune_splits(graph: FlowGraph) -> FlowGraph:
    """Splits with pieces nothing reads: the read pieces as strided slices."""
    users = graph.consumers()
    outputs = {id(t) for t in graph.outputs}

    def read(t: Tensor) -> bool:
        return id(t) in outputs or bool(users.get(id(t)))

    def rewrite(node, inputs):
        if not isinstance(node, SplitOp) or all(read(t) for t in node.outputs):
            return None
        axis, x = node.attrs['axis'], inputs[0]
        reshape = x.trace[0] if x.trace is not None and isinstance(x.trace[0], ReshapeOp) else None

        def source() -> Tensor:  # a reshape of its own for each slice, so that each fuses with its slice
            return ops.reshape(reshape.inputs[0], x.shape) if reshape is not None else x

        return [ops.strided_slice(source(), [offset], [offset + size], axes=[axis]) if read(t) else t
                for t, offset, size in zip(node.outputs, node.attrs['offsets'], node.attrs['sizes'])]

    return rewrite_graph(graph, rewrite)
