"""Sibling matmuls: several matmuls reading the same input with constant 2-D weights of the same
row count and dtype (e.g. the query, key and value projections) become one matmul with the weights
concatenated along columns; each original result is a column slice of it. One larger GEMM fills
the GPU better than several small ones and reads the shared input once."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from hidet.graph import ops
from hidet.graph.flow_graph import FlowGraph
from hidet.graph.ops.matmul import MatmulOp
from hidet.graph.tensor import Tensor, _from_host_values, _host_values
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.pass_context import PassContext


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
        first_of = {id(g[0]): g for g in groups}
        member_of = {id(m): g for g in groups for m in g}
        merged: Dict[int, List[Tensor]] = {}  # id(first member) → the slices

        def merge(node, inputs):
            group = member_of.get(id(node))
            if group is None:
                return None
            if id(node) in first_of:
                weights = [m.inputs[1] for m in group]
                concat = np.concatenate([_host_values(w) for w in weights], axis=1)
                w = _from_host_values(concat, weights[0].dtype, weights[0].device)
                y = ops.matmul(inputs[0], w)
                slices, start = [], 0
                for weight in weights:
                    end = start + weight.shape[1]
                    slices.append(ops.strided_slice(y, [start], [end], axes=[y.ndim - 1]))
                    start = end
                merged[id(group[0])] = slices
            return [merged[id(group[0])][group.index(node)]]

        return rewrite_graph(graph, merge)
