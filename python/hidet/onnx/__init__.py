"""``hidet.onnx.from_onnx``: the ONNX frontend (hidet.graph.frontend.onnx) under a short name."""
from hidet.graph.frontend.onnx import (OnnxConversionError, OnnxModule, OnnxUnsupportedError,  # noqa: F401
                                       from_onnx)
