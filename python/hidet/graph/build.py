"""FlowGraph → CompiledGraph: build every node's kernel (in parallel), plan intermediates in one
arena, gather the weights, and write the artifact (docs/artifact.md) that the C++ executor runs.
A graph with symbolic dimensions is written in format version 2: shapes name the symbols, kernel
instructions list the symbols they take, and the executor plans the arena per set of values."""
from __future__ import annotations

import json
from typing import Dict, List, Optional, Sequence, Tuple

from hidet.backend.compiler import cuda_arch
from hidet.drivers.build_task import build_tasks
from hidet.graph.flow_graph import FlowGraph, display_name
from hidet.graph.tensor import Tensor, _copy_stored_bytes
from hidet.ir.dtypes import data_type
from hidet.ir.expr import dim_postfix
from hidet.option import Options, search_level
from hidet.runtime import artifact
from hidet.runtime.compiled_graph import CompiledGraph
from hidet.version import __version__

ARENA_ALIGN = 256


class MemoryPlanner:
    """Offsets in one arena for tensors with known lifetimes [first, last] (instruction indices):
    first fit over the free ranges, so tensors whose lifetimes do not overlap share memory."""

    def __init__(self):
        self.free: List[Tuple[int, int]] = []  # (offset, size), sorted, coalesced
        self.end = 0

    def allocate(self, nbytes: int) -> int:
        size = max(ARENA_ALIGN, (nbytes + ARENA_ALIGN - 1) // ARENA_ALIGN * ARENA_ALIGN)
        for i, (offset, free_size) in enumerate(self.free):
            if free_size >= size:
                self.free[i:i + 1] = [(offset + size, free_size - size)] if free_size > size else []
                return offset
        if self.free and self.free[-1][0] + self.free[-1][1] == self.end:  # grow the trailing free range
            offset = self.free.pop()[0]
        else:
            offset = self.end
        self.end = offset + size
        return offset

    def release(self, offset: int, nbytes: int) -> None:
        size = max(ARENA_ALIGN, (nbytes + ARENA_ALIGN - 1) // ARENA_ALIGN * ARENA_ALIGN)
        self.free.append((offset, size))
        self.free.sort()
        merged: List[Tuple[int, int]] = []
        for off, sz in self.free:
            if merged and merged[-1][0] + merged[-1][1] == off:
                merged[-1] = (merged[-1][0], merged[-1][1] + sz)
            else:
                merged.append((off, sz))
        self.free = merged


def build_flow_graph(graph: FlowGraph, space: int, input_names: Optional[Sequence[str]],
                     output_names: Optional[Sequence[str]], options: Options) -> CompiledGraph:
    space = search_level(space)
    devices = {str(t.device) for t in graph.inputs + graph.outputs + graph.constants}
    if len(devices) > 1:
        raise ValueError(f'a graph runs on one device; this one uses {sorted(devices)}')
    if not devices:
        raise ValueError('cannot build an empty graph')
    device = (graph.inputs + graph.outputs + graph.constants)[0].device
    target = 'cuda' if device.is_cuda() else 'cpu'

    symbols = graph.symbols()  # names of the symbolic dimensions: their values come with each run
    tensors: List[dict] = []
    index: Dict[int, int] = {}

    def add(t: Tensor, storage: str) -> int:
        tensors.append({'dtype': t.dtype.name, 'shape': [dim_postfix(d) for d in t.shape], 'storage': storage})
        index[id(t)] = len(tensors) - 1
        return index[id(t)]

    input_names = _names(input_names, 'x', len(graph.inputs), 'input')
    output_names = _names(output_names, 'y', len(graph.outputs), 'output')
    inputs = [{'name': input_names[i], 'tensor': add(t, 'input')} for i, t in enumerate(graph.inputs)]

    # Weights: each constant once, at 64-byte aligned offsets of weights.bin (its parts: artifact.write copies them
    # into place once)
    weight_parts: list = []
    weights_nbytes = 0
    for t in graph.constants:
        tid = add(t, 'weight')
        tensors[tid]['offset'] = weights_nbytes
        stored = _StoredBytes(t)
        pad = -stored.nbytes % artifact.ALIGN
        weight_parts += [stored, bytes(pad)] if pad else [stored]
        weights_nbytes += stored.nbytes + pad

    # Node outputs: the graph's outputs (first occurrence) go straight to the caller's buffers.
    output_ids = {}
    for t in graph.outputs:
        if t.trace is not None and id(t) not in output_ids:
            output_ids[id(t)] = True
    for node in graph.nodes:
        for t in node.outputs:
            add(t, 'output' if id(t) in output_ids else 'arena')

    # Kernels: one library per distinct task, built in parallel.
    # nodes with a (statically) empty output never run; symbolic ones are skipped by the executor when empty
    runnable = [node for node in graph.nodes if all(0 not in t.shape for t in node.outputs)]
    task_index: Dict[str, int] = {}
    jobs = []
    for node in runnable:
        key = node.task.key()
        if key not in task_index:
            task_index[key] = len(jobs)
            jobs.append((node, (node.task, target)))
    modules = build_tasks([job for _, job in jobs], space, options)
    kernels = [{'library': f'kernels/{i}.so', 'function': 'launch', 'name': display_name(node)}
               for i, (node, _) in enumerate(jobs)]

    instructions = [{'kernel': task_index[node.task.key()], 'inputs': [index[id(t)] for t in node.inputs],
                     'outputs': [index[id(t)] for t in node.outputs]} for node in runnable]
    for inst, node in zip(instructions, runnable):
        if node.task.symbols():  # the kernel's dims: its symbols' values, in the order of their names
            inst['dims'] = [symbols.index(name) for name in node.task.symbols()]

    outputs = []
    for i, t in enumerate(graph.outputs):
        tid = index[id(t)]
        if tensors[tid]['storage'] != 'output' or any(o['tensor'] == tid for o in outputs):
            # an input, a weight or a repeated output: copied into its own output buffer
            copy = len(tensors)
            tensors.append({'dtype': t.dtype.name, 'shape': [dim_postfix(d) for d in t.shape],
                            'storage': 'output'})
            instructions.append({'copy': tid, 'to': copy})
            tid = copy
        outputs.append({'name': output_names[i], 'tensor': tid})

    # a symbolic graph's arena is planned by the executor for each set of symbol values
    arena_nbytes = _plan_arena(tensors, instructions) if not symbols else 0
    manifest = {
        'format_version': artifact.SYMBOLIC_FORMAT_VERSION if symbols else artifact.FORMAT_VERSION,
        'hidet_version': __version__,
        'target': target,
        'arch': cuda_arch(options) if target == 'cuda' else 'x86-64',
        'inputs': inputs,
        'outputs': outputs,
        'tensors': tensors,
        'kernels': kernels,
        'instructions': instructions,
        'arena_nbytes': arena_nbytes,
        'weights_nbytes': weights_nbytes,
        'search_space': space,
    }
    if symbols:
        manifest['symbols'] = symbols
    entries = [('manifest.json', json.dumps(manifest, indent=1).encode()), ('weights.bin', weight_parts)]
    for kernel, module in zip(kernels, modules):
        with open(module.path, 'rb') as f:
            entries.append((kernel['library'], f.read()))
    # (the runtime takes the bytes straight from here: no entry hashes, which a large model's weights took a
    # second each to compute and again to check; CompiledGraph.save adds them)
    return CompiledGraph(artifact.write(entries, hashes=False), hashed=False)


class _StoredBytes:
    """A constant's stored bytes as a part of artifact.write: copied from the tensor's storage (host or device)
    straight into the artifact's buffer, with no array between."""

    def __init__(self, tensor: Tensor):
        self.tensor, self.nbytes = tensor, tensor.nbytes

    def copy_to(self, address: int) -> None:
        _copy_stored_bytes(self.tensor, address)


def _plan_arena(tensors: List[dict], instructions: List[dict]) -> int:
    """Give every arena tensor an offset; returns the arena's size (its peak use)."""
    first: Dict[int, int] = {}
    last: Dict[int, int] = {}
    for step, inst in enumerate(instructions):
        reads = inst['inputs'] if 'kernel' in inst else [inst['copy']]
        writes = inst['outputs'] if 'kernel' in inst else [inst['to']]
        for tid in writes:
            first.setdefault(tid, step)
            last[tid] = max(last.get(tid, step), step)
        for tid in reads:
            last[tid] = step
    planner = MemoryPlanner()
    frees: Dict[int, List[int]] = {}
    for tid, spec in enumerate(tensors):
        if spec['storage'] == 'arena' and tid not in first:
            spec['offset'] = 0  # written by no instruction (an empty tensor): never touched
    for step in range(len(instructions)):
        for tid in sorted(t for t, s in first.items() if s == step and tensors[t]['storage'] == 'arena'):
            tensors[tid]['offset'] = planner.allocate(_nbytes(tensors[tid]))
            frees.setdefault(last[tid], []).append(tid)
        for tid in frees.pop(step, []):
            planner.release(tensors[tid]['offset'], _nbytes(tensors[tid]))
    return planner.end


def _nbytes(spec: dict) -> int:
    n = data_type(spec['dtype']).nbytes
    for s in spec['shape']:
        n *= s
    return n


def _names(names: Optional[Sequence[str]], prefix: str, count: int, what: str) -> List[str]:
    """The artifact's names of the graph's inputs or outputs: given, else x / x0, x1, ... (y for outputs)."""
    if names is None:
        return [f'{prefix}{i}' if count > 1 else prefix for i in range(count)]
    names = [str(n) for n in names]
    if len(names) != count or len(set(names)) != count or not all(names):
        raise ValueError(f'{what}_names: expected {count} distinct non-empty names, got {names}')
    return names
