"""OnnxModule: an ONNX graph run through hidet operators.

Called on symbolic tensors (``hidet.symbol``) it records a trace for ``hidet.trace_from``; called on
concrete tensors it runs operator by operator. Nodes whose inputs are all known at import time
(initializers, Constant, Shape of a tensor whose shape is fixed, and everything computed from those
alone, such as the Shape → Gather → Concat chains in front of a Reshape) are evaluated at once with
onnx's reference implementation, so shapes reach the operators as Python ints.
"""
from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from hidet.graph.creation import asarray
from hidet.graph.flow_graph import FlowGraph, symbol, trace_from
from hidet.frontend.onnx.registry import check_model, domain_opsets, lookup, node_attrs
from hidet.frontend.onnx.utils import ImportState, NodeContext, OnnxConversionError, hidet_dtype, onnx_dtype_name
from hidet.graph.tensor import Tensor
from hidet.ir.dtypes import data_type
from hidet.runtime.device import device as _device

_FOLD_LIMIT = 1 << 24  # elements: constant nodes with larger inputs are left to hidet's kernels


class OnnxInput:
    """A graph input: its name, dtype and dims (ints; a str or None where the model leaves a dim symbolic)."""

    def __init__(self, name: str, dtype, dims: List[Union[int, str, None]]):
        self.name, self.dtype, self.dims = name, dtype, dims

    def __repr__(self) -> str:
        return f'OnnxInput({self.name!r}, {self.dtype.name}, {self.dims})'


class OnnxModule:
    """A converted ONNX model. ``module(*tensors)`` (positional, in ``input_names`` order, or by name)
    returns the outputs (one tensor, or a list); ``module.flow_graph()`` traces the whole model."""

    def __init__(self, model, input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                 constant_inputs: Optional[Mapping[str, np.ndarray]] = None):
        from onnx import numpy_helper

        check_model(model)
        self.model = model
        self.opset = domain_opsets(model)['']
        graph = model.graph
        self.initializers: Dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.constant_inputs: Dict[str, np.ndarray] = {k: np.asarray(v) for k, v in (constant_inputs or {}).items()}
        self.inputs: List[OnnxInput] = []
        for v in graph.input:
            if v.name in self.initializers or v.name in self.constant_inputs:
                continue
            tt = v.type.tensor_type
            dims = [d.dim_value if d.HasField('dim_value') else (d.dim_param or None) for d in tt.shape.dim] \
                if tt.HasField('shape') else None
            self.inputs.append(OnnxInput(v.name, hidet_dtype(tt.elem_type), dims))
        unknown = set(self.constant_inputs) - {v.name for v in graph.input}
        if unknown:
            raise ValueError(f'constant_inputs names {sorted(unknown)}, which are not inputs of the model '
                             f'(its inputs: {[v.name for v in graph.input]})')
        self.input_shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
        unknown = set(self.input_shapes) - set(self.input_names)
        if unknown:
            raise ValueError(f'input_shapes names {sorted(unknown)}, which are not inputs of the model '
                             f'(its inputs: {self.input_names})')
        self.output_names = [v.name for v in graph.output]

    @property
    def input_names(self) -> List[str]:
        return [i.name for i in self.inputs]

    # ------------------------------------------------------------------ graph
    def input_shape(self, name: str, input_shapes: Optional[Mapping[str, Sequence[int]]] = None) -> List[int]:
        """The concrete shape of input ``name``: from ``input_shapes``, else the model (all dims fixed)."""
        shapes = dict(self.input_shapes, **{k: list(v) for k, v in (input_shapes or {}).items()})
        spec = next(i for i in self.inputs if i.name == name)
        if name in shapes:
            return [int(d) for d in shapes[name]]
        if spec.dims is None:
            raise ValueError(f"ONNX input '{name}' has no shape in the model; give it with "
                             f"input_shapes={{'{name}': [...]}}")
        for d, dim in enumerate(spec.dims):
            if not isinstance(dim, int) or dim <= 0:
                label = f" ('{dim}')" if isinstance(dim, str) else ''
                raise ValueError(
                    f"ONNX input '{name}' has a symbolic dimension {d}{label} (shape {spec.dims}); dynamic shapes "
                    f"are not supported yet: give a concrete shape with input_shapes={{'{name}': [...]}}")
        return list(spec.dims)

    def symbolic_inputs(self, device='cpu', input_shapes=None) -> List[Tensor]:
        return [symbol(self.input_shape(i.name, input_shapes), i.dtype, device) for i in self.inputs]

    def flow_graph(self, device='cpu', input_shapes: Optional[Mapping[str, Sequence[int]]] = None) -> FlowGraph:
        """The model as a FlowGraph whose inputs are symbols of the model's input shapes and dtypes."""
        inputs = self.symbolic_inputs(device, input_shapes)
        outputs = self(*inputs)
        outputs = [outputs] if isinstance(outputs, Tensor) else outputs
        return trace_from(outputs, inputs)

    # ------------------------------------------------------------------ running
    def __call__(self, *args: Tensor, **kwargs: Tensor) -> Union[Tensor, List[Tensor]]:
        values = self._bind(args, kwargs)
        outputs = self.run(values)
        return outputs[0] if len(outputs) == 1 else outputs

    def _bind(self, args, kwargs) -> Dict[str, Tensor]:
        if len(args) > len(self.inputs):
            raise TypeError(f'the model takes {len(self.inputs)} input(s) ({self.input_names}), got {len(args)}')
        values = dict(zip(self.input_names, args))
        for k, v in kwargs.items():
            if k not in self.input_names:
                raise TypeError(f'the model has no input {k!r} (its inputs: {self.input_names})')
            if k in values:
                raise TypeError(f'input {k!r} given twice')
            values[k] = v
        missing = [n for n in self.input_names if n not in values]
        if missing:
            raise TypeError(f'missing model input(s): {missing}')
        for spec in self.inputs:
            v = values[spec.name]
            if not isinstance(v, Tensor):
                if type(v).__module__.startswith('torch') or isinstance(v, np.ndarray):
                    values[spec.name] = v = asarray(v)
                else:
                    raise TypeError(f"input '{spec.name}': expected a hidet.Tensor, got {type(v).__name__}")
            if v.dtype != spec.dtype:
                raise TypeError(f"input '{spec.name}': the model expects {spec.dtype.name}, got {v.dtype.name}")
            if spec.dims is not None:
                bad = len(spec.dims) != v.ndim or any(isinstance(d, int) and d > 0 and d != s
                                                      for d, s in zip(spec.dims, v.shape))
                if bad:
                    raise ValueError(f"input '{spec.name}': the model expects shape {spec.dims}, got {list(v.shape)}")
        devices = {str(v.device) for v in values.values()}
        if len(devices) > 1:
            raise ValueError(f'the inputs are on different devices: {sorted(devices)}')
        return values

    def run(self, inputs: Dict[str, Tensor]) -> List[Tensor]:
        """Run the graph on ``inputs`` (name → tensor); returns the graph outputs as tensors."""
        device = next(iter(inputs.values())).device if inputs else _device('cpu')
        state = ImportState(device)
        env: Dict[str, object] = dict(self.initializers)
        env.update(self.constant_inputs)
        env.update(inputs)
        for i, node in enumerate(self.model.graph.node):
            outs = self._run_node(node, i, [env[n] if n else None for n in node.input], state)
            for name, value in zip(node.output, outs):
                if name:
                    env[name] = value
        results = []
        for name in self.output_names:
            v = env[name]
            results.append(state.tensor(v) if isinstance(v, np.ndarray) else v)
        return results

    def _run_node(self, node, index: int, ins: list, state: ImportState) -> list:
        spec = lookup(node.op_type, self.opset)
        attrs, _ = node_attrs(spec, node)
        foldable = ins and all(v is None or isinstance(v, np.ndarray) for v in ins) and any(v is not None for v in ins)
        if foldable and sum(v.size for v in ins if v is not None) <= _FOLD_LIMIT:
            folded = _fold(node, ins, self.opset)
            if folded is not None:
                return folded
        ctx = NodeContext(node, attrs, self.opset, state)
        try:
            outs = spec.convert(ctx, *ins)
        except (OnnxConversionError, ValueError, TypeError, IndexError, NotImplementedError) as e:
            where = f"ONNX node {node.name!r} ({node.op_type}, opset {self.opset})" if node.name else \
                f'ONNX node #{index} ({node.op_type}, opset {self.opset})'
            shapes = ', '.join(f'{n}: {_describe(v)}' for n, v in zip(node.input, ins) if n)
            raise OnnxConversionError(f'{where} with inputs ({shapes}): {e}') from e
        return list(outs) if isinstance(outs, (list, tuple)) else [outs]


