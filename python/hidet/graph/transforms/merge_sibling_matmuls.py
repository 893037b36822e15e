"""Sibling matmuls: several matmuls reading the same input with constant 2-D weights of the same
row count and dtype (e.g. the query, key and value projections) become one matmul with the weights
concatenated along columns; each original result is a column slice of it. One larger GEMM fills
the GPU better than several small ones and reads the shared input once.

Where each of them is read only by the addition of a constant bias vector (a Linear's), the biases are
concatenated too and added once to the merged result before it is sliced: the addition then lands in the
GEMM's epilogue, and each slice is a plain view of the result (which attention can read in place).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from hidet.graph import ops
from hidet.graph.flow_graph import FlowGraph
from hidet.graph.ops.arithmetic import BinaryElementwiseOp
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
                weights = [m.inputs[1] for m in group]
                concat = np.concatenate([_host_values(w) for w in weights], axis=1)
                w = _from_host_values(concat, weights[0].dtype, weights[0].device)
                y = ops.matmul(inputs[0], w)
                if id(group[0]) in biases:
                    bs = [b for _, b in biases[id(group[0])]]
                    y = ops.add(y, _from_host_values(np.concatenate([_host_values(b) for b in bs]), bs[0].dtype,
                                                     bs[0].device))
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
