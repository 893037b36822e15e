"""Matrix multiplication with torch.matmul's shape rules (1-D operands, broadcast batch dims).
The task is the compute definition (a sum of products); on CUDA with float16/bfloat16 operands the
tensor-core template of hidet/kernels/matmul/ runs it (fused prologues and epilogues included), otherwise
the auto-scheduler."""
from __future__ import annotations

from hidet.graph.operator import Operator
from hidet.graph.ops.utils import broadcast_shapes, input_node
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute, reduce
from hidet.ir.schedulers.lowering import broadcast_indices
from hidet.ir.task import Task



class MatmulOp(Operator):
    def __init__(self, x: Tensor, y: Tensor):
        if x.ndim == 0 or y.ndim == 0:
            raise ValueError(f'matmul: both operands need at least 1 dimension, got shapes {x.shape} and {y.shape}')
        a, b = input_node('a', x), input_node('b', y)
        a_shape = (1,) + a.shape if a.ndim == 1 else a.shape  # a vector is a 1-row matrix
        b_shape = b.shape + (1,) if b.ndim == 1 else b.shape  # … or a 1-column matrix
        if a_shape[-1] != b_shape[-2]:
            raise ValueError(f'matmul: shapes {x.shape} and {y.shape} do not match: the last dimension of the first '
                             f'({a_shape[-1]}) must equal the second-to-last of the second ({b_shape[-2]})')
        batch = broadcast_shapes('matmul', a_shape[:-2], b_shape[:-2])
        m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]

        def element(*idx):
            bidx, i, j = idx[:-2], idx[-2], idx[-1]

            def product(kk):
                ai = list(broadcast_indices(bidx, a_shape[:-2])) + [i, kk]
                bi = list(broadcast_indices(bidx, b_shape[:-2])) + [kk, j]
                return a[tuple(ai[1:] if a.ndim == 1 else ai)] * b[tuple(bi[:-1] if b.ndim == 1 else bi)]

            return reduce([k], product, 'sum')

        full = compute('c', batch + (m, n), element)
        out = full
        if a.ndim == 1 or b.ndim == 1:  # drop the dimensions added for vectors
            shape = batch + ((m,) if a.ndim != 1 else ()) + ((n,) if b.ndim != 1 else ())
            out = compute('c_squeezed', shape, lambda *idx: full[_expand(idx, len(batch), a.ndim == 1, b.ndim == 1)])
        super().__init__([x, y], {}, Task('matmul', [a, b], [out]))


def _expand(idx, nbatch, drop_m, drop_n):
    idx = list(idx)
    out = idx[:nbatch]
    rest = idx[nbatch:]
    out.append(0 if drop_m else rest.pop(0))
    out.append(0 if drop_n else rest.pop(0))
    return tuple(out)


def matmul(x: Tensor, y: Tensor) -> Tensor:
    return MatmulOp(x, y).get_output(0)