def _describe(v) -> str:
    if v is None:
        return 'absent'
    if isinstance(v, np.ndarray):
        return f'constant {v.dtype}{list(v.shape)}'
    return f'{v.dtype.name}{list(v.shape)}'


def _fold(node, ins, opset: int) -> Optional[list]:
    """Evaluate a node on constants with onnx's reference implementation (None: it cannot)."""
    from onnx.reference import ReferenceEvaluator

    feeds = {}
    for name, v in zip(node.input, ins):
        if name:
            feeds[name] = v
    try:
        evaluator = ReferenceEvaluator(node, opsets={'': opset})
        outs = evaluator.run(None, feeds)
    except Exception:  # noqa: BLE001 - fall back to hidet's kernels
        return None
    result = []
    for o in outs:
        arr = np.asarray(o)
        try:
            data_type(arr.dtype)
        except (ValueError, TypeError):
            return None
        result.append(arr)
    return result


def from_onnx(model,
              input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
              constant_inputs: Optional[Mapping[str, np.ndarray]] = None) -> OnnxModule:
    """An OnnxModule for an ONNX model (a ModelProto, a path to a .onnx file, or its bytes).

    ``input_shapes`` gives concrete shapes to inputs whose dims the model leaves symbolic (dynamic shapes
    are a later feature); ``constant_inputs`` binds graph inputs to values fixed at import time.
    Raises OnnxUnsupportedError, listing every unsupported operator/attribute, before anything runs."""
    # (a circle at import time: the package hidet.frontend.onnx imports this module)
    from hidet.frontend.onnx import _import_onnx, load_converters

    onnx = _import_onnx()
    load_converters()
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model))
    elif isinstance(model, (bytes, bytearray)):
        model = onnx.load_from_string(bytes(model))
    elif not isinstance(model, onnx.ModelProto):
        raise TypeError(f'from_onnx expects an onnx.ModelProto, a path or bytes, got {type(model).__name__}')
    return OnnxModule(model, input_shapes, constant_inputs)


__all__ = ['OnnxModule', 'OnnxInput', 'from_onnx', 'onnx_dtype_name']
