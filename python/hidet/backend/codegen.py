"""IRModule → C++ (CPU) or CUDA C++ source following the kernel ABI (cpp/include/hidet/kernel_abi.h).

The library exports one entry point, ``launch``, which checks the buffer count and runs the
module's functions in order: buffers are the inputs, then the outputs; function i writes output i.
float16/bfloat16 values are computed in float32 and rounded when stored or cast.
Hidet Script modules (``IRModule.exports``) instead export one entry point per kernel (_script_entry).
"""
from __future__ import annotations

import json
from typing import Dict, List, Optional, Sequence, Set, Tuple

from hidet.backend.primitives import render
from hidet.ir.dtypes import DataType, float32
from hidet.ir.expr import (APPROX_16BIT, Binary, BufferLoad, Call, Cast, Constant, Expr, Select, SymbolVar, Unary, Var,
                           convert, dim_postfix, promote)
from hidet.ir.lowlevel import Address, FunctionCall, PrimCall
from hidet.ir.stmt import (Assign, Break, Continue, Declare, Evaluate, For, Function, IRModule, If, Return, Seq, Stmt,
                           Store, VectorCopy, While)
from hidet.ir.type import PointerType, TensorMapType, TensorType, void

ENTRY_POINT = 'launch'

_SCALAR_C = {
    'float32': 'float', 'float64': 'double', 'int8': 'int8_t', 'int16': 'int16_t', 'int32': 'int32_t',
    'int64': 'int64_t', 'uint8': 'uint8_t', 'bool': 'bool',
}
_STORAGE_16 = {'cpu': {'float16': 'hidet::f16', 'bfloat16': 'hidet::bf16'},
               'cuda': {'float16': '__half', 'bfloat16': '__nv_bfloat16'}}

# IR builtins (Call nodes) → C
_CUDA_BUILTINS = {
    'hidet_thread_idx': 'hidet::thread_idx()', 'hidet_block_idx': 'hidet::block_idx()',
    'hidet_grid_dim': 'hidet::grid_dim()', 'hidet_global_thread_idx': 'hidet::global_thread_idx()',
    'hidet_global_threads': 'hidet::global_threads()', 'hidet_lane_idx': 'hidet::lane_idx()',
    'hidet_global_warp_idx': 'hidet::global_warp_idx()', 'hidet_global_warps': 'hidet::global_warps()',
}
_EXACT = {approx: exact for exact, approx in APPROX_16BIT.items()}
_MATH = {'exp', 'log', 'sqrt', 'sin', 'cos', 'tanh', 'erf', 'pow', 'floor', 'ceil', 'log2', 'log1p', 'expm1',
         'acosh', 'asinh', 'atanh',
         'atan', 'asin', 'acos', 'sinh', 'cosh', 'exp2', 'tan', 'fmod', 'trunc', 'log10', 'erfc', 'atan2', 'hypot',
         'copysign'}


def is_16bit_float(dtype: DataType) -> bool:
    return dtype.name in ('float16', 'bfloat16')


def compute_type(dtype: DataType) -> str:
    """The C type values of ``dtype`` are computed in."""
    return 'float' if is_16bit_float(dtype) else _SCALAR_C[dtype.name]


_SIGNED_INTS = ('int8', 'int16', 'int32', 'int64')


def _assigned_vars(s: Stmt) -> Set[int]:
    """Ids of the variables ``s`` assigns to."""
    if isinstance(s, Seq):
        return set().union(*(_assigned_vars(sub) for sub in s.stmts))
    if isinstance(s, Assign):
        return {id(s.var)}
    if isinstance(s, (For, While)):
        return _assigned_vars(s.body)
    if isinstance(s, If):
        return _assigned_vars(s.then) | (set() if s.otherwise is None else _assigned_vars(s.otherwise))
    return set()


