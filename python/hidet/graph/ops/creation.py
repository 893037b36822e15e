"""Creation operators: tensors whose values depend only on their indices (``full``, ``arange``), as graph
operators without inputs. The imperative ``hidet.full`` / ``hidet.arange`` fill memory on the host at once;
these are for sizes known only when the graph runs (a symbolic sequence length: the position ids of a
transformer), computed by a kernel like any other operator."""
from __future__ import annotations

from typing import Sequence

from hidet.graph.operator import Operator
from hidet.graph.tensor import Tensor
from hidet.ir.compute import compute
from hidet.ir.dtypes import data_type
from hidet.ir.expr import Expr, cast, convert, simplify_dim
from hidet.ir.task import Task


class FullOp(Operator):
    def __init__(self, shape: Sequence, value, dtype, device):
        dtype = data_type(dtype)
        out = compute('y', list(shape), lambda *idx: convert(value, dtype))
        super().__init__([], {'shape': list(shape), 'value': value, 'dtype': dtype.name},
                         Task('full', [], [out]), device=device)


class ArangeOp(Operator):
    def __init__(self, start, step, length, dtype, device):
        dtype = data_type(dtype)

        def element(i):
            v = i * step if not (isinstance(step, int) and step == 1) else i
            v = v + start if not (isinstance(start, int) and start == 0) else v
            return cast(v, dtype)

        out = compute('y', [length], element)
        super().__init__([], {'start': start, 'step': step, 'length': length, 'dtype': dtype.name},
                         Task('arange', [], [out]), device=device)


def full(shape: Sequence, value, dtype, device='cpu') -> Tensor:
    """A tensor of ``shape`` (ints or symbolic dimensions) filled with ``value``."""
    return FullOp(shape, value, dtype, device).get_output(0)


def arange(start, stop=None, step=1, dtype='int64', device='cpu') -> Tensor:
    """``start, start + step, ...`` below ``stop``, where the bounds may be symbolic (step: an int; the
    length of a symbolic range with step 1 is ``stop - start``, else ``(stop - start + step - 1) / step``)."""
    if stop is None:
        start, stop = 0, start
    if not isinstance(step, int) or step <= 0:
        raise NotImplementedError(f'arange with symbolic bounds takes a positive int step, got {step!r}')
    if not any(isinstance(v, Expr) for v in (start, stop)):
        length = max(0, -(-(stop - start) // step))
    else:
        length = simplify_dim(stop - start if step == 1 else (stop - start + step - 1) // step)
    return ArangeOp(start, step, length, dtype, device).get_output(0)
