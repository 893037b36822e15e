"""Sibling matmuls: several matmuls reading the same input with constant 2-D weights of the same
row count and dtype (e.g. the query, key and value projections) become one matmul with the weights
concatenated along columns; each original result is a column slice of it. One larger GEMM fills
the GPU better than several small ones and reads the shared input once.

Where each of them is read only by the addition of a constant bias vector (a Linear's), the biases are
concatenated too and added once to the merged result before it is sliced: the addition then lands in the
GEMM's epilogue, and each slice is a plain view of the result (which attention can read in place).

Two siblings of one width whose results meet in an elementwise operator (a SwiGLU MLP's ``silu(gate) * up``) are
*interleaved* instead: blocks of PAIR_WIDTH columns of the one, then of the other, so that each tile of the merged
GEMM holds both values of each element it gates, and the gating runs in the GEMM's epilogue (a paired epilogue,
hidet.kernels.matmul.epilogue.Pair), writing half the merged width, where it was a kernel of its own reading it all
back.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from hidet.graph import ops
from hidet.graph.flow_graph import FlowGraph
from hidet.graph.ops.arithmetic import BinaryElementwiseOp, UnaryElementwiseOp
from hidet.graph.ops.matmul import MatmulOp
from hidet.graph.tensor import Tensor, _from_host_values, _host_values
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext


def _bias_add(node: MatmulOp, users, outputs) -> Optional[Tuple[BinaryElementwiseOp, Tensor]]:
    """(the addition, its bias) when the matmul's result is read only by an addition of a constant vector of
    the result's width."""
    y = node.outputs[0]
    readers = users.get(id(y), [])
    if id(y) in outputs or len(readers) != 1:
        return None
    add = readers[0]
    if not (isinstance(add, BinaryElementwiseOp) and add.attrs.get('op') == 'add' and len(add.inputs) == 2):
        return None
    bias = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
    if bias is y or bias.is_symbolic() or bias.dtype != y.dtype or tuple(bias.shape) != (y.shape[-1],) \
            or add.outputs[0].shape != y.shape:
        return None
    return add, bias


PAIR_WIDTH = 32  # columns of each block of an interleaved pair (a multiple of the epilogue's vectors, 8 halves)
GATE_DEPTH = 4  # elementwise operators between a sibling and where the pair meets, at most (silu, then the product)


def _elementwise_reach(t: Tensor, users) -> set:
    """ids of the elementwise operators of ``t``'s shape reached from it through such operators alone, at most
    GATE_DEPTH deep."""
    seen, frontier = set(), [t]
    for _ in range(GATE_DEPTH):
        nxt = []
        for x in frontier:
            for op in users.get(id(x), []):
                if isinstance(op, (UnaryElementwiseOp, BinaryElementwiseOp)) and op.outputs[0].shape == t.shape \
                        and id(op) not in seen:
                    seen.add(id(op))
                    nxt.append(op.outputs[0])
        frontier = nxt
    return seen


def _gated_pair(group: List[MatmulOp], users) -> bool:
    """Whether the group is two matmuls of one width, a multiple of 2 x PAIR_WIDTH, whose results meet in an
    elementwise operator (gate and up of a SwiGLU MLP; not a key and a value projection, which attention reads)."""
    if len(group) != 2:
        return False
    ya, yb = (m.outputs[0] for m in group)
    width = ya.shape[-1]
    if yb.shape != ya.shape or not isinstance(width, int) or width % (2 * PAIR_WIDTH):
        return False
    return bool(_elementwise_reach(ya, users) & _elementwise_reach(yb, users))


def _interleaved(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The columns (last axis) of ``a`` and ``b`` in alternating blocks of PAIR_WIDTH: a's first, b's first, ..."""
    lead = a.shape[:-1]
    blocks = a.shape[-1] // PAIR_WIDTH
    pairs = np.stack([a.reshape(lead + (blocks, PAIR_WIDTH)), b.reshape(lead + (blocks, PAIR_WIDTH))], axis=-2)
    return pairs.reshape(lead + (2 * a.shape[-1],))


def pair_slices(y: Tensor) -> List[Tensor]:
    """The two siblings' results in an interleaved merged result ``y``: views of its alternate column blocks."""
    width = y.shape[-1] // 2
    blocks = ops.reshape(y, list(y.shape[:-1]) + [width // PAIR_WIDTH, 2, PAIR_WIDTH])
    return [ops.reshape(ops.strided_slice(blocks, [i], [i + 1], axes=[y.ndim]), list(y.shape[:-1]) + [width])
            for i in range(2)]


class MergeSiblingMatmuls(GraphPass):
    name = 'merge_sibling_matmuls'

    def __call__(self, graph: FlowGraph, ctx: PassContext) -> FlowGraph:
        siblings: Dict[Tuple, List[MatmulOp]] = {}
        for node in graph.nodes:
            if isinstance(node, MatmulOp):
                x, w = node.inputs
                if not w.is_symbolic() and w.ndim == 2 and x.ndim >= 2:
                    siblings.setdefault((id(x), w.shape[0], w.dtype.name), []).append(node)
        groups = [g for g in siblings.values() if len(g) > 1]
        if not groups:
            return graph
        users = graph.consumers()
        outputs = {id(t) for t in graph.outputs}
        biases = {}  # id(first member) → [(addition, bias)] when every member has one
        for g in groups:
            adds = [_bias_add(m, users, outputs) for m in g]
            if all(a is not None for a in adds):
                biases[id(g[0])] = adds
        pairs = {id(g[0]) for g in groups if _gated_pair(g, users)}
        first_of = {id(g[0]): g for g in groups}
        member_of = {id(m): g for g in groups for m in g}
        add_of = {id(add): (g, i) for g in groups if id(g[0]) in biases for i, (add, _) in enumerate(biases[id(g[0])])}
        merged: Dict[int, List[Tensor]] = {}  # id(first member) → the slices

        def merge(node, inputs):
            if id(node) in add_of:  # the member's bias addition: its slice of the merged, biased result
                g, i = add_of[id(node)]
                return [merged[id(g[0])][i]]
            group = member_of.get(id(node))
            if group is None:
                return None
            if id(node) in first_of:
                gated = id(group[0]) in pairs
                join = _interleaved if gated else lambda *xs: np.concatenate(xs, axis=-1)
                weights = [m.inputs[1] for m in group]
                w = _from_host_values(join(*[_host_values(w) for w in weights]), weights[0].dtype, weights[0].device)
                y = ops.matmul(inputs[0], w)
                if id(group[0]) in biases:
                    bs = [b for _, b in biases[id(group[0])]]
                    y = ops.add(y, _from_host_values(join(*[_host_values(b) for b in bs]), bs[0].dtype, bs[0].device))
                if gated:
                    merged[id(group[0])] = pair_slices(y)
                else:
                    slices, start = [], 0
                    for weight in weights:
                        end = start + weight.shape[1]
                        slices.append(ops.strided_slice(y, [start], [end], axes=[y.ndim - 1]))
                        start = end
                    merged[id(group[0])] = slices
            if id(group[0]) in biases:
                return None  # read only by its bias addition, which takes the slice
            return [merged[id(group[0])][group.index(node)]]

        return rewrite_graph(graph, merge)