class CodeGen:
    def __init__(self, target: str):
        self.target = target
        self.names: Dict[int, str] = {}
        # Fast division (hidet/kernel/fast_divmod.h): while a CUDA kernel's body is generated, the ids of
        # its launch-invariant integer parameters and the divisors (C text) found so far; per kernel name,
        # the divisors its launch passes as FastDivmod parameters (magic numbers computed on the host).
        self.invariant: Optional[Set[int]] = None
        self.divisors: List[str] = []
        self.kernel_divisors: Dict[str, List[str]] = {}

    def storage_type(self, dtype: DataType) -> str:
        return _STORAGE_16[self.target][dtype.name] if is_16bit_float(dtype) else _SCALAR_C[dtype.name]

    def name(self, v: Var) -> str:
        if isinstance(v, SymbolVar):  # one C variable per symbol name (the launch entry binds it from dims)
            return f'sym_{v.name}'
        if id(v) not in self.names:
            base = ''.join(c if c.isalnum() else '_' for c in v.name)
            self.names[id(v)] = f'{base}_{len(self.names)}' if not v.pointer else base
        return self.names[id(v)]

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return self.name(e)
        if isinstance(e, Constant):
            return self.constant(e)
        if isinstance(e, BufferLoad):
            load = f'{self.name(e.buffer)}[{self.expr(e.index)}]'
            return f'hidet::to_float({load})' if is_16bit_float(e.dtype) else load
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Unary):
            return f'({e.op}{self.expr(e.a)})'
        if isinstance(e, Cast):
            return self.cast(self.expr(e.a), e.a.dtype, e.dtype)
        if isinstance(e, Select):
            return f'({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})'
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, (Address, PrimCall, FunctionCall)):
            return self.lowlevel(e)
        raise TypeError(f'codegen: unexpected expression {type(e).__name__} (was the task scheduled?)')

    def constant(self, c: Constant) -> str:
        if c.dtype.is_boolean():
            return 'true' if c.value else 'false'
        if c.dtype.is_integer():
            return f'{c.value}ll' if c.dtype.name == 'int64' else f'{compute_type(c.dtype)}({c.value})'
        v = c.value
        if v != v:
            return f'{compute_type(c.dtype)}(NAN)'
        if v in (float('inf'), float('-inf')):
            return f"{compute_type(c.dtype)}({'-' if v < 0 else ''}INFINITY)"
        text = repr(float(v))
        return text if compute_type(c.dtype) == 'double' else f'{text}f'

    def cast(self, text: str, src: DataType, dst: DataType) -> str:
        if src == dst:
            return text
        if dst.is_boolean():
            return f'(({text}) != 0)'
        if is_16bit_float(dst):  # round to the 16-bit type, compute on in float
            return f'hidet::to_float(hidet::from_float<{self.storage_type(dst)}>(float({text})))'
        return f'(({compute_type(dst)})({text}))'

    def binary(self, e: Binary) -> str:
        operand_type = e.dtype if e.op not in ('<', '<=', '>', '>=', '==', '!=', '&&', '||') else None
        if operand_type is None and e.op in ('<', '<=', '>', '>=', '==', '!='):
            operand_type = promote(e.a.dtype, e.b.dtype)
        if e.op in ('/', '%') and self.invariant is not None and e.dtype.name in _SIGNED_INTS and \
                self.launch_invariant(e.b):
            return self.fast_divmod(e.op, self.cast(self.expr(e.a), e.a.dtype, e.dtype), e.b, e.dtype)
        tanh = self.one_plus_tanh_argument(e)
        if tanh is not None:
            return f'hidet::one_plus_tanh({self.expr(tanh)})'
        a, b = self.expr(e.a), self.expr(e.b)
        if operand_type is not None:
            a, b = self.cast(a, e.a.dtype, operand_type), self.cast(b, e.b.dtype, operand_type)
        if e.op in ('max', 'min'):
            return f'hidet::{e.op}<{compute_type(e.dtype)}>({a}, {b})'
        if e.op == '%' and e.dtype.is_float():
            return f'std::fmod({a}, {b})' if self.target == 'cpu' else f'fmod({a}, {b})'
        return f'({a} {e.op} {b})'

    @staticmethod
    def one_plus_tanh_argument(e: Binary) -> Optional[Expr]:
        """z where ``e`` is ``1 + tanh(z)`` in float32: GELU-tanh's factor, emitted as ``hidet::one_plus_tanh``
        (2 sigmoid(2z), which has no cancellation for negative z and, on the GPU, costs two special-function
        instructions instead of tanhf's twenty). In float16 and bfloat16, tanh is the GPU's one instruction
        (hidet::tanh_approx), and 1 + tanh(z) stays as it is written."""
        if e.op != '+' or e.dtype != float32:
            return None
        for one, tanh in ((e.a, e.b), (e.b, e.a)):
            if isinstance(one, Constant) and one.value == 1 and isinstance(tanh, Call) and tanh.func == 'tanh' \
                    and tanh.dtype == e.dtype:
                return tanh.args[0]
        return None

    def launch_invariant(self, e: Expr) -> bool:
        """Whether integer expression ``e`` is computed from the kernel's unassigned scalar parameters (at
        least one) and constants only, so its launch can compute it."""
        if isinstance(e, Var):
            return id(e) in self.invariant or isinstance(e, SymbolVar)
        if isinstance(e, Binary) and e.op in ('+', '-', '*', '/', '%', 'max', 'min'):
            return self.launch_invariant(e.a) and self.launch_invariant(e.b) or (
                isinstance(e.a, Constant) and self.launch_invariant(e.b)) or (
                isinstance(e.b, Constant) and self.launch_invariant(e.a))
        if isinstance(e, Cast):
            return e.dtype.name in _SIGNED_INTS and e.a.dtype.name in _SIGNED_INTS and self.launch_invariant(e.a)
        return False

    def fast_divmod(self, op: str, a: str, divisor: Expr, dtype: DataType) -> str:
        """``a / divisor`` or ``a % divisor`` through the kernel's FastDivmod parameter for ``divisor``."""
        invariant, self.invariant = self.invariant, None  # the divisor's text as the launch computes it
        text = self.cast(self.expr(divisor), divisor.dtype, dtype)
        self.invariant = invariant
        if text not in self.divisors:
            self.divisors.append(text)
        method = 'div' if op == '/' else 'mod'
        return f'(({compute_type(dtype)})fdm_{self.divisors.index(text)}.{method}((int64_t)({a})))'

    def kernel_body(self, f: Function, invariant: Set[int], indent: int = 1) -> List[str]:
        """The lines of kernel ``f``'s body, dividing by launch-invariant divisors through FastDivmod
        parameters (listed in ``kernel_divisors[f.name]``; see kernel_params)."""
        self.invariant, self.divisors = invariant - _assigned_vars(f.body), []
        try:
            # (first: the kernels before it have finished; cpp/include/hidet/kernel/cuda.h)
            lines = ['  ' * indent + 'hidet::dependent_launch_prologue();'] + self.stmt(f.body, indent)
        finally:
            self.invariant = None
        self.kernel_divisors[f.name] = self.divisors
        return lines

    def kernel_params(self, f: Function) -> List[str]:
        return [f'const hidet::FastDivmod fdm_{i}' for i in range(len(self.kernel_divisors.get(f.name, ())))]

    def divisor_args(self, f: Function) -> List[str]:
        """The FastDivmod arguments of a launch of kernel ``f`` (computed from the launch's scalars)."""
        return [f'hidet::FastDivmod({text})' for text in self.kernel_divisors.get(f.name, ())]

    def call(self, e: Call) -> str:
        if e.func in _CUDA_BUILTINS:
            return _CUDA_BUILTINS[e.func]
        if e.func in ('hidet_lowest', 'hidet_highest'):
            return f'hidet::{e.func[6:]}<{compute_type(e.dtype)}>()'
        if e.func.startswith(('hidet_block_reduce_', 'hidet_warp_reduce_')):
            return f'hidet::{e.func[6:]}({self.expr(e.args[0])})'
        if e.func.startswith('hidet_column_reduce_'):  # (value, columns, rows): a columns x rows block
            return f'hidet::{e.func[6:]}<{e.args[1].value}, {e.args[2].value}>({self.expr(e.args[0])})'
        if e.func == 'ipow':  # integer power (hidet/kernel/common.h)
            a, b = e.args
            return f'hidet::ipow<{compute_type(e.dtype)}>({self.cast(self.expr(a), a.dtype, e.dtype)}, ' \
                   f'{self.cast(self.expr(b), b.dtype, e.dtype)})'
        args = [self.cast(self.expr(a), a.dtype, e.dtype if e.dtype.is_float() else a.dtype) for a in e.args]
        joined = ', '.join(args)
        if e.func in ('rsqrt', 'sigmoid'):
            return f'hidet::{e.func}({joined})'
        if e.func == 'abs':
            return f'std::abs({joined})' if self.target == 'cpu' else f'abs({joined})'
        if e.func == 'round':  # half to even, as torch.round
            return f'std::nearbyint({joined})' if self.target == 'cpu' else f'rint({joined})'
        if e.func == 'isnan':
            return f'hidet::is_nan({self.expr(e.args[0])})'
        approx = e.func if e.func in _EXACT else APPROX_16BIT.get(e.func) if is_16bit_float(e.dtype) else None
        if approx is not None:  # (a 16-bit result's tanh or erf, on the GPU: see APPROX_16BIT)
            return f'std::{_EXACT[approx]}({joined})' if self.target == 'cpu' else f'hidet::{approx}({joined})'
        if e.func in _MATH:
            return f'std::{e.func}({joined})' if self.target == 'cpu' else f'{e.func}({joined})'
        raise ValueError(f'codegen: unknown function {e.func!r}')

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Stmt, indent: int) -> List[str]:
        pad = '  ' * indent
        if isinstance(s, Seq):
            return [line for sub in s.stmts for line in self.stmt(sub, indent)]
        if isinstance(s, Declare) and s.var.type is not None:
            return [pad + self.declare_typed(s)]
        if isinstance(s, Declare):
            init = '' if s.init is None else f' = {self.cast(self.expr(s.init), s.init.dtype, s.var.dtype)}'
            return [f'{pad}{compute_type(s.var.dtype)} {self.name(s.var)}{init};']
        if isinstance(s, Assign) and s.var.type is not None:
            return [f'{pad}{self.name(s.var)} = ({self.c_type(s.var.type)})({self.expr(s.value)});']
        if isinstance(s, Assign):
            return [f'{pad}{self.name(s.var)} = {self.cast(self.expr(s.value), s.value.dtype, s.var.dtype)};']
        if isinstance(s, Store):
            dtype = s.buffer.dtype
            value = self.expr(s.value)
            if is_16bit_float(dtype):
                if isinstance(s.value, Cast) and s.value.dtype == dtype:  # (rounded once, not rounded, widened again)
                    value = self.expr(s.value.a)
                value = f'hidet::from_float<{self.storage_type(dtype)}>(float({value}))'
            else:
                value = self.cast(value, s.value.dtype, dtype)
            return [f'{pad}{self.name(s.buffer)}[{self.expr(s.index)}] = {value};']
        if isinstance(s, For):
            v = self.name(s.var)
            head = [f'{pad}#pragma omp parallel for schedule(static)'] if s.kind == 'parallel' else []
            if s.kind == 'unroll':
                head = [f'{pad}#pragma unroll']
            if s.kind == 'simd' and self.target == 'cpu':
                head = [f'{pad}#pragma omp simd']
            cmp = '>' if isinstance(s.step, Constant) and s.step.value < 0 else '<'
            head.append(f'{pad}for ({compute_type(s.var.dtype)} {v} = {self.expr(s.start)}; {v} {cmp} '
                        f'{self.expr(s.stop)}; {v} += {self.expr(s.step)}) {{')
            return head + self.stmt(s.body, indent + 1) + [f'{pad}}}']
        if isinstance(s, If):
            lines = [f'{pad}if ({self.expr(s.cond)}) {{'] + self.stmt(s.then, indent + 1)
            if s.otherwise is not None:
                lines += [f'{pad}}} else {{'] + self.stmt(s.otherwise, indent + 1)
            return lines + [f'{pad}}}']
        if isinstance(s, VectorCopy):
            nbytes = s.count * s.dst.dtype.nbytes
            return [f'{pad}hidet::copy_vector<{nbytes}>({self.name(s.dst)} + {self.expr(s.dst_index)}, '
                    f'{self.name(s.src)} + {self.expr(s.src_index)});']
        if isinstance(s, Evaluate):
            return [f'{pad}{self.expr(s.expr)};']
        if isinstance(s, While):
            return [f'{pad}while ({self.expr(s.cond)}) {{'] + self.stmt(s.body, indent + 1) + [f'{pad}}}']
        if isinstance(s, (Break, Continue)):
            return [f'{pad}{"break" if isinstance(s, Break) else "continue"};']
        if isinstance(s, Return):
            return [f'{pad}return{self.returned(s.value)};']
        raise TypeError(f'codegen: unexpected statement {type(s).__name__}')

    def function(self, f: Function, num_inputs: int, symbols: List[str] = ()) -> List[str]:
        params = []
        for i, p in enumerate(f.params):
            const = 'const ' if i < num_inputs else ''
            params.append(f'{const}{self.storage_type(p.dtype)}* __restrict__ {self.name(p)}')
        params += [f'int64_t sym_{s}' for s in symbols]
        if f.kind == 'cuda':
            block = 1
            for b in f.block:
                block *= b
            body = self.kernel_body(f, set())  # the symbols are its scalars
            params += self.kernel_params(f)
            return [f'__global__ void __launch_bounds__({block}) {f.name}({", ".join(params)}) {{'] + body + ['}', '']
        return [f'static void {f.name}({", ".join(params)}) {{'] + self.stmt(f.body, 1) + ['}', '']

    # ------------------------------------------------------------------ Hidet Script (hidet/lang)
    def c_type(self, t) -> str:
        """The C type of values of ``t``: scalars in their compute type; pointers and tensors (held by
        address) as pointers to their storage type."""
        if t is void:
            return 'void'
        if isinstance(t, PointerType):
            base = t.base
            return ('void' if base is void else self.c_type(base) if isinstance(base, PointerType)
                    else self.storage_type(base)) + '*'
        if isinstance(t, TensorType):
            return self.storage_type(t.dtype) + '*'
        return compute_type(t)

    def lowlevel(self, e: Expr) -> str:
        if isinstance(e, Address):
            return f'({self.expr(e.base)} + {self.expr(e.index)})'
        if isinstance(e, PrimCall):
            pointee = '' if e.dtype is void else self.storage_type(e.dtype)
            return render(e.name, self.target, [self.expr(a) for a in e.args], e.attrs, pointee)
        args = [self.expr(a) if p.type is not None else self.cast(self.expr(a), a.dtype, p.dtype)
                for p, a in zip(e.func.params, e.args)]
        return f'{e.func.name}({", ".join(args)})'

    def returned(self, value) -> str:
        if value is None:
            return ''
        ret = self.function_ret
        if isinstance(ret, DataType):
            return ' ' + self.cast(self.expr(value), value.dtype, ret)
        return f' ({self.c_type(ret)})({self.expr(value)})'

    def declare_typed(self, s: Declare) -> str:
        """A pointer, a view of a pointer as a tensor, or a shared / register array."""
        v, t = s.var, s.var.type
        if isinstance(t, TensorType) and t.scope != 'pointer':
            align = '__align__(16)' if self.target == 'cuda' else 'alignas(16)'
            shared = '__shared__ ' if t.scope == 'shared' else ''
            return f'{shared}{align} {self.storage_type(t.dtype)} {self.name(v)}[{t.const_numel()}];'
        init = '' if s.init is None else f' = ({self.c_type(t)})({self.expr(s.init)})'
        return f'{self.c_type(t)} {self.name(v)}{init};'

    def param(self, p: Var) -> str:
        if isinstance(p.type, TensorMapType):
            return f'const __grid_constant__ CUtensorMap {self.name(p)}'
        if isinstance(p.type, TensorType):
            return f'{self.storage_type(p.dtype)}* __restrict__ {self.name(p)}'
        return f'{self.c_type(p.dtype if p.type is None else p.type)} {self.name(p)}'

    def script_function(self, f: Function, prototype: bool = False) -> List[str]:
        self.function_ret = f.ret_type
        params = ', '.join(self.param(p) for p in f.params)
        ret = self.c_type(f.ret_type)
        body = None
        if f.kind == 'cuda_kernel':
            bounds = ''
            if all(isinstance(b, int) for b in f.block):
                threads = 1
                for b in f.block:
                    threads *= b
                # (nvcc takes one of the two: a register cap in place of the bound on threads)
                bounds = f'__maxnreg__({f.max_registers}) ' if f.max_registers else f'__launch_bounds__({threads}) '
            if not prototype:
                scalars = {id(p) for p in f.params if p.type is None and p.dtype.name in _SIGNED_INTS}
                body = self.kernel_body(f, scalars)
                params = ', '.join([params] * bool(params) + self.kernel_params(f))
            if f.cluster:
                bounds += f'__cluster_dims__({", ".join(str(c) for c in f.cluster)}) '
            head = f'__global__ void {bounds}{f.name}({params})'
        elif f.kind == 'cuda_device':
            head = f'__device__ __forceinline__ {ret} {f.name}({params})'
        elif f.kind == 'cpu_kernel':
            head = f'void {f.name}({params})'
        elif f.kind == 'cpu_internal':
            head = f'static inline {ret} {f.name}({params})'
        else:
            raise ValueError(f'codegen: unknown function kind {f.kind!r}')
        if prototype:
            return [head + ';']
        return [head + ' {'] + (self.stmt(f.body, 1) if body is None else body) + ['}', '']


