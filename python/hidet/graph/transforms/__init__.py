"""Graph optimization: a row of passes, one file each, under a PassContext.

    with hidet.graph.PassContext() as ctx:
        ctx.set_precision('float16')
        graph = hidet.graph.optimize(graph)
"""
from __future__ import annotations

import logging
import time
from typing import List, Optional

from hidet.graph.flow_graph import FlowGraph
from hidet.graph.transforms import pass_context
from hidet.graph.transforms.annotate_kernel_options import AnnotateKernelOptions
from hidet.graph.transforms.attention_views import AttentionViews
from hidet.graph.transforms.base import GraphPass, rewrite_graph
from hidet.graph.transforms.batch_output_copies import BatchOutputCopies
from hidet.graph.transforms.channels_last import ChannelsLast
from hidet.graph.transforms.convert_precision import ConvertPrecision
from hidet.graph.transforms.convert_reduce_precision import ConvertReducePrecision
from hidet.graph.transforms.eliminate_common_subexpressions import EliminateCommonSubexpressions
from hidet.graph.transforms.fuse_attention import FuseAttention
from hidet.graph.transforms.fold_constants import FoldConstants
from hidet.graph.transforms.fold_conv_batch_norm import FoldConvBatchNorm
from hidet.graph.transforms.fuse_operators import FuseOperators
from hidet.graph.transforms.merge_sibling_matmuls import MergeSiblingMatmuls
from hidet.graph.transforms.pass_context import PassContext
from hidet.graph.transforms.simplify_transforms import SimplifyTransforms
from hidet.option import Options, resolve as resolve_options
from hidet.utils import logs


def default_passes() -> List[GraphPass]:
    """Dead code needs no pass: a graph holds only the nodes its outputs depend on."""
    # constants fold first in the model's own precision (weight transforms a frontend deferred) and batch
    # norms fold into convolutions there (a float32 model's statistics in float32, before use_fp16 casts them),
    # again after the precision conversion has cast them, and once more for the weights channels_last permutes
    return [FoldConstants(), FoldConvBatchNorm(), ConvertPrecision(), ConvertReducePrecision(), FoldConstants(),
            SimplifyTransforms(), ChannelsLast(), FoldConstants(), SimplifyTransforms(), MergeSiblingMatmuls(),
            EliminateCommonSubexpressions(), FuseAttention(), AttentionViews(), FuseOperators(), BatchOutputCopies(),
            AnnotateKernelOptions()]


def optimize(graph: FlowGraph, options: Optional[Options] = None) -> FlowGraph:
    """``graph`` rewritten by the default passes under the current PassContext; kernels that the passes run
    (constant folding) build with ``options`` (hidet.option.Options; without them, the context's, else the
    current ones)."""
    if not isinstance(graph, FlowGraph):
        raise TypeError(f'optimize expects a FlowGraph (from hidet.trace_from), got {type(graph).__name__}')
    ctx = pass_context.current()
    ctx = ctx.with_options(resolve_options(options if options is not None else ctx.options))
    log = logs.logger('graph')
    log.info('optimizing a graph of %d operators, %d inputs, %d constants', len(graph.nodes), len(graph.inputs),
             len(graph.constants))
    for p in default_passes():
        before, t0 = len(graph.nodes), time.perf_counter()
        graph = p(graph, ctx)
        line = f'{p.name}: {before} -> {len(graph.nodes)} operators in {time.perf_counter() - t0:.3f} s'
        if ctx.verbose:
            print(line)
        log.info('%s', line)
        if log.isEnabledFor(logging.DEBUG):
            log.debug('after %s:\n%s', p.name, graph)
    return graph
