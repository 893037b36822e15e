"""ONNX dtypes and the per-node context handed to converters."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import numpy as np

from hidet.graph.creation import asarray
from hidet.graph.tensor import Tensor
from hidet.ir.dtypes import DataType, data_type

# ONNX TensorProto.DataType → hidet dtype name (the others are not supported)
_ONNX_DTYPES = {1: 'float32', 2: 'uint8', 3: 'int8', 5: 'int16', 6: 'int32', 7: 'int64', 9: 'bool', 10: 'float16',
                11: 'float64', 16: 'bfloat16'}
_ONNX_NAMES = {0: 'UNDEFINED', 1: 'FLOAT', 2: 'UINT8', 3: 'INT8', 4: 'UINT16', 5: 'INT16', 6: 'INT32', 7: 'INT64',
               8: 'STRING', 9: 'BOOL', 10: 'FLOAT16', 11: 'DOUBLE', 12: 'UINT32', 13: 'UINT64', 14: 'COMPLEX64',
               15: 'COMPLEX128', 16: 'BFLOAT16', 17: 'FLOAT8E4M3FN', 18: 'FLOAT8E4M3FNUZ', 19: 'FLOAT8E5M2',
               20: 'FLOAT8E5M2FNUZ', 21: 'UINT4', 22: 'INT4', 23: 'FLOAT4E2M1'}

Value = Union[Tensor, np.ndarray, None]  # an ONNX value: a hidet tensor, or a constant known at import time


def onnx_dtype_name(elem_type: int) -> str:
    if elem_type in _ONNX_NAMES:
        return _ONNX_NAMES[elem_type]
    try:
        import onnx

        return onnx.TensorProto.DataType.Name(elem_type)
    except (ImportError, ValueError):
        return f'type {elem_type}'


def unsupported_dtype(elem_type: int) -> bool:
    return elem_type not in _ONNX_DTYPES


def hidet_dtype(elem_type: int) -> DataType:
    if elem_type not in _ONNX_DTYPES:
        raise NotImplementedError(f'ONNX dtype {onnx_dtype_name(elem_type)} is not supported by hidet')
    return data_type(_ONNX_DTYPES[elem_type])


def value_dtype(v: Value) -> DataType:
    return v.dtype if isinstance(v, Tensor) else data_type(v.dtype)


def value_shape(v: Value):
    return tuple(v.shape)


class OnnxConversionError(RuntimeError):
    """A node could not be converted (a shape it cannot handle, a value it needs at import time …)."""


class ImportState:
    """What one conversion run shares between nodes: the device, constants already made tensors."""

    def __init__(self, device):
        self.device = device
        self._constants: Dict[int, tuple] = {}  # id(ndarray) → (ndarray, Tensor)

    def tensor(self, v: Value) -> Tensor:
        if isinstance(v, Tensor):
            return v
        if v is None:
            raise OnnxConversionError('a required input is missing')
        hit = self._constants.get(id(v))
        if hit is None:
            arr = np.asarray(v)
            hit = (v, asarray(arr, dtype=data_type(arr.dtype), device=self.device))
            self._constants[id(v)] = hit
        return hit[1]


class NodeContext:
    """Passed to a converter: the node, its attributes (defaults filled in), the model's opset and
    helpers to get inputs as hidet tensors or as values known at import time."""

    def __init__(self, node, attrs: Dict[str, Any], opset: int, state: ImportState):
        self.node = node
        self.attrs = attrs
        self.opset = opset
        self.state = state

    @property
    def name(self) -> str:
        return self.node.name or self.node.op_type

    @property
    def device(self):
        return self.state.device

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def wants_output(self, i: int) -> bool:
        return i < len(self.node.output) and bool(self.node.output[i])

    def tensor(self, v: Value, dtype=None) -> Tensor:
        """``v`` as a hidet tensor (constants become tensors on the model's device, once)."""
        if isinstance(v, np.ndarray) and dtype is not None:
            v = v.astype(data_type(dtype).np_dtype)
        return self.state.tensor(v)

    def constant(self, values, dtype) -> Tensor:
        """A new constant tensor of ``dtype`` (bfloat16 included) on the model's device."""
        dtype = data_type(dtype)
        arr = np.asarray(values)
        if dtype.name == 'bfloat16':
            return asarray(arr.astype(np.float32), device=self.device).to(dtype)
        return asarray(arr.astype(dtype.np_dtype), device=self.device)

    def is_static(self, v: Value) -> bool:
        return v is None or isinstance(v, np.ndarray) or not v.is_symbolic()

    def static(self, v: Value, what: str) -> Optional[np.ndarray]:
        """The values of ``v``, which the converter needs at import time (a shape, axes, pads …)."""
        if v is None or isinstance(v, np.ndarray):
            return v
        if not v.is_symbolic():
            return v.to('float32').numpy() if v.dtype.name == 'bfloat16' else v.numpy()
        raise OnnxConversionError(
            f'{self.node.op_type} needs its {what} at import time, but it is computed from the graph inputs '
            'at run time (dynamic shapes are not supported yet); make it a constant, or bind the graph input '
            'it comes from with from_onnx(..., constant_inputs={name: value})')

    def static_ints(self, v: Value, what: str) -> Optional[List[int]]:
        arr = self.static(v, what)
        return None if arr is None else [int(i) for i in np.asarray(arr).reshape(-1)]

    def scalar(self, v: Value, what: str):
        """A one-element input as a Python scalar (``None`` when absent)."""
        arr = self.static(v, what)
        if arr is None:
            return None
        arr = np.asarray(arr)
        if arr.size != 1:
            raise OnnxConversionError(f'{self.node.op_type}: the {what} must have one element, got shape {arr.shape}')
        return arr.reshape(-1)[0].item()
