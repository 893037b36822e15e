"""``hidet.torch``: the public face of the PyTorch frontend (hidet/frontend/torch/).

    import torch, hidet.torch
    hidet.torch.dynamo_config.search_space(2)
    model = torch.compile(model, backend='hidet')   # 'hidet' works without importing hidet first too

    @hidet.torch.register_function(torch.nn.functional.relu)
    def relu(x, inplace=False): return hidet.ops.relu(x)

    hidet.torch.compile_to_file(model, [x], 'model.hidet')   # an artifact for the C++ runtime
"""
from hidet.frontend.torch import (  # noqa: F401
    CompiledFx, CompileOptions, DynamoConfig, HidetModule, Interpreter, Registry, UnsupportedOperatorsError,
    compile_to_file, default_registry, dynamic_tracing, dynamo_config, hidet_backend, register_function,
    register_method, register_module, target_name,
)

__all__ = [
    'CompiledFx', 'CompileOptions', 'DynamoConfig', 'HidetModule', 'Interpreter', 'Registry',
    'UnsupportedOperatorsError', 'compile_to_file', 'default_registry', 'dynamic_tracing', 'dynamo_config',
    'hidet_backend',
    'register_function', 'register_method', 'register_module', 'target_name',
]
