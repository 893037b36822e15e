"""Tasks of the matmul template's tests: a plain matmul's, and those of a fused graph."""
import hidet
from hidet.graph.ops.matmul import MatmulOp


def matmul_task(a_shape, b_shape, dtype='float16'):
    return MatmulOp(hidet.symbol(list(a_shape), dtype, 'cuda'), hidet.symbol(list(b_shape), dtype, 'cuda')).task


def fused_tasks(fn, *specs):
    """The tasks of the optimized (fused) graph of ``fn`` over symbols (shape, dtype)."""
    syms = [hidet.symbol(list(s), d, 'cuda') for s, d in specs]
    graph = hidet.graph.optimize(hidet.trace_from(fn(*syms), syms))
    return [node.task for node in graph.nodes]