def _output_buffers(f: Function, module: IRModule, index: int) -> List[int]:
    """The buffers of ``f``'s output parameters (after the inputs): output ``index`` of the module, or those
    ``f.outputs`` names (a kernel writing several)."""
    return [module.num_inputs + o for o in (f.outputs if f.outputs is not None else (index,))]


def _launch_call(gen: CodeGen, f: Function, module: IRModule, index: int) -> List[str]:
    args = [f'({gen.storage_type(p.dtype)}*)buffers[{i}]' for i, p in enumerate(f.params[:module.num_inputs])]
    for p, b in zip(f.params[module.num_inputs:], _output_buffers(f, module, index)):
        args.append(f'({gen.storage_type(p.dtype)}*)buffers[{b}]')
    args += [f'sym_{s}' for s in module.symbols] + gen.divisor_args(f)
    if f.kind == 'cpu':
        return [f'  {f.name}({", ".join(args)});']
    grid = ', '.join(str(g) if isinstance(g, int) else gen.expr(g) for g in f.grid)  # symbolic: from the dims
    block = ', '.join(str(b) for b in f.block)
    return [f'  if (cudaError_t err = hidet::launch({f.name}, dim3({grid}), dim3({block}), 0, (cudaStream_t)stream, '
            f'{", ".join(args)}); err != cudaSuccess)',
            f'    return hidet::fail("{_fmt(module.name)}: launching {f.name} failed: %s", cudaGetErrorString(err));']


