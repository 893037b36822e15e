"""IRModule → C++ (CPU) or CUDA C++ source following the kernel ABI (cpp/include/hidet/kernel_abi.h).

The library exports one entry point, ``launch``, which checks the buffer count and runs the
module's functions in order: buffers are the inputs, then the outputs; function i writes output i.
float16/bfloat16 values are computed in float32 and rounded when stored or cast.
"""
from __future__ import annotations

from typing import Dict, List

from hidet.ir.dtypes import DataType
from hidet.ir.expr import Binary, BufferLoad, Call, Cast, Constant, Expr, Select, Unary, Var
from hidet.ir.stmt import Assign, Declare, Evaluate, For, Function, If, IRModule, Seq, Stmt, Store

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
_MATH = {'exp', 'log', 'sqrt', 'sin', 'cos', 'tanh', 'erf', 'pow', 'floor', 'ceil', 'log2', 'log1p', 'expm1',
         'atan', 'asin', 'acos', 'sinh', 'cosh', 'exp2', 'tan', 'fmod', 'trunc'}


def is_16bit_float(dtype: DataType) -> bool:
    return dtype.name in ('float16', 'bfloat16')


def compute_type(dtype: DataType) -> str:
    """The C type values of ``dtype`` are computed in."""
    return 'float' if is_16bit_float(dtype) else _SCALAR_C[dtype.name]


class CodeGen:
    def __init__(self, target: str):
        self.target = target
        self.names: Dict[int, str] = {}

    def storage_type(self, dtype: DataType) -> str:
        return _STORAGE_16[self.target][dtype.name] if is_16bit_float(dtype) else _SCALAR_C[dtype.name]

    def name(self, v: Var) -> str:
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
            from hidet.ir.expr import promote

            operand_type = promote(e.a.dtype, e.b.dtype)
        a, b = self.expr(e.a), self.expr(e.b)
        if operand_type is not None:
            a, b = self.cast(a, e.a.dtype, operand_type), self.cast(b, e.b.dtype, operand_type)
        if e.op in ('max', 'min'):
            return f'hidet::{e.op}<{compute_type(e.dtype)}>({a}, {b})'
        if e.op == '%' and e.dtype.is_float():
            return f'std::fmod({a}, {b})' if self.target == 'cpu' else f'fmod({a}, {b})'
        return f'({a} {e.op} {b})'

    def call(self, e: Call) -> str:
        if e.func in _CUDA_BUILTINS:
            return _CUDA_BUILTINS[e.func]
        if e.func in ('hidet_lowest', 'hidet_highest'):
            return f'hidet::{e.func[6:]}<{compute_type(e.dtype)}>()'
        if e.func.startswith(('hidet_block_reduce_', 'hidet_warp_reduce_')):
            return f'hidet::{e.func[6:]}({self.expr(e.args[0])})'
        args = [self.cast(self.expr(a), a.dtype, e.dtype if e.dtype.is_float() else a.dtype) for a in e.args]
        joined = ', '.join(args)
        if e.func == 'rsqrt':
            return f'hidet::rsqrt({joined})'
        if e.func == 'abs':
            return f'std::abs({joined})' if self.target == 'cpu' else f'abs({joined})'
        if e.func == 'round':  # half to even, as torch.round
            return f'std::nearbyint({joined})' if self.target == 'cpu' else f'rint({joined})'
        if e.func == 'isnan':
            return f'hidet::is_nan({self.expr(e.args[0])})'
        if e.func in _MATH:
            return f'std::{e.func}({joined})' if self.target == 'cpu' else f'{e.func}({joined})'
        raise ValueError(f'codegen: unknown function {e.func!r}')

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Stmt, indent: int) -> List[str]:
        pad = '  ' * indent
        if isinstance(s, Seq):
            return [line for sub in s.stmts for line in self.stmt(sub, indent)]
        if isinstance(s, Declare):
            init = '' if s.init is None else f' = {self.cast(self.expr(s.init), s.init.dtype, s.var.dtype)}'
            return [f'{pad}{compute_type(s.var.dtype)} {self.name(s.var)}{init};']
        if isinstance(s, Assign):
            return [f'{pad}{self.name(s.var)} = {self.cast(self.expr(s.value), s.value.dtype, s.var.dtype)};']
        if isinstance(s, Store):
            dtype = s.buffer.dtype
            value = self.expr(s.value)
            if is_16bit_float(dtype):
                value = f'hidet::from_float<{self.storage_type(dtype)}>(float({value}))'
            else:
                value = self.cast(value, s.value.dtype, dtype)
            return [f'{pad}{self.name(s.buffer)}[{self.expr(s.index)}] = {value};']
        if isinstance(s, For):
            v = self.name(s.var)
            head = [f'{pad}#pragma omp parallel for schedule(static)'] if s.kind == 'parallel' else []
            if s.kind == 'unroll':
                head = [f'{pad}#pragma unroll']
            head.append(f'{pad}for (int64_t {v} = {self.expr(s.start)}; {v} < {self.expr(s.stop)}; '
                        f'{v} += {self.expr(s.step)}) {{')
            return head + self.stmt(s.body, indent + 1) + [f'{pad}}}']
        if isinstance(s, If):
            lines = [f'{pad}if ({self.expr(s.cond)}) {{'] + self.stmt(s.then, indent + 1)
            if s.otherwise is not None:
                lines += [f'{pad}}} else {{'] + self.stmt(s.otherwise, indent + 1)
            return lines + [f'{pad}}}']
        if isinstance(s, Evaluate):
            return [f'{pad}{self.expr(s.expr)};']
        raise TypeError(f'codegen: unexpected statement {type(s).__name__}')

    def function(self, f: Function, num_inputs: int) -> List[str]:
        params = []
        for i, p in enumerate(f.params):
            const = 'const ' if i < num_inputs else ''
            params.append(f'{const}{self.storage_type(p.dtype)}* __restrict__ {self.name(p)}')
        if f.kind == 'cuda':
            block = 1
            for b in f.block:
                block *= b
            head = f'__global__ void __launch_bounds__({block}) {f.name}({", ".join(params)}) {{'
        else:
            head = f'static void {f.name}({", ".join(params)}) {{'
        return [head] + self.stmt(f.body, 1) + ['}', '']


