"""Tasks of the matmul template's tests: a plain matmul's, and those of a fused graph."""
import torch

import hidet
from hidet import ops
from hidet.graph.ops.matmul import MatmulOp
from hidet.graph.transforms import FuseOperators, PassContext
from hidet.graph.transforms.merge_sibling_matmuls import PAIR_WIDTH, pair_slices
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


def gated_task(m, h, k, dtype='float16', device='cuda'):
    """The fused task of ``silu(gate) * up`` on the interleaved gate / up GEMM of a SwiGLU MLP (what
    merge_sibling_matmuls and fusion make of it): inputs x [m, k] and the interleaved weight [k, 2h]."""
    x, w = hidet.symbol([m, k], dtype, device), hidet.symbol([k, 2 * h], dtype, device)
    gate, up = pair_slices(x @ w)
    graph = FuseOperators()(hidet.trace_from(ops.silu(gate) * up, [x, w]), PassContext())
    assert len(graph.nodes) == 1, [n.name for n in graph.nodes]
    return graph.nodes[0].task


def gated_reference(x, w):
    """silu(x @ gate) * (x @ up) of an interleaved weight ``w`` (torch tensors), in float32 (float64's in
    float64)."""
    k, h = w.shape[0], w.shape[1] // 2
    dt = torch.promote_types(w.dtype, torch.float32)
    pairs = w.to(dt).reshape(k, h // PAIR_WIDTH, 2, PAIR_WIDTH)
    gate, up = (x.to(dt) @ pairs[:, :, i, :].reshape(k, h) for i in range(2))
    return gate * torch.sigmoid(gate) * up