def _guarded_launch(gen: CodeGen, f: Function, module: IRModule, index: int) -> List[str]:
    """Launch ``f``; a vectorized kernel only when its buffers are aligned, else its scalar fallback."""
    if f.fallback is None:
        return _launch_call(gen, f, module, index)

    outputs = _output_buffers(f, module, index)

    def buffer(param: int) -> int:
        return param if param < module.num_inputs else outputs[param - module.num_inputs]

    conds = ' && '.join(f'hidet::is_aligned(buffers[{buffer(p)}], {nbytes})' for p, nbytes in f.aligned)
    indent = lambda lines: ['  ' + line for line in lines]  # noqa: E731
    return ([f'  if ({conds}) {{'] + indent(_launch_call(gen, f, module, index)) + ['  } else {'] +
            indent(_launch_call(gen, f.fallback, module, index)) + ['  }'])


def _fmt(text: str) -> str:
    """``text`` inside the format string of a generated ``hidet::fail`` (printf): '%' doubled."""
    return text.replace('%', '%%')


def symbol_bindings(label: str, symbols: List[str]) -> List[str]:
    """Lines of a ``launch`` entry binding C variables ``sym_<name>`` to the ABI's ``dims`` (in the order of
    ``symbols``), a negative value being an error."""
    lines = []
    for i, s in enumerate(symbols):
        lines += [f'  const int64_t sym_{s} = dims[{i}];',
                  f'  if (sym_{s} < 0) return hidet::fail("{_fmt(label)}: dimension {s} is negative: %lld", '
                  f'(long long)sym_{s});']
    return lines


