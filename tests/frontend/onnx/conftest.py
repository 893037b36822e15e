import os
import sys

import pytest

pytest.importorskip('onnx')
pytest.importorskip('onnxruntime')
sys.path.insert(0, os.path.dirname(__file__))  # node_runner and utils
