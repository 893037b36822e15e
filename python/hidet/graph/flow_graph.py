"""FlowGraph: a dataflow graph of operators, traced from symbolic tensors.

    x = hidet.symbol([2, 3], device='cuda')
    y = hidet.ops.relu(x @ w + b)          # ops on symbolic tensors record a trace
    graph = hidet.trace_from(y, inputs=[x])
    graph(hidet.randn([2, 3], device='cuda'))   # run node by node (for debugging)
    compiled = hidet.graph.optimize(graph).build()

Tensors a graph reads that are neither inputs nor produced by its nodes are its constants
(weights): concrete tensors captured when the graph was traced.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Sequence, Union

from hidet.graph.operator import Operator
from hidet.graph.tensor import Tensor, bind_symbols
from hidet.ir.dtypes import data_type
from hidet.ir.expr import symbols_of
from hidet.option import Options, resolve as resolve_options
from hidet.runtime.device import device as _device


def symbol(shape: Sequence[int], dtype='float32', device='cpu') -> Tensor:
    """A symbolic tensor: a graph input with a shape, dtype and device but no data."""
    return Tensor(shape, data_type(dtype), _device(device), None)


def symbol_like(t: Tensor, dtype=None, device=None) -> Tensor:
    return symbol(t.shape, dtype or t.dtype, device or t.device)


def display_name(op: Operator) -> str:
    """``matmul`` → ``Matmul``, ``reduce_sum`` → ``ReduceSum``: the operator's name in printed graphs."""
    custom = getattr(op, 'display_name', None)
    if custom is not None:
        return custom
    return ''.join(part[:1].upper() + part[1:] for part in re.split(r'[_\W]+', op.task.name) if part)


class FlowGraph:
    """Operators in topological order, from ``inputs`` (symbolic tensors) to ``outputs``."""

    def __init__(self, outputs: Sequence[Tensor], inputs: Optional[Sequence[Tensor]] = None,
                 nodes: Optional[Sequence[Operator]] = None):
        self.outputs: List[Tensor] = list(outputs)
        self.nodes: List[Operator] = list(nodes) if nodes is not None else _topological_order(self.outputs)
        found_inputs = _free_symbols(self.nodes, self.outputs)
        if inputs is None:
            inputs = found_inputs
        self.inputs: List[Tensor] = list(inputs)
        for t in self.inputs:
            if not t.is_symbolic() or t.trace is not None:
                raise ValueError(f'graph inputs must be symbolic tensors made by hidet.symbol, got {t.signature()}'
                                 + (' (produced by an operator)' if t.trace is not None else ''))
        missing = [t for t in found_inputs if all(t is not i for i in self.inputs)]
        if missing:
            raise ValueError(f'the graph reads {len(missing)} symbolic tensor(s) that are not among its inputs: '
                             f'{", ".join(m.signature() for m in missing)}; pass them in inputs=[...]')

    # ------------------------------------------------------------------ structure
    @property
    def constants(self) -> List[Tensor]:
        """The concrete tensors the nodes read (weights), in first-use order."""
        seen, found = set(), []
        for t in [i for node in self.nodes for i in node.inputs] + self.outputs:
            if not t.is_symbolic() and id(t) not in seen:
                seen.add(id(t))
                found.append(t)
        return found

    @property
    def device(self):
        for t in self.inputs + self.outputs + self.constants:
            return t.device
        raise ValueError('an empty graph has no device')

    def consumers(self) -> Dict[int, List[Operator]]:
        """id(tensor) → the nodes reading it (a node reading a tensor twice is listed twice)."""
        users: Dict[int, List[Operator]] = {}
        for node in self.nodes:
            for t in node.inputs:
                users.setdefault(id(t), []).append(node)
        return users

    # ------------------------------------------------------------------ running
    def __call__(self, *inputs: Tensor) -> Union[Tensor, List[Tensor]]:
        """Run node by node on concrete inputs (imperative; for debugging — ``build`` for speed)."""
        values = self._bind_inputs(inputs)
        # the symbols' values, from the graph's inputs: an operator's inputs may not show them by themselves
        # (a reshape of [batch * seq, 4] back into [batch, seq, 4])
        symbols = bind_symbols(self.inputs, inputs) if self.symbols() else None
        for node in self.nodes:
            outs = node.compute([values.get(id(t), t) for t in node.inputs], symbols)
            values.update({id(sym): out for sym, out in zip(node.outputs, outs)})
        results = [values.get(id(t), t) for t in self.outputs]
        return results[0] if len(results) == 1 else results

    def _bind_inputs(self, inputs: Sequence[Tensor]) -> Dict[int, Tensor]:
        if len(inputs) != len(self.inputs):
            raise ValueError(f'the graph takes {len(self.inputs)} input(s), got {len(inputs)}')
        for i, (sym, value) in enumerate(zip(self.inputs, inputs)):
            if not isinstance(value, Tensor) or value.is_symbolic():
                raise TypeError(f'input {i}: expected a concrete hidet.Tensor like {sym.signature()}, '
                                f'got {getattr(value, "signature", lambda: type(value).__name__)()}')
            if value.dtype != sym.dtype or value.device != sym.device:
                raise ValueError(f'input {i}: expected {sym.signature()}, got {value.signature()}')
        bind_symbols(self.inputs, inputs)  # every dimension agrees with the inputs' shapes (symbols bound once)
        return {id(sym): value for sym, value in zip(self.inputs, inputs)}

    def symbols(self) -> List[str]:
        """Names of the symbolic dimensions of the graph's inputs."""
        return symbols_of([d for t in self.inputs for d in t.shape])

    def build(self, space: int = 0, input_names: Optional[Sequence[str]] = None,
              output_names: Optional[Sequence[str]] = None, options: Optional[Options] = None):
        """Compile into a CompiledGraph: kernels built in parallel, intermediates planned in an arena.
        The names are those of the artifact's inputs and outputs (default x, x0, x1, ... and y, y0, ...).
        A graph with symbolic dimensions builds one set of kernels that runs at any values of them. ``options``
        (hidet.option.Options): how kernels build and where they are cached; without them, the current ones."""
        from hidet.graph.build import build_flow_graph  # (build.py reads FlowGraph: a circle at import time)

        return build_flow_graph(self, space, input_names, output_names, resolve_options(options))

    def cuda_graph(self):
        """Build, then capture into a CUDA graph (see CompiledGraph.cuda_graph)."""
        return self.build().cuda_graph()

    # ------------------------------------------------------------------ printing
    def __str__(self) -> str:
        namer = _TensorNamer()
        for i, t in enumerate(self.inputs):
            namer.names[id(t)] = f'x{i}' if len(self.inputs) > 1 else 'x'
        args = ', '.join(f'{namer(t)}: {_type_text(t)}' for t in self.inputs)
        lines = [f'Graph({args}) {{']
        for t in self.constants:
            lines.append(f'  {namer.new(t, "c")}: {_type_text(t)} = Constant()')
        for node in self.nodes:
            outs = ', '.join(f'{namer.new(t, "y")}: {_type_text(t)}' for t in node.outputs)
            attrs = ''.join(f', {k}={_attr_text(v)}' for k, v in node.attrs.items() if k not in _SHOWN_BY_NAME)
            lines.append(f'  {outs} = {display_name(node)}({", ".join(namer(t) for t in node.inputs)}{attrs})')
        lines.append(f'  return {", ".join(namer(t) for t in self.outputs)}')
        lines.append('}')
        return '\n'.join(lines)

    def __repr__(self) -> str:
        return f'FlowGraph({len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs)'


