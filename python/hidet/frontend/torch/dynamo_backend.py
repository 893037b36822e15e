"""The torch.compile backend: ``torch.compile(model, backend='hidet')``.

dynamo hands over an fx GraphModule and example inputs; ``hidet_backend`` returns a callable that
runs the graph on torch tensors. For each distinct input signature (shapes, dtypes, scalar values)
it interprets the fx graph on symbolic hidet tensors, traces a FlowGraph, optimizes and builds it
(parameters and buffers become the graph's constants, so weight transforms happen once), and then
runs the CompiledGraph (or its CUDA graph) with the torch inputs: one call into the C++ executor.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import logging
import operator
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx

import hidet
from hidet.frontend.torch.correctness import correctness_report
from hidet.frontend.torch.dynamic_shapes import dims_text, placeholder_dims
from hidet.frontend.torch.dynamo_config import CompileOptions, dynamo_config
from hidet.frontend.torch.fallback import split_unsupported
from hidet.frontend.torch.interpreter import Interpreter, map_structure, node_target_name
from hidet.frontend.torch.registry import Registry
from hidet.graph.tensor import Tensor
from hidet.option import Options
from hidet.utils import logs

_GRAPH_IDS = itertools.count()


def hidet_backend(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any], *, mode: Optional[str] = None,
                  options: Optional[Dict[str, Any]] = None, registry: Optional[Registry] = None):
    """The dynamo backend (entry point ``hidet`` of the ``torch_dynamo_backends`` group)."""
    import hidet.frontend.torch  # noqa: F401  (registers the conversions)

    config = dynamo_config.resolve(mode, options)
    build_options = hidet.option.current()  # (this is the API edge: hidet's own options are read here, once)
    if config.print_input_graph:
        print_fx_graph(graph_module)
    constants = constant_placeholders(graph_module, example_inputs)
    compiled = CompiledFx(graph_module, constants, config, registry, build_options)
    if _has_fake_tensors(example_inputs):  # no data to compile with: compiled on the first call
        return compiled
    unsupported = compiled.check(example_inputs)
    if unsupported:
        if not config.fallback_to_eager:
            raise compiled.unsupported_error(example_inputs, unsupported)
        return split_unsupported(graph_module, constants, {n.name for n in unsupported}, config, registry,
                                 build_options)
    if config.correctness_report:
        correctness_report(graph_module, example_inputs, constants, registry, print_table=True)
    compiled.prepare(example_inputs)
    return compiled


# ---------------------------------------------------------------- parameters passed as graph inputs
_MODULE_SOURCES = ('NNModule', 'ParamBuffer')


def constant_placeholders(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> List[bool]:
    """For each placeholder, whether it is model state (a parameter, buffer or module attribute that
    dynamo lifted into a graph input) rather than a real input: from dynamo's GraphArg source (reached
    through a module, or a global), else from the example being an nn.Parameter, else from the name."""
    flags = []
    placeholders = [n for n in gm.graph.nodes if n.op == 'placeholder']
    for i, node in enumerate(placeholders):
        example = example_inputs[i] if i < len(example_inputs) else None
        flags.append(isinstance(example, torch.Tensor) and _is_state(node, example))
    return flags


def _is_state(node: torch.fx.Node, example: torch.Tensor) -> bool:
    grapharg = node.meta.get('grapharg')
    source = getattr(grapharg, 'source', None)
    if source is not None:
        chain = []
        while source is not None:
            chain.append(source)
            source = getattr(source, 'base', None)
        if any(any(key in type(s).__name__ for key in _MODULE_SOURCES) for s in chain):
            return True
        if any(getattr(s, 'member', None) in ('_parameters', '_buffers') for s in chain):
            return True
        root = type(chain[-1]).__name__
        return 'Global' in root or 'Constant' in root
    if isinstance(example, torch.nn.Parameter):
        return True
    name = str(node.target)
    return '_parameters_' in name or '_buffers_' in name


def _has_fake_tensors(example_inputs: Sequence[Any]) -> bool:
    return any(type(x).__name__ == 'FakeTensor' for x in example_inputs)


# ---------------------------------------------------------------- the compiled callable
class _Out:
    """A leaf of an output structure: the CompiledGraph's output ``index``."""

    def __init__(self, index: int):
        self.index = index