def generate(module: IRModule) -> str:
    """The source of ``module``'s kernel library."""
    if module.exports is not None:
        return _generate_script(module)
    gen = CodeGen(module.target)
    header = 'hidet/kernel/cuda.h' if module.target == 'cuda' else 'hidet/kernel/cpu.h'
    lines = [f'// generated by hidet: {module.name} ({module.target})', f'#include <{header}>', '',
             'HIDET_DEFINE_LIBRARY_EXPORTS()', '']
    for f in module.functions:
        if f.fallback is not None:
            lines += gen.function(f.fallback, module.num_inputs, module.symbols)
        lines += gen.function(f, module.num_inputs, module.symbols)
    total = module.num_inputs + module.num_outputs
    lines += [f'HIDET_KERNEL_EXPORT int32_t {ENTRY_POINT}(void* const* buffers, int32_t num_buffers, '
              'const int64_t* dims, int32_t num_dims, void* stream) {',
              f'  if (num_buffers != {total})',
              f'    return hidet::fail("{_fmt(module.name)}: expected {total} buffers ({module.num_inputs} inputs, '
              f'{module.num_outputs} outputs), got %d", (int)num_buffers);']
    if module.symbols:
        nd, names = len(module.symbols), ', '.join(module.symbols)
        lines += [f'  if (num_dims != {nd} || dims == nullptr)',
                  f'    return hidet::fail("{_fmt(module.name)}: expected {nd} dimension values ({names}), got %d", '
                  '(int)num_dims);']
        lines += symbol_bindings(module.name, module.symbols)
    for i, f in enumerate(module.functions):
        lines += _guarded_launch(gen, f, module, i)
    lines += ['  return 0;', '}', '']
    if module.signature is None:
        raise ValueError(f'{module.name}: a task module declares its launch entry (IRModule.signature: '
                         'Task.signature(), which schedule_task sets)')
    lines += declare_kernel(ENTRY_POINT, module.signature)
    return '\n'.join(lines)


