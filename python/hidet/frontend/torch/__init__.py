"""The PyTorch frontend: ``torch.compile(model, backend='hidet')``.

- ``registry.py``: Registry, register_function / register_method / register_module, HidetModule
- ``register_functions.py``, ``register_nn_functions.py``, ``register_methods.py``,
  ``register_modules.py``: the conversions of torch functions, tensor methods and nn.Module leaves;
  ``register_inplace.py``: index_put, fill_ / zero_ and the in-place twins of the others
- ``interpreter.py``: runs an fx graph on hidet tensors through the conversions
- ``dynamo_backend.py``: the backend itself; ``dynamo_config.py``: its options
- ``export.py``: ``compile_to_file``, a model to an artifact for serving without Python
- ``correctness.py`` (the per-node error report), ``fallback.py`` (eager fallback for unsupported ops)

Guide: docs/torch-frontend.md.
"""
from hidet.frontend.torch.registry import (
    HidetModule, Registry, default_registry, register_function, register_method, register_module, target_name,
)
from hidet.frontend.torch import (  # noqa: F401  (filling the registry)
    register_functions, register_linalg_functions, register_math_functions, register_methods, register_modules,
    register_nn_functions,
)
from hidet.frontend.torch import register_inplace  # noqa: F401  (last: twins of the conversions above)
from hidet.frontend.torch.dynamo_config import CompileOptions, DynamoConfig, dynamo_config
from hidet.frontend.torch.interpreter import Interpreter, UnsupportedOperatorsError
from hidet.frontend.torch.dynamo_backend import CompiledFx, hidet_backend
from hidet.frontend.torch.export import compile_to_file
from hidet.frontend.torch.dynamic_shapes import dynamic_tracing

__all__ = [
    'HidetModule', 'Registry', 'default_registry', 'register_function', 'register_method', 'register_module',
    'target_name', 'CompileOptions', 'DynamoConfig', 'dynamo_config', 'Interpreter', 'UnsupportedOperatorsError',
    'CompiledFx', 'hidet_backend', 'compile_to_file', 'dynamic_tracing',
]
