"""Readable text of the IR.

- Expressions and tasks: variables are named by first appearance, so two structurally equal tasks print
  the same text (the Task cache key relies on this).
- Statements, functions and modules (the scheduled kernels): an indented pseudo-code with the
  variables' own names (made unique), e.g. ``print(schedule_task(task, 'cuda'))``::

      cuda kernel add_k0(in0: f32*, in1: f32*, out0: f32*)  grid=(32,) block=(256,)
        for n in range(hidet_global_thread_idx(), 8192, hidet_global_threads()):
          out0[n] = (in0[n] + in1[(n % 128)])
"""
from __future__ import annotations

from typing import Dict, List, Optional

from hidet.ir import stmt as st
from hidet.ir.compute import ReduceCompute, TensorNode
from hidet.ir.expr import Binary, BufferLoad, Call, Cast, Constant, Expr, Select, SymbolVar, TensorElement, Unary, Var
from hidet.ir.lowlevel import Address, FunctionCall, PrimCall


class Namer:
    """Stable names: tensors keep theirs; index variables become i0, i1, … in order of appearance."""

    def __init__(self):
        self.names: Dict[int, str] = {}

    def var(self, v: Var) -> str:
        if isinstance(v, SymbolVar):  # a dimension is identified by its name (it binds dims[] by name)
            return f'${v.name}'
        if id(v) not in self.names:
            self.names[id(v)] = f'v{len(self.names)}'
        return self.names[id(v)]


def expr_text(e: Expr, namer: Optional[Namer] = None, typed: bool = True) -> str:
    """The text of ``e``; ``typed=False`` leaves out the dtypes of constants and calls (pseudo-code)."""
    namer = namer or Namer()

    def t(x: Expr) -> str:
        if isinstance(x, Var):
            return namer.var(x)
        if isinstance(x, Constant):
            if not typed:
                return ('true' if x.value else 'false') if x.dtype.is_boolean() else repr(x.value)
            return f'{x.value!r}:{x.dtype.short_name}'
        if isinstance(x, BufferLoad):
            return f'{t(x.buffer)}[{t(x.index)}]'
        if isinstance(x, Address):
            return f'&{t(x.base)}[{t(x.index)}]'
        if isinstance(x, PrimCall):
            return f"{x.name}({', '.join(t(a) for a in x.args)})"
        if isinstance(x, FunctionCall):
            return f"{x.func.name}({', '.join(t(a) for a in x.args)})"
        if isinstance(x, Call) and not typed:
            return f"{x.func}({', '.join(t(a) for a in x.args)})"
        if isinstance(x, Binary):
            if x.op in ('max', 'min'):
                return f'{x.op}({t(x.a)}, {t(x.b)})'
            return f'({t(x.a)} {x.op} {t(x.b)})'
        if isinstance(x, Unary):
            return f'{x.op}{t(x.a)}'
        if isinstance(x, Call):
            return f"{x.func}({', '.join(t(a) for a in x.args)}):{x.dtype.short_name}"
        if isinstance(x, Cast):
            return f'{x.dtype.short_name}({t(x.a)})'
        if isinstance(x, Select):
            return f'({t(x.cond)} ? {t(x.t)} : {t(x.f)})'
        if isinstance(x, TensorElement):
            return f"{x.tensor.name}[{', '.join(t(i) for i in x.indices)}]"
        if isinstance(x, ReduceCompute):
            axes = ', '.join(f'{namer.var(a)}<{s}' for a, s in zip(x.axes, x.shape))
            return f'{x.kind}<{x.acc_dtype.short_name}->{x.dtype.short_name}>({axes}: {t(x.value)})'
        raise TypeError(f'cannot print {type(x).__name__}')

    return t(e)


def tensor_definition_text(node: TensorNode, namer: Namer) -> str:
    head = f'{node.name}: {node.dtype.short_name}{list(node.shape)}'
    if node.is_input():
        return head
    axes = ', '.join(namer.var(a) for a in node.definition.axes)
    return f'{head} = [{axes}] {expr_text(node.definition.value, namer)}'