def declare_kernel(entry: str, signature: str) -> List[str]:
    """The declaration of kernel ``entry`` (kernel ABI: ``hidet_signature_<entry>``, hidet/kernel_abi.h) with
    ``signature``, JSON of its buffers and dims (Task.signature; _script_signature): a library binds only
    the kernels it declares, and a graph's loader checks each instruction against the declaration."""
    text = signature.replace('\\', '\\\\').replace('"', '\\"')
    return [f'HIDET_KERNEL_SIGNATURE({entry}, "{text}")', '']


def _script_signature(f: Function) -> str:
    """The signature of a Hidet Script kernel's entry: its tensor and pointer parameters are its buffers (a
    tensor's shape as an expression of the scalar parameters where it is one, else null: a pointer's extent is
    the kernel's own business); its scalar parameters are its dims."""
    dims = [p.name for p in f.params if p.type is None]
    buffers = []
    for p in f.params:
        if p.type is None or isinstance(p.type, TensorMapType):
            continue
        shape = None
        if isinstance(p.type, TensorType):
            try:
                shape = [dim_postfix(d) for d in p.type.shape]
            except NotImplementedError:
                shape = None
            tokens = [t for d in shape or [] for t in (d if isinstance(d, list) else [d])]
            if any(isinstance(t, str) and t not in ('+', '-', '*', '/', '%') and t not in dims for t in tokens):
                shape = None  # (a size the scalar parameters do not give)
        buffers.append({'dtype': p.type.dtype.name, 'shape': shape})
    return json.dumps({'buffers': buffers, 'dims': dims}, separators=(',', ':'))


