"""The ONNX frontend: ``from_onnx(model_or_path)`` → an OnnxModule whose call on symbolic tensors
traces a FlowGraph (see docs/onnx.md). ``onnx`` is imported only when a model is converted."""
from __future__ import annotations

import importlib

from hidet.frontend.onnx import module, registry
from hidet.frontend.onnx.module import from_onnx as _from_onnx
from hidet.frontend.onnx.utils import OnnxConversionError

_FAMILIES = ('ops_math', 'ops_nn', 'ops_reduce', 'ops_shape', 'ops_index', 'ops_image', 'ops_attention',
             'ops_quant')


def _import_onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError('the ONNX frontend needs the onnx package: pip install onnx  '
                          "(or pip install 'hidet[onnx]', which adds onnxruntime for the tests)") from None
    return onnx


def load_converters() -> None:
    """Import every operator family, filling the registry."""
    for family in _FAMILIES:
        importlib.import_module(f'{__name__}.{family}')


def from_onnx(model, input_shapes=None, constant_inputs=None):
    return _from_onnx(model, input_shapes, constant_inputs)


from_onnx.__doc__ = """An OnnxModule for an ONNX model (a ModelProto, a path to a .onnx file, or its bytes);
see hidet.frontend.onnx.module.from_onnx."""


def __getattr__(name):
    if name in ('OnnxModule', 'OnnxInput'):
        return getattr(module, name)
    if name in ('OnnxUnsupportedError', 'supported_ops_markdown', 'registered'):
        return getattr(registry, name)
    if name == 'OnnxConversionError':
        return OnnxConversionError
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = ['from_onnx', 'OnnxModule', 'OnnxUnsupportedError', 'OnnxConversionError']