# ---------------------------------------------------------------- statements, functions, modules
class ReadableNamer(Namer):
    """Variables keep their own names; a second variable of a name already taken gets a suffix."""

    def __init__(self):
        super().__init__()
        self.taken: Dict[str, int] = {}

    def var(self, v: Var) -> str:
        if id(v) not in self.names:
            count = self.taken.get(v.name, 0)
            self.taken[v.name] = count + 1
            self.names[id(v)] = v.name if count == 0 else f'{v.name}_{count}'
        return self.names[id(v)]


def _var_type(v: Var) -> str:
    if getattr(v, 'type', None) is not None:
        return repr(v.type)
    return f'{v.dtype.short_name}*' if v.pointer else v.dtype.short_name


def stmt_lines(s, namer: ReadableNamer, indent: int = 0) -> List[str]:
    pad = '  ' * indent

    def e(x) -> str:
        return expr_text(x, namer, typed=False)

    if isinstance(s, st.Seq):
        return [line for sub in s.stmts for line in stmt_lines(sub, namer, indent)]
    if isinstance(s, st.Declare):
        init = '' if s.init is None else f' = {e(s.init)}'
        return [f'{pad}{namer.var(s.var)}: {_var_type(s.var)}{init}']
    if isinstance(s, st.Assign):
        return [f'{pad}{namer.var(s.var)} = {e(s.value)}']
    if isinstance(s, st.Store):
        return [f'{pad}{namer.var(s.buffer)}[{e(s.index)}] = {e(s.value)}']
    if isinstance(s, st.VectorCopy):
        nbytes = s.count * s.dst.dtype.nbytes
        return [f'{pad}{namer.var(s.dst)}[{e(s.dst_index)} : +{s.count}] = {namer.var(s.src)}[{e(s.src_index)} : '
                f'+{s.count}]  # one {nbytes}-byte vector']
    if isinstance(s, st.For):
        start, stop, step = e(s.start), e(s.stop), e(s.step)
        args = stop if (start, step) == ('0', '1') else f'{start}, {stop}' if step == '1' else \
            f'{start}, {stop}, {step}'
        kind = '' if s.kind == 'serial' else f'{s.kind} '
        return [f'{pad}{kind}for {namer.var(s.var)} in range({args}):'] + stmt_lines(s.body, namer, indent + 1)
    if isinstance(s, st.If):
        lines = [f'{pad}if {e(s.cond)}:'] + stmt_lines(s.then, namer, indent + 1)
        if s.otherwise is not None:
            lines += [f'{pad}else:'] + stmt_lines(s.otherwise, namer, indent + 1)
        return lines
    if isinstance(s, st.While):
        return [f'{pad}while {e(s.cond)}:'] + stmt_lines(s.body, namer, indent + 1)
    if isinstance(s, st.Evaluate):
        return [f'{pad}{e(s.expr)}']
    if isinstance(s, (st.Break, st.Continue)):
        return [f'{pad}{type(s).__name__.lower()}']
    if isinstance(s, st.Return):
        return [f'{pad}return' + ('' if s.value is None else f' {e(s.value)}')]
    return [f'{pad}<{type(s).__name__}>']


def stmt_text(s, namer: Optional[ReadableNamer] = None) -> str:
    return '\n'.join(stmt_lines(s, namer or ReadableNamer()))


def function_lines(f, namer: Optional[ReadableNamer] = None) -> List[str]:
    namer = namer or ReadableNamer()
    params = ', '.join(f'{namer.var(p)}: {_var_type(p)}' for p in f.params)
    kind = {'cuda': 'cuda kernel', 'cpu': 'cpu kernel'}.get(f.kind, f.kind)
    head = f'{kind} {f.name}({params})'
    if f.kind in ('cuda', 'cuda_kernel'):
        head += f'  grid={f.grid} block={f.block}'
    lines = []
    if getattr(f, 'fallback', None) is not None:
        aligned = ', '.join(f'{f.params[i].name}: {b}' for i, b in f.aligned)
        lines += function_lines(f.fallback) + [f'# {f.name} runs when its buffers are aligned ({aligned} bytes), '
                                               f'else {f.fallback.name}']
    return lines + [head] + stmt_lines(f.body, namer, 1)


def function_text(f) -> str:
    return '\n'.join(function_lines(f))


def module_text(m) -> str:
    lines = [f"module {m.name} ({m.target}): inputs {m.num_inputs}, outputs {m.num_outputs}"]
    for f in m.functions:
        lines += [''] + function_lines(f)
    return '\n'.join(lines)