def _script_entry(gen: CodeGen, f: Function) -> List[str]:
    """The ABI entry point of a Hidet Script kernel: its tensor and pointer arguments are ``buffers``,
    its scalar arguments ``dims`` (in parameter order; floats as bit patterns, hidet/kernel/lang.h);
    the launch configuration is computed from the scalars."""
    scalars = [p for p in f.params if p.type is None]
    maps = [p for p in f.params if isinstance(p.type, TensorMapType)]
    nb, nd = len(f.params) - len(scalars) - len(maps), len(scalars)
    lines = [f'HIDET_KERNEL_EXPORT int32_t {f.name}(void* const* buffers, int32_t num_buffers, '
             'const int64_t* dims, int32_t num_dims, void* stream) {',
             f'  if (num_buffers != {nb} || num_dims != {nd})',
             f'    return hidet::fail("{f.name}: expected {nb} tensor/pointer and {nd} scalar arguments, '
             'got %d and %d", (int)num_buffers, (int)num_dims);']
    for i, p in enumerate(scalars):
        ct = compute_type(p.dtype)
        lines.append(f'  {ct} {gen.name(p)} = hidet::lang::from_dim<{ct}>(dims[{i}]);')
    args, b, buffer_of = [], 0, {}
    for p in f.params:
        if p.type is None or isinstance(p.type, TensorMapType):
            args.append(gen.name(p))
        else:
            args.append(f'({gen.c_type(p.type)})buffers[{b}]')
            buffer_of[id(p)] = b
            b += 1
    for p in maps:
        lines += _tensor_map_lines(gen, f, p, buffer_of)
    call_args = ', '.join(args + gen.divisor_args(f))
    declaration = declare_kernel(f.name, _script_signature(f))
    if f.kind == 'cpu_kernel':
        return lines + [f'  hidet_script::{f.name}({call_args});', '  return 0;', '}', ''] + declaration

    def dims3(values) -> str:
        return ', '.join(f'(unsigned)({gen.expr(convert(v))})' for v in values)

    return lines + [
        f'  dim3 grid_({dims3(f.grid)}), block_({dims3(f.block)});',
        f'  size_t smem_ = (size_t)({gen.expr(convert(f.dynamic_smem))});',
        '  if (grid_.x == 0 || grid_.y == 0 || grid_.z == 0) return 0;',
        '  if (smem_ > 48 * 1024) {',
        f'    cudaError_t err = cudaFuncSetAttribute(hidet_script::{f.name}, '
        'cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_);',
        f'    if (err != cudaSuccess) return hidet::fail("{f.name}: cannot use %zu bytes of dynamic shared memory: '
        '%s", smem_, cudaGetErrorString(err));',
        '  }',
        f'  if (cudaError_t err = hidet::launch(hidet_script::{f.name}, grid_, block_, smem_, (cudaStream_t)stream'
        f'{", " + call_args if call_args else ""}); err != cudaSuccess)',
        f'    return hidet::fail("{f.name}: launch failed: %s", cudaGetErrorString(err));',
        '  return 0;', '}', ''] + declaration


