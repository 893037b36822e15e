"""``hidet.onnx.from_onnx``: the ONNX frontend (hidet.frontend.onnx) under a short name."""
from hidet.frontend.onnx import (OnnxConversionError, OnnxModule, OnnxUnsupportedError,  # noqa: F401
                                       from_onnx)