class _Compiled:
    """One input signature's build: which outputs come from the CompiledGraph and which are fixed; and, fixed
    by the signature too, the graph's device and which inputs move to it (so a call need not look again)."""

    def __init__(self, runner, out_spec, num_graph_outputs: int, flow_graph=None, compiled_graph=None,
                 write_back: Sequence[Tuple[int, int]] = ()):
        self.runner = runner              # callable(list of torch tensors) → list of torch tensors
        self.out_spec = out_spec          # the output structure, graph outputs as _Out leaves
        self.num_graph_outputs = num_graph_outputs
        self.flow_graph = flow_graph
        self.compiled_graph = compiled_graph
        self.device: Optional[torch.device] = None
        self.moves: List[Optional[bool]] = []  # per real input: None (not a tensor), moves to the device or not
        self.state = _State(())  # the model-state tensors (parameters, buffers) it was built from, baked in
        # (position in the call's arguments, graph output): inputs the graph updates in place, copied back after a run
        self.write_back = list(write_back)
        self.outputs = _structure_builder(out_spec)  # callable(graph outputs) → the output structure


def _structure_builder(spec) -> Callable[[list], Any]:
    """A callable building ``spec`` (an output structure with _Out leaves) from the graph's outputs: the walk of
    map_structure done once, at build time, not at every call."""
    if isinstance(spec, _Out):
        return operator.itemgetter(spec.index)
    if isinstance(spec, torch.Size) or not isinstance(spec, (list, tuple, dict)):
        return lambda outs: spec  # (a fixed leaf; containers are built anew at each call, as map_structure does)
    if isinstance(spec, dict):
        parts = [(k, _structure_builder(v)) for k, v in spec.items()]
        kind = type(spec)
        return lambda outs: kind((k, part(outs)) for k, part in parts)
    parts = [_structure_builder(v) for v in spec]
    if spec and all(isinstance(v, _Out) for v in spec):  # (the common case: a flat tuple or list of outputs)
        getter = operator.itemgetter(*[v.index for v in spec])
        items = (lambda outs: list(getter(outs))) if len(spec) > 1 else (lambda outs: [getter(outs)])
    else:
        items = lambda outs: [part(outs) for part in parts]  # noqa: E731
    if isinstance(spec, list):
        return items
    if hasattr(spec, '_fields'):  # namedtuple
        kind = type(spec)
        return lambda outs: kind(*items(outs))
    kind = type(spec)

    def build(outs):
        values = items(outs)
        try:
            return kind(values)
        except TypeError:  # (as map_structure: a tuple type that takes no sequence)
            return tuple(values)

    return build


MAX_STATE_BUILDS = 4  # builds of one input signature for different model state (instances of one model), at most