def _tensor_map_lines(gen: CodeGen, f: Function, p: Var, buffer_of) -> List[str]:
    """Lines of a launch entry building the tensor map of kernel parameter ``p`` (TensorMapType) over its
    tensor's buffer."""
    t: TensorMapType = p.type
    if id(t.tensor) not in buffer_of:
        raise ValueError(f'{f.name}: the tensor map {p.name} is over {t.tensor.name}, not a tensor parameter')

    def values(xs, ctype) -> str:
        return ', '.join(f'({ctype})({gen.expr(convert(x))})' for x in xs)

    name, elem = gen.name(p), gen.storage_type(t.dtype)
    base = f'(const {elem}*)buffers[{buffer_of[id(t.tensor)]}] + ({gen.expr(convert(t.offset))})'
    lines = [f'  CUtensorMap {name};',
             '  {',
             '    int code_ = 0;',
             f'    const uint64_t dims_[] = {{{values(t.dims, "uint64_t")}}};',
             f'    const uint64_t strides_[] = {{{values(t.strides, "uint64_t")}}};']
    if t.im2col is None:
        lines += [f'    const uint32_t box_[] = {{{values(t.box, "uint32_t")}}};',
                  f'    const char* err = hidet::lang::make_tensor_map<{elem}>(&{name}, {base}, {len(t.dims)}, dims_, '
                  'strides_, box_, &code_);']
    else:
        w = t.im2col
        lines += [f'    const int lower_[] = {{{values(w.lower, "int")}}}, upper_[] = {{{values(w.upper, "int")}}};',
                  f'    const uint32_t traversal_[] = {{{values(w.strides, "uint32_t")}}};',
                  f'    const char* err = hidet::lang::make_im2col_tensor_map<{elem}>(&{name}, {base}, dims_, '
                  f'strides_, lower_, upper_, {values(t.box, "uint32_t")}, traversal_, &code_);']
    return lines + [f'    if (err) return hidet::fail("{f.name}: tensor map {p.name}: %s (CUresult %d)", err, code_);',
                    '  }']


def merge_libraries(sources: Sequence[str]) -> str:
    """One library's source from several generated ones whose functions and entry points have distinct names:
    the header includes and the library exports (HIDET_DEFINE_LIBRARY_EXPORTS) once, from the first."""
    merged = []
    for i, source in enumerate(sources):
        lines = source.splitlines()
        if i:
            lines = [line for line in lines if not line.startswith(('#include', 'HIDET_DEFINE_LIBRARY_EXPORTS'))]
        merged += lines + ['']
    return '\n'.join(merged)


def forwarding_launch(label: str, kernel: str, num_buffers: int, signature: str, num_dims: int = 0,
                      entry: str = 'launch', guard: Optional[Tuple[str, str]] = None) -> List[str]:
    """A ``launch`` entry (kernel ABI; named ``entry``, declared with ``signature``: the task's) for a template's
    library: checks the buffer count, then calls the Hidet Script kernel's own entry point with the same buffers
    and the ``num_dims`` symbolic dimensions (its scalar parameters). ``guard``: (a C++ condition on the buffers,
    the statement run instead where it is false), e.g. the alignment a kernel's vector accesses need."""
    call = f'return {kernel}(buffers, {num_buffers}, dims, {num_dims}, stream);'
    body = [f'  {call}'] if guard is None else [f'  if ({guard[0]})', f'    {call}', f'  {guard[1]}']
    return [f'HIDET_KERNEL_EXPORT int32_t {entry}(void* const* buffers, int32_t num_buffers, const int64_t* dims, '
            'int32_t num_dims, void* stream) {',
            f'  if (num_buffers != {num_buffers})',
            f'    return hidet::fail("{_fmt(label)}: expected {num_buffers} buffers, got %d", (int)num_buffers);',
            *body, '}', ''] + declare_kernel(entry, signature)


def _generate_script(module: IRModule) -> str:
    """A Hidet Script module: its functions in ``namespace hidet_script``, then one ABI entry point per
    exported kernel (named as the kernel)."""
    gen = CodeGen(module.target)
    lines = [f'// generated by hidet from Hidet Script: {module.name} ({module.target})',
             '#include <hidet/kernel/lang.h>', '', 'HIDET_DEFINE_LIBRARY_EXPORTS()', '', 'namespace hidet_script {', '']
    for f in module.functions:
        if f.kind in ('cuda_device', 'cpu_internal'):
            lines += gen.script_function(f, prototype=True)
    lines.append('')
    for f in module.functions:
        lines += gen.script_function(f)
    lines += ['}  // namespace hidet_script', '']
    by_name = {f.name: f for f in module.functions}
    for name in module.exports:
        lines += _script_entry(gen, by_name[name])
    return '\n'.join(lines)
