"""Helpers for the ONNX frontend tests: export torch modules, run onnxruntime, compare."""
from __future__ import annotations

import io
import warnings

import numpy as np


def export(model, args, opset: int = 17, input_names=None, output_names=None, dynamic_axes=None):
    """``model`` exported by torch's TorchScript-based ONNX exporter, as an onnx.ModelProto."""
    import onnx
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter('ignore')
        torch.onnx.export(model.eval(), tuple(args), buf, dynamo=False, opset_version=opset,
                          input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes)
    return onnx.load_from_string(buf.getvalue())


def run_ort(model, feeds: dict) -> list:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=['CPUExecutionProvider'])
    return sess.run(None, feeds)


def assert_close(got, want, rtol=1e-4, atol=1e-4):
    got = got.numpy() if hasattr(got, 'numpy') and not isinstance(got, np.ndarray) else got
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)
