"""Task: a compute definition with named inputs and outputs, the unit hidet schedules, builds and
caches. Its canonical text identifies it (the kernel cache key is a hash of it)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Sequence

from hidet.ir.compute import GridCompute, ReduceCompute, TensorNode
from hidet.ir.expr import Constant, SymbolVar, TensorElement, dim_postfix, evaluate_dim, symbols_of
from hidet.ir.functors import collect, rewrite
from hidet.ir.printer import Namer, tensor_definition_text


class Task:
    def __init__(self, name: str, inputs: Sequence[TensorNode], outputs: Sequence[TensorNode],
                 attrs: Dict[str, Any] = None):
        self.name = name
        self.inputs: List[TensorNode] = list(inputs)
        self.outputs: List[TensorNode] = list(outputs)
        self.attrs = dict(attrs or {})
        self._symbols = None
        missing = [t.name for out in self.outputs for t in collect(out, TensorNode)
                   if t.is_input() and all(t is not i for i in self.inputs)]
        if missing:
            raise ValueError(f'task {name}: outputs read tensors that are not task inputs: {sorted(set(missing))}')

    def symbols(self) -> List[str]:
        """Names of the symbolic dimensions of the task's tensors and reductions, sorted: the order of the
        kernel ABI's ``dims``. (Computed once: every imperative run of an operator asks.)"""
        if self._symbols is None:
            self._symbols = self._find_symbols()
        return self._symbols

    def _find_symbols(self) -> List[str]:
        exprs = []
        for out in self.outputs:
            for node in collect(out, TensorNode):
                exprs += list(node.shape)
            exprs += [d for r in collect(out, ReduceCompute) for d in r.shape]
        exprs += [d for t in self.inputs for d in t.shape]
        return symbols_of(exprs)

    def instantiate(self, values: Dict[str, int]) -> 'Task':
        """The task with its symbolic dimensions taken at ``values`` ({name: size}): a static task (what a
        template tunes at, for the range of sizes it serves)."""
        nodes: Dict[int, TensorNode] = {}

        def size(d):
            return evaluate_dim(d, values)

        def fn(e):
            if isinstance(e, SymbolVar):
                return Constant(values[e.name], e.dtype)
            if isinstance(e, TensorElement):
                return TensorElement(node(e.tensor), e.indices)
            if isinstance(e, ReduceCompute):
                return ReduceCompute(e.axes, [size(d) for d in e.shape], e.value, e.kind, e.acc_dtype, e.dtype)
            return None

        def node(t: TensorNode) -> TensorNode:
            if id(t) not in nodes:
                d = t.definition
                definition = None if d is None else GridCompute(d.axes, rewrite(d.value, fn))
                nodes[id(t)] = TensorNode(t.name, t.dtype, [size(s) for s in t.shape], definition)
            return nodes[id(t)]

        return Task(self.name, [node(t) for t in self.inputs], [node(t) for t in self.outputs], self.attrs)

    def text(self) -> str:
        """Canonical text: every tensor definition in dependency order, then the attributes."""
        namer = Namer()
        lines = [f'task {self.name}']
        lines += ['  input ' + tensor_definition_text(t, namer) for t in self.inputs]
        done = {id(t) for t in self.inputs}
        for out in self.outputs:
            for node in reversed(collect(out, TensorNode)):
                if id(node) not in done:
                    done.add(id(node))
                    prefix = '  output ' if any(node is o for o in self.outputs) else '  '
                    lines.append(prefix + tensor_definition_text(node, namer))
        if self.attrs:
            lines.append('  attrs ' + ', '.join(f'{k}={v!r}' for k, v in sorted(self.attrs.items())))
        return '\n'.join(lines)

    def signature(self) -> str:
        """The kernel ABI's declaration of the task's kernel (hidet/kernel_abi.h): JSON of its buffers (inputs,
        then outputs: dtype and shape) and of its symbolic dimensions (``dims``, in the order of ``symbols()``).
        A graph's loader checks each instruction's tensors against it."""
        buffers = [{'dtype': t.dtype.name, 'shape': [dim_postfix(d) for d in t.shape]}
                   for t in self.inputs + self.outputs]
        return json.dumps({'buffers': buffers, 'dims': self.symbols()}, separators=(',', ':'))

    def key(self) -> str:
        return hashlib.sha256(self.text().encode()).hexdigest()[:24]

    def __repr__(self) -> str:
        return self.text()
