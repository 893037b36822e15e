"""What every matmul template's kernel computes with, from a GemmSpec: the kernel's flat parameters
(the task's inputs, then the output) and the task's expressions lowered onto them — an operand's value
at (batch, m|n, k), the epilogue at (batch, m, n, accumulator), the flat output index — so the templates
(mma.py on CUDA, cpu.py on the CPU) differ only in how they loop."""
from __future__ import annotations

from typing import Dict

from hidet.ir.dtypes import int64
from hidet.ir.expr import BufferLoad, Expr, TensorElement, Var, cast, convert
from hidet.ir.functors import INT32_MAX, merge_divmod, narrow_index, rewrite
from hidet.ir.schedulers.lowering import flat_index
from hidet.ir.type import TensorType

from .spec import GemmSpec, Operand


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


class GemmValues:
    def __init__(self, spec: GemmSpec):
        self.spec = spec
        task = spec.task
        self.ins = [Var(f'in{i}', t.dtype, type=TensorType(t.dtype, [_prod(t.shape)], 'pointer'))
                    for i, t in enumerate(task.inputs)]
        self.out = Var('out', spec.out_dtype,
                       type=TensorType(spec.out_dtype, [_prod(task.outputs[0].shape)], 'pointer'))
        self._params = {id(t): v for t, v in zip(task.inputs, self.ins)}
        self._batch_strides = [_prod(spec.batch_shape[d + 1:]) for d in range(len(spec.batch_shape))]

    def lower(self, expr: Expr, values: Dict[Var, Expr]) -> Expr:
        """``expr`` (over the task's inputs and the GEMM's variables) with the variables replaced by
        ``values`` and each read of an input a load of the kernel's flat parameter."""
        ids = {id(k): v for k, v in values.items()}

        def fn(e: Expr):
            if isinstance(e, Var) and id(e) in ids:
                return ids[id(e)]
            if isinstance(e, TensorElement):
                # (a symbolic fold read back at its own axes needs no division)
                index = merge_divmod(flat_index(e.indices, e.tensor.shape), static_divisors=False)
                return BufferLoad(self._params[id(e.tensor)], index, e.tensor.dtype)
            return None

        return rewrite(expr, fn)

    def batch_values(self, bz) -> Dict[Var, Expr]:
        """The batch variables at flat batch index ``bz``."""
        spec = self.spec
        return {v: (bz / st) % ext if st * ext < spec.batch else bz / st
                for v, st, ext in zip(spec.batch_vars, self._batch_strides, spec.batch_shape)}

    def direct_base(self, op: Operand, bz) -> Expr:
        """int64 offset of a direct operand's element (batch bz, 0, 0)."""
        pos, index = op.direct
        total: Expr = convert(index.offset, int64)
        for v, val in self.batch_values(bz).items():
            c = index.coeff(v)
            if c:
                total = total + cast(val, int64) * c
        return total

    def direct_strides(self, op: Operand, mn_var: Var):
        """(stride along m or n, stride along k) of a direct operand, in elements."""
        pos, index = op.direct
        return index.coeff(mn_var), index.coeff(self.spec.k_var)

    def gather_offset(self, op: Operand, bz, gmn, gk) -> Expr:
        """int64 flat offset of a gathered operand's chunk at (batch bz, m|n gmn, k gk)."""
        offset = self._at(op.gather.offset, bz, {self._mn_var(op): gmn, self.spec.k_var: gk})
        return cast(narrow_index(offset) if self._int32_gather(op) else offset, int64)

    def gather_valid(self, op: Operand, bz, gmn, gk) -> Expr:
        """Whether that chunk lies inside the input (not in the padding)."""
        valid = op.gather.valid
        if valid is None:
            return convert(True)
        valid = self._at(valid, bz, {self._mn_var(op): gmn, self.spec.k_var: gk})
        return narrow_index(valid) if self._int32_gather(op) else valid

    def _int32_gather(self, op: Operand) -> bool:
        """Whether a gather's index arithmetic fits in int32 (a convolution's: every intermediate value is at
        most the input's size or m, n, k and batch products), so it is done in int32 (cheaper divisions)."""
        spec = self.spec
        sizes = [_prod(spec.task.inputs[op.gather.pos].shape), spec.m * spec.k, spec.n * spec.k, spec.batch]
        return all(isinstance(x, int) for x in sizes) and max(sizes) <= INT32_MAX

    def _mn_var(self, op: Operand) -> Var:
        return self.spec.m_var if op is self.spec.a else self.spec.n_var

    def a_value(self, bz, gm, gk) -> Expr:
        return self._at(self.spec.a.value, bz, {self.spec.m_var: gm, self.spec.k_var: gk})

    def b_value(self, bz, gn, gk) -> Expr:
        return self._at(self.spec.b.value, bz, {self.spec.n_var: gn, self.spec.k_var: gk})

    def epilogue(self, bz, gm, gn, acc) -> Expr:
        return self._at(self.spec.epilogue, bz, {self.spec.m_var: gm, self.spec.n_var: gn, self.spec.acc: acc})

    def out_index(self, bz, gm, gn) -> Expr:
        return self._at(self.spec.out_index, bz, {self.spec.m_var: gm, self.spec.n_var: gn})

    def _at(self, expr: Expr, bz, values: Dict[Var, Expr]) -> Expr:
        vals = self.batch_values(bz)
        vals.update(values)
        return self.lower(expr, vals)