class CompiledFx:
    """The callable handed back to dynamo: ``compiled(*args)`` takes the placeholders' values (model
    state included) and returns the fx graph's output structure of torch tensors."""

    def __init__(self, gm: torch.fx.GraphModule, constants: Sequence[bool], config: CompileOptions,
                 registry: Optional[Registry] = None, options: Optional[Options] = None):
        self.gm = gm
        self.constants = list(constants)
        # the placeholders that are real inputs (not model state): what each call looks at, of a few hundred
        # arguments when dynamo lifts the parameters into the graph's inputs
        self._input_positions = [i for i, c in enumerate(self.constants) if not c]
        # the model-state placeholders: their values are baked into a build as constants, so a build serves the
        # tensors it was made from alone (dynamo hands the same graph another instance of the model: another
        # build, never the first one's weights); checked at each call (_State.holds)
        self._state_of = _picker([i for i, c in enumerate(self.constants) if c])
        self.config = config
        self.options = hidet.option.resolve(options)  # how its kernels build (hidet.option), read once
        self.registry = registry
        self._cache: Dict[Tuple, List[_Compiled]] = {}  # input signature → its builds, one per set of model state
        self.graph_id = next(_GRAPH_IDS)
        # dynamo's symbolic sizes (dynamic=True, mark_dynamic, automatic dynamic): one graph for all of them
        self.symbolic = placeholder_dims(gm, self.constants)
        self._check_reasons: Dict[str, str] = {}  # of the last check: why conversions declined

    def interpreter(self, args: Sequence[Any] = ()) -> Interpreter:
        device = self._device(args)
        return Interpreter(self.gm, self.registry, _device_text(device) if device is not None else None)

    def _inputs(self, args: Sequence[Any]) -> List[Any]:
        """The values of the placeholders that are real inputs."""
        return [args[i] for i in self._input_positions if i < len(args)]

    def _device(self, args: Sequence[Any]) -> Optional[torch.device]:
        """The graph's device: that of its first CUDA input tensor, else of its first input tensor."""
        devices = [a.device for a in self._inputs(args) if isinstance(a, torch.Tensor)]
        return next((d for d in devices if d.type == 'cuda'), devices[0] if devices else None)

    @staticmethod
    def _joins(a: torch.Tensor, device: Optional[torch.device]) -> bool:
        """Whether input ``a`` moves to the graph's device: a CPU integer or bool tensor beside CUDA inputs is an
        index (torch indexes CUDA tensors with CPU indices, as in ``x[mask] = v``); a 0-d CPU tensor is a number
        (torch computes with it beside CUDA tensors; dynamo passes a Python number that changes between calls as
        one, and reads it with ``.item()``)."""
        return device is not None and device.type == 'cuda' and a.device.type == 'cpu' and (
            a.dim() == 0 or not (a.dtype.is_floating_point or a.dtype.is_complex))

    # ------------------------------------------------------------------ building
    def _bind(self, interp: Interpreter, args: Sequence[Any]):
        """Placeholder values: constants for model state, symbols for input tensors, Python values as they are."""
        values, symbols = [], []
        device = self._device(args)
        for is_const, dims, a in zip(self.constants, self.symbolic, args):
            if is_const:
                values.append(interp.to_constant(a))
            elif dims is not None and not isinstance(dims, tuple):  # a SymInt placeholder: its symbolic value
                values.append(dims)
            elif isinstance(a, torch.Tensor):
                shape = list(dims) if dims is not None else list(a.shape)
                s = hidet.symbol(shape, str(a.dtype).replace('torch.', ''),
                                 _device_text(device if self._joins(a, device) else a.device))
                values.append(s)
                symbols.append(s)
            else:
                values.append(_plain(a))
        return values, symbols

    def check(self, args: Sequence[Any]) -> List[torch.fx.Node]:
        """The nodes hidet cannot convert; ``unsupported_error`` then explains them."""
        interp = self.interpreter(args)
        values, _ = self._bind(interp, args)
        unsupported = interp.check(values)
        self._check_reasons = interp.reasons
        return unsupported

    def unsupported_error(self, args: Sequence[Any], nodes: Sequence[torch.fx.Node]):
        """The error listing ``nodes`` (from ``check``), with why each declining conversion declined."""
        return self.interpreter(args).unsupported_error(nodes, self._check_reasons)

    def prepare(self, args: Sequence[Any]) -> _Compiled:
        builds = self._cache.setdefault(self._key(args), [])
        state = self._state_of(args)
        for compiled in builds:
            if compiled.state.holds(state):
                return compiled
        compiled = self._build(args)
        compiled.device = self._device(args)
        compiled.moves = [self._joins(a, compiled.device) if isinstance(a, torch.Tensor) else None
                          for a in self._inputs(args)]
        compiled.state = _State(tuple(state))
        builds.insert(0, compiled)  # (the newest first: a model rebuilt for new weights is the one called next)
        del builds[MAX_STATE_BUILDS:]  # (instances made one after another in a loop: their builds, and the state
        # tensors they hold, do not pile up; an evicted instance called again is built again)
        return compiled

    def optimized_graph(self, args: Sequence[Any], times: Optional[logs.StageTimes] = None):
        """(optimized FlowGraph or None, output structure with _Out leaves, number of graph outputs, write-backs)
        of the fx graph on ``args``: interpreted on symbolic hidet tensors, traced and optimized, not built
        (``times``: the two stages timed). A write-back ``(position, output)``: graph input ``args[position]``,
        updated in place by the graph, takes the graph output ``output`` after each run."""
        def stage(name):
            return times.stage(name) if times is not None else contextlib.nullcontext()

        with stage('convert'):
            interp = self.interpreter(args)
            values, symbols = self._bind(interp, args)
            result = interp.run(values)
        graph_outputs: List[Tensor] = []
        index: Dict[int, int] = {}

        def spec(v):
            if isinstance(v, Tensor):
                if id(v) not in index:
                    index[id(v)] = len(graph_outputs)
                    graph_outputs.append(v)
                return _Out(index[id(v)])
            return v

        out_spec = map_structure(result, spec)
        write_back = [(position, spec(value).index) for position, value in interp.input_updates
                      if isinstance(value, Tensor) and value is not values[position]]
        if not graph_outputs:
            return None, out_spec, 0, []
        config = self.config
        flow_graph = hidet.trace_from(graph_outputs, symbols)
        dump = self._dump_dir()
        if dump:
            _write(dump, 'fx_graph.txt', fx_graph_table(self.gm) + '\n\n' + self.gm.code)
            _write(dump, 'flow_graph.txt', str(flow_graph))
            _write(dump, 'options.json', json.dumps(_jsonable(config.__dict__), indent=2))
        with hidet.graph.PassContext() as ctx:
            if config.use_fp16:
                ctx.set_precision('float16')
            if config.use_fp16_reduction:
                ctx.set_reduce_precision('float16')
            # TF32 where the user allows it: hidet's own knob, or torch's for its matmuls
            ctx.set_use_tensor_core(config.use_tensor_core or bool(torch.backends.cuda.matmul.allow_tf32))
            with stage('optimize'):
                optimized = hidet.graph.optimize(flow_graph, self.options)
        if dump:
            _write(dump, 'flow_graph_optimized.txt', str(optimized))
        return optimized, out_spec, len(graph_outputs), write_back

    def _build(self, args: Sequence[Any]) -> _Compiled:
        log = logs.logger('frontend')
        log.info('graph %d: %d fx nodes, inputs %s', self.graph_id, len(self.gm.graph.nodes),
                 [f'{tuple(a.shape)} {str(a.dtype).replace("torch.", "")}' if isinstance(a, torch.Tensor) else repr(a)
                  for is_const, a in zip(self.constants, args) if not is_const])
        if log.isEnabledFor(logging.DEBUG):
            log.debug('graph %d:\n%s', self.graph_id, self.gm.code)
        times = logs.StageTimes()
        optimized, out_spec, num_outputs, write_back = self.optimized_graph(args, times)
        if optimized is None:
            return _Compiled(lambda inputs: [], out_spec, 0)
        with times.stage('build'):
            compiled_graph = optimized.build(space=self.config.search_space, options=self.options)
        log.info('graph %d compiled in %s (%d kernels, search space %d)', self.graph_id, times.text(),
                 len(optimized.nodes), self.config.search_space)
        dump = self._dump_dir()
        if dump:
            compiled_graph.save(os.path.join(dump, 'graph.hidet'))
        runner = compiled_graph.run
        if self.config.use_cuda_graph and compiled_graph.target == 'cuda':
            runner = compiled_graph.cuda_graph().run
        return _Compiled(runner, out_spec, num_outputs, optimized, compiled_graph, write_back)

    def _dump_dir(self) -> Optional[str]:
        if not self.config.dump_graph_ir:
            return None
        path = os.path.join(self.config.dump_graph_ir, f'graph_{self.graph_id}_{len(self._builds())}')
        os.makedirs(path, exist_ok=True)
        return path

    def _key(self, args: Sequence[Any]) -> Tuple:
        key = []
        for i in self._input_positions:
            if i >= len(args):
                break
            dims, a = self.symbolic[i], args[i]
            if dims is not None and not isinstance(dims, tuple):
                key.append('symbolic')  # a SymInt placeholder: any value
            elif isinstance(a, torch.Tensor):
                shape = dims_text(dims) if dims is not None else tuple(a.shape)  # symbolic: any size
                key.append((shape, a.dtype, a.device))
            else:
                key.append(('value', repr(_plain(a))))
        return tuple(key)

    # ------------------------------------------------------------------ running
    def __call__(self, *args):
        builds = self._cache.get(self._key(args))
        compiled = builds[0] if builds and builds[0].state.holds(self._state_of(args)) else self.prepare(args)
        device = compiled.device
        inputs = [_contiguous(a.to(device) if move else a)
                  for a, move in zip(self._inputs(args), compiled.moves) if move is not None]
        outs = compiled.runner(inputs) if compiled.num_graph_outputs else []
        for position, out in compiled.write_back:  # (graph inputs updated in place: the caller's tensors)
            args[position].copy_(outs[out])
        return compiled.outputs(outs)

    def _builds(self) -> List[_Compiled]:
        return [c for builds in self._cache.values() for c in builds]

    @property
    def compiled_graphs(self) -> List[Any]:
        return [c.compiled_graph for c in self._builds() if c.compiled_graph is not None]

    @property
    def flow_graphs(self) -> List[Any]:
        return [c.flow_graph for c in self._builds() if c.flow_graph is not None]