def _launch_call(gen: CodeGen, f: Function, module: IRModule, index: int) -> List[str]:
    args = [f'({gen.storage_type(p.dtype)}*)buffers[{i}]' for i, p in enumerate(f.params[:module.num_inputs])]
    out = f.params[-1]
    args.append(f'({gen.storage_type(out.dtype)}*)buffers[{module.num_inputs + index}]')
    if f.kind == 'cpu':
        return [f'  {f.name}({", ".join(args)});']
    grid = ', '.join(str(g) for g in f.grid)
    block = ', '.join(str(b) for b in f.block)
    return [f'  {f.name}<<<dim3({grid}), dim3({block}), 0, (cudaStream_t)stream>>>({", ".join(args)});',
            '  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)',
            f'    return hidet::fail(std::string("{module.name}: launching {f.name} failed: ") + '
            'cudaGetErrorString(err));']


def generate(module: IRModule) -> str:
    """The source of ``module``'s kernel library."""
    gen = CodeGen(module.target)
    header = 'hidet/kernel/cuda.h' if module.target == 'cuda' else 'hidet/kernel/cpu.h'
    lines = [f'// generated by hidet: {module.name} ({module.target})', f'#include <{header}>', '',
             'HIDET_DEFINE_LIBRARY_EXPORTS()', '']
    for f in module.functions:
        lines += gen.function(f, module.num_inputs)
    total = module.num_inputs + module.num_outputs
    lines += [f'HIDET_KERNEL_EXPORT int32_t {ENTRY_POINT}(void* const* buffers, int32_t num_buffers, '
              'const int64_t* dims, int32_t num_dims, void* stream) {',
              f'  if (num_buffers != {total})',
              f'    return hidet::fail("{module.name}: expected {total} buffers ({module.num_inputs} inputs, '
              f'{module.num_outputs} outputs), got " + std::to_string(num_buffers));']
    for i, f in enumerate(module.functions):
        lines += _launch_call(gen, f, module, i)
    lines += ['  return 0;', '}', '']
    return '\n'.join(lines)