def trace_from(outputs: Union[Tensor, Sequence[Tensor]], inputs: Optional[Union[Tensor, Sequence[Tensor]]] = None
               ) -> FlowGraph:
    """The graph of operators producing ``outputs`` from the symbolic ``inputs`` (found when omitted)."""
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    if inputs is not None:
        inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for i, t in enumerate(outputs):
        if not isinstance(t, Tensor):
            raise TypeError(f'output {i}: expected a hidet.Tensor, got {type(t).__name__}')
    return FlowGraph(outputs, inputs)


def _topological_order(outputs: Iterable[Tensor]) -> List[Operator]:
    order: List[Operator] = []
    visited = set()
    for out in outputs:
        stack = [(out.trace[0], False)] if out.trace is not None else []
        while stack:
            op, expanded = stack.pop()
            if expanded:
                order.append(op)
                continue
            if id(op) in visited:
                continue
            visited.add(id(op))
            stack.append((op, True))
            for t in reversed(op.inputs):
                if t.trace is not None and id(t.trace[0]) not in visited:
                    stack.append((t.trace[0], False))
    return order


def _free_symbols(nodes: Sequence[Operator], outputs: Sequence[Tensor]) -> List[Tensor]:
    seen, found = set(), []
    for t in [i for node in nodes for i in node.inputs] + list(outputs):
        if t.is_symbolic() and t.trace is None and id(t) not in seen:
            seen.add(id(t))
            found.append(t)
    return found


_SHOWN_BY_NAME = ('op', 'fused')  # attributes the display name already says


def _type_text(t: Tensor) -> str:
    return f'{t.dtype.name}{list(t.shape)}[{t.device.kind}]'


def _attr_text(v) -> str:
    return repr(v) if not isinstance(v, float) else f'{v:g}'


class _TensorNamer:
    def __init__(self):
        self.names: Dict[int, str] = {}
        self.counts: Dict[str, int] = {}

    def new(self, t: Tensor, prefix: str) -> str:
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        self.names[id(t)] = f'{prefix}{self.counts[prefix]}'
        return self.names[id(t)]

    def __call__(self, t: Tensor) -> str:
        return self.names.get(id(t), '?')