class _State:
    """The model-state tensors a build baked in, and the check that a call's are the same (``holds``): the same
    objects (a C-level identity check, a few µs for hundreds of parameters); or, where dynamo passes a fresh
    tensor at each call, tensors over the same memory, shape and strides, and 0-d CPU tensors of the same value
    (dynamic=True passes a module's Python numbers, a layer norm's ``eps``, so: compared by value, ~0.2 µs each)."""

    def __init__(self, tensors: Tuple):
        self.tensors = tensors
        scalars = [i for i, t in enumerate(tensors) if _host_scalar(t)]
        others = [i for i in range(len(tensors)) if i not in scalars]
        self._scalars_of = _picker(scalars)
        self._others_of = _picker(others)
        self._values = [t.item() for t in self._scalars_of(tensors)]
        self._others = self._others_of(tensors)

    def holds(self, now: Tuple) -> bool:
        if len(now) != len(self.tensors):
            return False
        others = self._others_of(now)
        same = list(map(operator.is_, self._others, others))
        if not all(same) and not all(_aliases(self._others[i], others[i])
                                     for i in itertools.compress(range(len(same)), map(operator.not_, same))):
            return False
        scalars = self._scalars_of(now)
        if not all(_host_scalar(t) for t in scalars):
            return False
        values = [t.item() for t in scalars]
        return values == self._values or all(a == b or a != a and b != b for a, b in zip(values, self._values))


