"""CompiledGraph: a built graph run by the C++ executor, one call from Python per run
(DESIGN.md contract 3). A graph with symbolic dimensions runs at any values of them: each run reads
them from its inputs' shapes. It is an artifact (docs/artifact.md) loaded by the runtime; ``save``
writes the same bytes to disk and ``load_compiled_graph`` reads them back."""
from __future__ import annotations

import json
import math
import os
import threading
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence, Tuple, Union

from hidet import _C
from hidet.ir.dtypes import DataType, data_type
from hidet.runtime import artifact
from hidet.runtime.compiled_module import _default_stream
from hidet.runtime.cuda import current_device, current_stream
from hidet.runtime.device import Device


class TensorSignature:
    """Name, dtype and shape of a compiled graph's input or output. A symbolic dimension is its
    manifest entry: a symbol's name, or a postfix expression of symbols (hidet.ir.expr.dim_postfix)."""

    def __init__(self, name: str, dtype: DataType, shape: tuple):
        self.name, self.dtype, self.shape = name, dtype, shape

    def shape_at(self, values: Dict[str, int]) -> Tuple[int, ...]:
        return tuple(artifact.eval_dim(d, values) for d in self.shape)

    def __repr__(self) -> str:
        return f'{self.name}: {self.dtype.name}[{", ".join(_dim_text(d) for d in self.shape)}]'


def _dim_text(entry) -> str:
    return artifact.fold_dim(entry, str, lambda op, a, b: f'({a} {op} {b})')


_CUDA_KIND = 2  # DLPack's kDLCUDA, as _C.Graph.device gives it


def _dim_entry(text: str):
    """A dimension from the loader's postfix text (hidet_graph_dim_expr: '16', 'batch', 'batch 8 *') as
    the manifest writes it: an int, a symbol's name, or a tuple of postfix tokens."""
    tokens = tuple(int(t) if t.lstrip('-').isdigit() else t for t in text.split())
    return tokens[0] if len(tokens) == 1 else tokens


def _signature(info) -> TensorSignature:
    name, dtype, _, _, exprs = info
    return TensorSignature(name, data_type(dtype), tuple(_dim_entry(e) for e in exprs))


