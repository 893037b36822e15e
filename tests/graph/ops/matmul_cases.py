"""Tasks of the matmul template's tests: a plain matmul's, and those of a fused graph."""
import hidet
from hidet import ops
from hidet.graph.ops.matmul import MatmulOp
from hidet.kernels.matmul import match_gemm


def matmul_task(a_shape, b_shape, dtype='float16'):
    return MatmulOp(hidet.symbol(list(a_shape), dtype, 'cuda'), hidet.symbol(list(b_shape), dtype, 'cuda')).task


def fused_tasks(fn, *specs):
    """The tasks of the optimized (fused) graph of ``fn`` over symbols (shape, dtype)."""
    syms = [hidet.symbol(list(s), d, 'cuda') for s, d in specs]
    graph = hidet.graph.optimize(hidet.trace_from(fn(*syms), syms))
    return [node.task for node in graph.nodes]


def conv_spec(x_shape, w_shape, stride, padding, dilation):
    """The GEMM view (an implicit GEMM, k folded) of a channels-last float16 convolution on the GPU."""
    xs, ws = hidet.symbol(x_shape, 'float16', 'cuda'), hidet.symbol(w_shape, 'float16', 'cuda')
    y = ops.conv2d_channels_last(xs, ws, stride=stride, padding=padding, dilation=dilation)
    return match_gemm(y.trace[0].task, fold_k=True)