def _picker(positions: List[int]) -> Callable[[Tuple], Tuple]:
    """``positions`` of a tuple, as a tuple (operator.itemgetter, whatever their number)."""
    if not positions:
        return lambda t: ()
    if len(positions) == 1:
        return lambda t: (t[positions[0]],)
    return operator.itemgetter(*positions)


def _host_scalar(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() == 0 and t.device.type == 'cpu'


def _aliases(a, b) -> bool:
    """Tensors over the same memory, shape, strides, dtype and device."""
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and \
        a.device == b.device and a.shape == b.shape and a.data_ptr() == b.data_ptr() and a.stride() == b.stride()


def _plain(a):
    """SymInts/SymFloats (dynamic scalars: dynamo's example inputs for dimensions it made dynamic) as the
    Python numbers they hold now; each value gets its own compiled graph."""
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        hint = getattr(getattr(a, 'node', None), 'hint', None)  # (no guard, unlike int(a))
        if hint is not None:
            return hint
        return int(a) if isinstance(a, torch.SymInt) else float(a) if isinstance(a, torch.SymFloat) else bool(a)
    return a


def _contiguous(t: torch.Tensor) -> torch.Tensor:
    if t.requires_grad:
        t = t.detach()
    return t if t.is_contiguous() else t.contiguous()


def _device_text(device: torch.device) -> str:
    return 'cpu' if device.type != 'cuda' else f'cuda:{device.index if device.index is not None else 0}'


def _write(directory: str, name: str, text: str) -> None:
    with open(os.path.join(directory, name), 'w') as f:
        f.write(text)


def _jsonable(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v if isinstance(v, (bool, int, float, str, type(None))) else repr(v) for k, v in d.items()}


# ---------------------------------------------------------------- printing
def fx_graph_table(gm: torch.fx.GraphModule) -> str:
    from tabulate import tabulate

    rows = []
    for node in gm.graph.nodes:
        target = node_target_name(gm, node) if node.op.startswith('call_') else str(node.target)
        rows.append([node.op, node.name, target, _short(node.args), _short(node.kwargs)])
    return tabulate(rows, headers=['opcode', 'name', 'target', 'args', 'kwargs'])


def print_fx_graph(gm: torch.fx.GraphModule) -> None:
    print(fx_graph_table(gm))


def _short(value, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'
