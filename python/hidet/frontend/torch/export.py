"""From a torch model to an artifact on disk in one call, for serving without Python:

    compiled = hidet.torch.compile_to_file(model, [x], 'model.hidet', search_space=0)
    # later, anywhere: hidet.load_compiled_graph('model.hidet'), or the C++ runtime (examples/cpp)

The model is captured by dynamo as one whole graph (as ``torch.compile(fullgraph=True)`` would) and
converted exactly as ``backend='hidet'`` converts it: parameters and buffers become the artifact's
weights, so weight transforms happen once, here. The artifact runs on the device and with the shapes
and dtypes of ``example_inputs``.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Sequence

import torch

import hidet.option
from hidet.frontend.torch.dynamo_backend import CompiledFx, _Out, constant_placeholders
from hidet.frontend.torch.dynamo_config import dynamo_config
from hidet.frontend.torch.interpreter import map_structure
from hidet.frontend.torch.registry import Registry


def compile_to_file(model, example_inputs: Sequence[torch.Tensor], path: str, *, search_space: int = 0,
                    options: Optional[Dict[str, Any]] = None, save_example: bool = True,
                    registry: Optional[Registry] = None):
    """Compile ``model`` (an ``nn.Module`` or a function of tensors) for ``example_inputs`` into the
    artifact ``path`` and return its ``CompiledGraph`` (the same bytes, already loaded by the runtime).

    - ``search_space``: hidet's tuning level (0, 1 or 2); ``options``: any other hidet option of
      ``torch.compile(..., options=...)`` (e.g. ``{'use_fp16': True}``).
    - The artifact's inputs are the example inputs the model reads, in order, named after the model's
      arguments; its outputs are the tensors of the model's output structure, flattened in order.
    - ``save_example``: also write ``<path>.example/`` with ``input_<i>.bin`` (the example inputs) and
      ``output_<i>.bin`` (the model's eager outputs on them), raw contiguous bytes of each tensor's
      dtype, which ``examples/cpp``'s runner checks the artifact against.
    """
    example_inputs = list(example_inputs)
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        raise TypeError('compile_to_file: example_inputs must be torch tensors, got '
                        f'{[type(x).__name__ for x in example_inputs]}')
    values = dict(options or {})
    values['search_space'] = search_space
    config = dynamo_config.resolve(None, values)
    build_options = hidet.option.current()  # (the API edge: hidet's own options, read once)

    gm, args = _capture(model, example_inputs)
    if any(type(a).__name__ == 'FakeTensor' for a in args):
        raise RuntimeError('compile_to_file: dynamo handed over fake tensors; call it outside torch.compile / '
                           'FakeTensorMode, on real example inputs')
    constants = constant_placeholders(gm, args)
    compiled_fx = CompiledFx(gm, constants, config, registry, build_options)
    unsupported = compiled_fx.check(args)
    if unsupported:
        raise compiled_fx.unsupported_error(args, unsupported)
    flow_graph, out_spec, num_outputs, write_back = compiled_fx.optimized_graph(args)
    if write_back:
        names = [n.name for n in gm.graph.nodes if n.op == 'placeholder']
        raise ValueError(f'compile_to_file: the model updates its input(s) {[names[p] for p, _ in write_back]} in '
                         'place; an artifact has outputs only and cannot write back into its caller\'s tensors: '
                         'return the updated tensor instead')
    if flow_graph is None:
        raise ValueError('compile_to_file: the model returns no tensor computed from its inputs; nothing to compile')
    leaves: List[Any] = []
    map_structure(out_spec, leaves.append)
    fixed = [leaf for leaf in leaves if not isinstance(leaf, _Out)]
    if fixed:
        raise ValueError(f'compile_to_file: the model returns values that are not tensors of the graph ({fixed!r}); '
                         'an artifact has tensor outputs only: return tensors')

    placeholders = [n for n in gm.graph.nodes if n.op == 'placeholder']
    input_names = _unique([_argument_name(n.name) for n, c, a in zip(placeholders, constants, args)
                           if not c and isinstance(a, torch.Tensor)])
    output_names = [f'output_{i}' for i in range(num_outputs)]
    compiled = flow_graph.build(space=config.search_space, input_names=input_names, output_names=output_names,
                                options=build_options)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    compiled.save(path)
    if save_example:
        _save_example(path, gm, args, constants, num_outputs, out_spec)
    return compiled


def _capture(model, example_inputs: List[torch.Tensor]):
    """The one fx graph dynamo makes of ``model(*example_inputs)``, with its example inputs."""
    captured = []

    def backend(gm: torch.fx.GraphModule, args):
        captured.append((gm, list(args)))
        return gm.forward

    import torch._dynamo

    with torch.no_grad():
        try:
            torch.compile(model, backend=backend, fullgraph=True, dynamic=False)(*example_inputs)
        except torch._dynamo.exc.Unsupported as e:
            raise RuntimeError(f'compile_to_file: dynamo cannot capture the model as one graph: {e}. An artifact '
                               'holds one whole graph: remove the graph break (data-dependent Python control '
                               'flow, print, .item(), ...) from the forward pass') from e
    if len(captured) != 1:
        raise RuntimeError(f'compile_to_file: dynamo produced {len(captured)} graphs; expected one')
    return captured[0]


def _argument_name(placeholder: str) -> str:
    """dynamo's placeholder name of an argument (``l_x_``, ``L_input_ids_``) → ``x``, ``input_ids``."""
    name = re.sub(r'^[lL]_', '', placeholder)
    name = re.sub(r'_$', '', name)
    return name or placeholder


def _unique(names: List[str]) -> List[str]:
    seen: Dict[str, int] = {}
    result = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        result.append(n if k == 0 else f'{n}_{k}')
    return result


def _save_example(path: str, gm: torch.fx.GraphModule, args: List[Any], constants: List[bool], num_outputs: int,
                  out_spec) -> None:
    """The artifact's inputs (the non-constant tensor arguments of the captured graph, in its order) and
    the captured graph's eager outputs on them, as raw files."""
    directory = path + '.example'
    os.makedirs(directory, exist_ok=True)
    with torch.no_grad():
        eager = gm(*args)
    outputs: List[Optional[torch.Tensor]] = [None] * num_outputs
    spec_leaves: List[Any] = []
    map_structure(out_spec, spec_leaves.append)
    eager_leaves: List[Any] = []
    map_structure(eager, eager_leaves.append)
    for leaf, value in zip(spec_leaves, eager_leaves):
        outputs[leaf.index] = value
    inputs = [a for c, a in zip(constants, args) if not c and isinstance(a, torch.Tensor)]
    for i, t in enumerate(inputs):
        _write_tensor(os.path.join(directory, f'input_{i}.bin'), t)
    for i, t in enumerate(outputs):
        _write_tensor(os.path.join(directory, f'output_{i}.bin'), t)


def _write_tensor(file: str, t: torch.Tensor) -> None:
    t = t.detach().contiguous().cpu()
    with open(file, 'wb') as f:
        f.write(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b'')