class CompiledGraph:
    """A loaded artifact. Everything it knows of the artifact comes from the C++ loader, which validated
    the container and the manifest (docs/artifact.md) before returning: a damaged file is one
    HidetRuntimeError naming the file, the entry and the field, never a KeyError from a raw manifest.
    ``data``: the artifact's bytes (bytes-like: artifact.write gives a bytearray, a file's read gives bytes);
    ``sha256`` (64 hex digits) pins the bytes' digest (docs/runtime.md, "Trust"). ``hashed`` False: bytes this
    process has just built with ``artifact.write(..., hashes=False)`` (a bytearray): loaded without their entry
    hashes, which ``save`` fills in before they reach a file."""

    def __init__(self, data, source: str = '<memory>', sha256: Optional[str] = None, hashed: bool = True):
        # device_id matters only for CUDA artifacts; the loader ignores it for CPU ones.
        device_id = current_device()
        self._graph = _C.Graph.load_bytes(data, device_id, str(source), sha256, hashed)
        self._data = data
        self._hashed = hashed
        self._source = str(source)
        info = self._graph.description
        self.format_version: int = info['format_version']
        self.target: str = info['target']
        self.arch: str = info['arch']
        self._info = info
        self._manifest = None  # parsed on first use of .manifest
        self.symbols: List[str] = list(self._graph.symbols)
        kind, index = self._graph.device
        self.device = _device_of(self.target, index if kind == _CUDA_KIND else 0)
        self.inputs: List[TensorSignature] = [_signature(e) for e in self._graph.inputs]
        self.outputs: List[TensorSignature] = [_signature(e) for e in self._graph.outputs]
        self._torch_signatures = None  # see _torch_static

    @property
    def manifest(self) -> dict:
        """manifest.json as a dict, for inspection (the loader validated it; nothing here reads it to run)."""
        if self._manifest is None:
            self._manifest = json.loads(self._info['manifest_json'])
        return self._manifest

    # ------------------------------------------------------------------ running
    def __call__(self, *inputs):
        """Run on hidet or torch tensors (all of one kind); returns fresh tensors of the same kind:
        one tensor, or a list when the graph has several outputs."""
        outputs = self.run(inputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def run(self, inputs: Sequence, stream: Optional[int] = None) -> list:
        in_addrs, is_torch, values = self._check_inputs(inputs)
        outputs = self._new_outputs(is_torch, values)
        out_addrs = [t.data_ptr() for t in outputs]
        self._graph.run(in_addrs, out_addrs, self._stream(inputs, stream), [values[n] for n in self.symbols])
        return outputs

    def cuda_graph(self, max_shapes: int = 16) -> Union['CudaGraph', 'CudaGraphs']:
        """The graph captured into a CUDA graph: ``run(inputs)`` replays it (inputs copied into the
        graph's static buffers, outputs copied out into fresh tensors, so later replays never
        overwrite results already returned). A graph with symbolic dimensions gives CudaGraphs: one CUDA
        graph per shape, captured on the first run at that shape, the ``max_shapes`` most recently used kept
        (each holds buffers of its shape)."""
        if self.target != 'cuda':
            raise RuntimeError('cuda_graph() needs a graph built for CUDA; this one was built for the CPU')
        if self.symbols:
            return CudaGraphs(self, max_shapes)
        return CudaGraph(self, self._graph.cuda_graph())

    def _torch_static(self):
        """For a graph without symbols run on torch tensors (every torch.compile call): each input's and
        output's (torch.Size, torch dtype), computed once, so a call checks its inputs with a few comparisons
        (the general path of _check_inputs reads the symbols' values and evaluates every dimension; it also
        words the errors)."""
        if self._torch_signatures is None:
            import torch

            def signatures(sigs):
                return [(torch.Size(sig.shape), getattr(torch, sig.dtype.name)) for sig in sigs]

            self._torch_signatures = (signatures(self.inputs), signatures(self.outputs))
        return self._torch_signatures

    def _check_inputs(self, inputs: Sequence) -> Tuple[List[int], bool, Dict[str, int]]:
        """(data addresses, whether the inputs are torch tensors, the symbols' values read from the shapes)."""
        if not self.symbols and len(inputs) == len(self.inputs) and inputs:
            import torch

            cuda = self.target == 'cuda'
            addrs = []
            for t, (shape, dtype) in zip(inputs, self._torch_static()[0]):
                if not (isinstance(t, torch.Tensor) and t.shape == shape and t.dtype is dtype
                        and (t.is_cuda if cuda else t.is_cpu) and t.is_contiguous()):
                    break
                addrs.append(t.data_ptr())
            else:
                return addrs, True, {}
        if len(inputs) != len(self.inputs):
            raise ValueError(f'the compiled graph takes {len(self.inputs)} input(s) '
                             f'({", ".join(map(repr, self.inputs))}), got {len(inputs)}')
        kinds = {type(t).__module__.split('.')[0] for t in inputs}
        is_torch = 'torch' in kinds
        if len(kinds) > 1:
            raise TypeError('pass either hidet or torch tensors, not a mix')
        addrs, found = [], []
        for i, (sig, t) in enumerate(zip(self.inputs, inputs)):
            if is_torch:
                shape, dtype, dev = tuple(t.shape), _torch_dtype_name(t.dtype), t.device.type
                if dev != self.device.kind:  # before data_ptr(): a meta tensor's is 0, a "null pointer" below
                    what = (' (a meta tensor has a shape and a dtype but no data)' if dev == 'meta' else '')
                    raise ValueError(f'input {i} ({sig.name}) is on the {dev} device{what}; the compiled graph '
                                     f'runs on {self.device.kind}: move the input there first')
                if not t.is_contiguous():
                    raise ValueError(f'input {i} ({sig.name}) is not contiguous; call .contiguous() first')
            else:
                if not hasattr(t, 'is_symbolic') or t.is_symbolic():
                    raise TypeError(f'input {i} ({sig.name}): expected a concrete tensor, got {t!r:.80}')
                shape, dtype, dev = tuple(t.shape), t.dtype.name, t.device.kind
            found.append((shape, dtype, dev))
            addrs.append(t.data_ptr())
        values: Dict[str, int] = {}
        for (shape, _, _), sig in zip(found, self.inputs):  # a symbol's value: an input dimension that is it
            if len(shape) == len(sig.shape):
                for d, entry in zip(shape, sig.shape):
                    if isinstance(entry, str):
                        values.setdefault(entry, d)
        missing = [n for n in self.symbols if n not in values]
        if missing:
            raise ValueError(f'symbols {missing} are no input dimension by themselves: the inputs do not give their values')
        for i, ((shape, dtype, dev), sig) in enumerate(zip(found, self.inputs)):
            want = sig.shape_at(values) if len(shape) == len(sig.shape) else None
            if shape != want or dtype != sig.dtype.name or dev != self.device.kind:
                at = f' (at {", ".join(f"{k}={v}" for k, v in values.items())})' if self.symbols else ''
                raise ValueError(f'input {i} ({sig.name}): expected {sig.dtype.name}'
                                 f'{list(want) if want is not None else list(map(_dim_text, sig.shape))}{at} on '
                                 f'{self.device.kind}, got {dtype}{list(shape)} on {dev}')
        return addrs, is_torch, values

    def _new_outputs(self, is_torch: bool, values: Dict[str, int]) -> list:
        if is_torch:
            import torch

            return [torch.empty(shape, dtype=dtype, device=self._torch_device())
                    for shape, dtype in self._torch_output_shapes(values)]
        from hidet.graph.tensor import _empty

        return [_empty(list(sig.shape_at(values)), sig.dtype, self.device) for sig in self.outputs]

    def _torch_device(self) -> str:
        return 'cpu' if self.target == 'cpu' else f'cuda:{self.device.id}'

    def _torch_output_shapes(self, values: Dict[str, int]) -> list:
        import torch

        return ([(sig.shape_at(values), getattr(torch, sig.dtype.name)) for sig in self.outputs]
                if self.symbols else self._torch_static()[1])

    def _stream(self, inputs: Sequence, stream: Optional[int]) -> int:
        if stream is not None:
            return int(getattr(stream, 'handle', stream))
        if self.target == 'cpu':
            return 0
        return _default_stream(inputs) if inputs else _current_hidet_stream()

    # ------------------------------------------------------------------ files
    def save(self, path: str) -> None:
        """Write the artifact to ``path`` (atomically: a reader never sees a half-written file)."""
        path = os.fspath(path)
        tmp = f'{path}.tmp{os.getpid()}'
        with open(tmp, 'wb') as f:
            f.write(self.artifact_bytes())
        os.replace(tmp, path)

    def artifact_bytes(self):
        """The artifact's bytes (bytes-like), as ``save`` writes them: a graph built in this process gets its entry
        hashes on the first call (it was loaded without them)."""
        if not self._hashed:
            artifact.add_hashes(self._data)
            self._hashed = True
        return self._data

    @property
    def num_kernels(self) -> int:
        return self._info['num_kernels']

    @property
    def arena_nbytes(self) -> int:
        """Bytes of the intermediate arena (the planned peak of intermediates; 0 for symbolic graphs, whose
        arena is planned per shape)."""
        return self._info['arena_nbytes']

    @property
    def weights_nbytes(self) -> int:
        return self._info['weights_nbytes']

    def __repr__(self) -> str:
        return (f'CompiledGraph({self.target}, inputs={self.inputs}, outputs={self.outputs}, '
                f'kernels={self.num_kernels}, arena={self.arena_nbytes} bytes, weights={self.weights_nbytes} bytes)')


class CudaGraph:
    """A CompiledGraph captured into a CUDA graph (CompiledGraph.cuda_graph())."""

    def __init__(self, graph: CompiledGraph, handle):
        self.graph = graph
        self._handle = handle
        self._layout = handle.output_layout(len(graph.outputs))
        self._lock = threading.Lock()  # a replay is a launch and its copies out (_replay)

    def run(self, inputs: Sequence, stream: Optional[int] = None) -> list:
        in_addrs, is_torch, values = self.graph._check_inputs(inputs)
        return _replay(self._handle, self._layout, self._lock, self.graph, in_addrs, is_torch, values,
                       self.graph._stream(inputs, stream))

    def __call__(self, *inputs):
        outputs = self.run(inputs)
        return outputs[0] if len(outputs) == 1 else outputs


def _replay(handle, layout, lock: threading.Lock, graph: CompiledGraph, in_addrs: List[int], is_torch: bool,
            values: Dict[str, int], stream: int) -> list:
    """One replay of a captured CUDA graph: launched first, so that the outputs are allocated while the GPU
    runs (GPT-2's 25 outputs cost about 200 µs of torch.empty on the host), then copied out; several torch
    outputs are views of one allocation laid out as the graph's static outputs (``layout``), copied in one."""
    with lock:
        handle.launch(in_addrs, stream)
        if is_torch and len(graph.outputs) > 1:
            block, outputs = _torch_outputs_in_one_block(graph, values, layout)
            handle.copy_outputs_block(block.data_ptr(), stream)
        else:
            outputs = graph._new_outputs(is_torch, values)
            handle.copy_outputs([t.data_ptr() for t in outputs], stream)
    return outputs


def _torch_outputs_in_one_block(graph: CompiledGraph, values: Dict[str, int], layout: Tuple[List[int], int]):
    """(one allocation, the outputs as views of it at a CUDA graph's output_layout offsets). One torch call per
    output (``as_strided`` of the block seen as its dtype), not three (slice, dtype view, shape view): 17 outputs
    took 150 µs of the host's time per call that way, 34 this way (the 2-core CPU machine)."""
    import torch

    offsets, nbytes = layout
    # (rounded up to 16 bytes: the block is viewed as each output's dtype, and torch views a byte tensor as a
    # wider dtype only when its length is a multiple of the dtype's size; the copy writes the first nbytes)
    block = torch.empty(-(-nbytes // 16) * 16, dtype=torch.uint8, device=graph._torch_device())
    typed = {}  # dtype -> the block viewed as it
    outputs = []
    for (shape, dtype), o in zip(graph._torch_output_shapes(values), offsets):
        as_dtype = typed.get(dtype)
        if as_dtype is None:
            as_dtype = typed[dtype] = block.view(dtype)
        strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        outputs.append(as_dtype.as_strided(shape, strides, o // dtype.itemsize))
    return block, outputs


class CudaGraphs:
    """CUDA graphs of a graph with symbolic dimensions (CompiledGraph.cuda_graph()): one per shape (set of
    symbol values), captured when a run first meets it; at most ``max_shapes`` are kept, the least recently
    used dropped (its buffers freed) when another is captured."""

    def __init__(self, graph: CompiledGraph, max_shapes: int = 16):
        if max_shapes < 1:
            raise ValueError(f'max_shapes must be at least 1, got {max_shapes}')
        self.graph = graph
        self.max_shapes = max_shapes
        self._graphs: 'OrderedDict[Tuple[int, ...], object]' = OrderedDict()
        self.captures = 0  # CUDA graphs captured so far (a shape dropped and met again counts again)
        self._lock = threading.Lock()  # (_replay)

    @property
    def shapes(self) -> List[Dict[str, int]]:
        """The symbol values of the kept CUDA graphs, least recently used first."""
        return [dict(zip(self.graph.symbols, key)) for key in self._graphs]

    def run(self, inputs: Sequence, stream: Optional[int] = None) -> list:
        in_addrs, is_torch, values = self.graph._check_inputs(inputs)
        key = tuple(values[name] for name in self.graph.symbols)
        entry = self._graphs.get(key)
        if entry is None:
            handle = self.graph._graph.cuda_graph(list(key))
            entry = (handle, handle.output_layout(len(self.graph.outputs)))
            self.captures += 1
            self._graphs[key] = entry
            while len(self._graphs) > self.max_shapes:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        handle, layout = entry
        return _replay(handle, layout, self._lock, self.graph, in_addrs, is_torch, values,
                       self.graph._stream(inputs, stream))

    def __call__(self, *inputs):
        outputs = self.run(inputs)
        return outputs[0] if len(outputs) == 1 else outputs


def load_compiled_graph(path: str, sha256: Optional[str] = None) -> CompiledGraph:
    """Load an artifact written by CompiledGraph.save. ``sha256``: load it only if the file's SHA-256 is
    this (64 hex digits, e.g. from ``sha256sum``): digest pinning, docs/runtime.md "Trust". The digest is
    computed by the C++ runtime on the same bytes it then loads."""
    path = os.fspath(path)
    with open(path, 'rb') as f:
        return CompiledGraph(f.read(), source=path, sha256=sha256)


def _device_of(target: str, device_id: int):
    return Device('cpu') if target == 'cpu' else Device('cuda', device_id)


def _torch_dtype_name(dtype) -> str:
    return str(dtype).replace('torch.', '')


def _current_hidet_stream() -> int:
    return current_stream().handle
