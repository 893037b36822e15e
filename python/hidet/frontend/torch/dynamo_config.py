"""``hidet.torch.dynamo_config``: the options of ``torch.compile(model, backend='hidet')``.

    from hidet.torch import dynamo_config
    dynamo_config.search_space(2).use_fp16(True)     # setters chain
    model = torch.compile(model, backend='hidet', mode='max-autotune', options={'use_cuda_graph': False})

Every compile resolves one frozen ``CompileOptions`` from, lowest precedence first: the defaults,
the ``torch.compile`` mode's defaults, what was set explicitly on ``dynamo_config``, and the
``options`` dict given to ``torch.compile``. Settings are read when a graph is compiled: change them
before the first call of the compiled model (or call ``torch._dynamo.reset()``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional

from hidet.option import search_level


@dataclass(frozen=True)
class CompileOptions:
    search_space: int = 0             # 0: default schedules; 1: tune a few; 2: tune the whole space
    use_tensor_core: bool = False     # TF32 tensor cores for float32 matmuls and convolutions
    use_fp16: bool = False            # run the float32 parts in float16 (inputs/outputs cast automatically)
    use_fp16_reduction: bool = False  # 16-bit reductions accumulate in 16 bits instead of float32
    use_cuda_graph: bool = True       # replay a CUDA graph (CUDA tensors only)
    print_input_graph: bool = False   # print the fx graph dynamo hands over, as a table
    correctness_report: bool = False  # compare each fx node with eager torch and print the errors
    dump_graph_ir: Optional[str] = None  # directory to write the fx graph and hidet graphs into
    fallback_to_eager: bool = False   # run unsupported operators in eager PyTorch instead of failing


OPTION_NAMES = tuple(f.name for f in dataclasses.fields(CompileOptions))

MODES: Dict[str, Dict[str, Any]] = {
    'default': {'search_space': 0},
    'reduce-overhead': {'use_cuda_graph': True},
    'max-autotune': {'search_space': 2, 'use_cuda_graph': True},
    'max-autotune-no-cudagraphs': {'search_space': 2, 'use_cuda_graph': False},
}


def _check(name: str, value):
    """The validated value of option ``name``."""
    if name == 'search_space':
        return search_level(value, 'search_space')
    if name == 'dump_graph_ir':
        if value is not None and not isinstance(value, (str, bytes)) and not hasattr(value, '__fspath__'):
            raise TypeError(f'dump_graph_ir takes a directory path (or None), got {value!r}')
        return None if value is None else str(value if not hasattr(value, '__fspath__') else value.__fspath__())
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise TypeError(f'{name} takes True or False, got {value!r}')
    return bool(value)


class DynamoConfig:
    """Live settings of the hidet backend (one instance: ``hidet.torch.dynamo_config``). Each setter
    returns the config, so calls chain; ``config['name']`` reads the effective value (without a mode)."""

    def __init__(self):
        self._explicit: Dict[str, Any] = {}

    def _set(self, name: str, value) -> 'DynamoConfig':
        self._explicit[name] = _check(name, value)
        return self

    def search_space(self, level: int = 2) -> 'DynamoConfig':
        """0: each operator's default schedule; 1: tune over a small space; 2: the whole space (slow to compile)."""
        return self._set('search_space', level)

    def use_tensor_core(self, flag: bool = True) -> 'DynamoConfig':
        return self._set('use_tensor_core', flag)

    def use_fp16(self, flag: bool = True) -> 'DynamoConfig':
        """Run float32 models in float16: inputs and weights are cast at the start, outputs cast back."""
        return self._set('use_fp16', flag)

    def use_fp16_reduction(self, flag: bool = True) -> 'DynamoConfig':
        """Accumulate 16-bit reductions (sums, matmuls) in 16 bits instead of float32."""
        return self._set('use_fp16_reduction', flag)

    def use_cuda_graph(self, flag: bool = True) -> 'DynamoConfig':
        """Replay compiled CUDA graphs as CUDA graphs (on by default; CPU graphs ignore it)."""
        return self._set('use_cuda_graph', flag)

    def print_input_graph(self, flag: bool = True) -> 'DynamoConfig':
        """Print each fx graph hidet receives as a table (opcode, name, target, args, kwargs)."""
        return self._set('print_input_graph', flag)

    def correctness_report(self, flag: bool = True) -> 'DynamoConfig':
        """Run each fx graph eagerly and through hidet node by node, and print every node's error."""
        return self._set('correctness_report', flag)

    def dump_graph_ir(self, directory: Optional[str] = None) -> 'DynamoConfig':
        """Write the fx graph and hidet's graphs (before and after optimization) under ``directory``."""
        return self._set('dump_graph_ir', directory)

    def fallback_to_eager(self, flag: bool = True) -> 'DynamoConfig':
        """Instead of failing on unsupported operators, compile the supported parts of the graph and
        run the rest in eager PyTorch."""
        return self._set('fallback_to_eager', flag)

    def reset(self) -> 'DynamoConfig':
        """Forget every explicit setting."""
        self._explicit.clear()
        return self

    def __getitem__(self, name: str):
        return getattr(self.resolve(), name)

    def explicit(self) -> Dict[str, Any]:
        return dict(self._explicit)

    def resolve(self, mode: Optional[str] = None, options: Optional[Dict[str, Any]] = None) -> CompileOptions:
        """The options of one compile: defaults < mode's defaults < explicit settings < ``options``."""
        if mode is None:
            mode = 'default'
        if mode not in MODES:
            raise ValueError(f'torch.compile mode {mode!r} is not known to hidet; choose from {", ".join(MODES)}')
        values: Dict[str, Any] = dict(MODES[mode])
        values.update(self._explicit)
        if options:
            unknown = sorted(k for k in options if k not in OPTION_NAMES)
            if unknown:
                raise ValueError(f'unknown hidet option(s) {", ".join(map(repr, unknown))} in torch.compile(options='
                                 f'...); hidet takes: {", ".join(OPTION_NAMES)}')
            values.update({k: _check(k, v) for k, v in options.items()})
        return CompileOptions(**values)

    def __repr__(self) -> str:
        return f'DynamoConfig({self.resolve()})'


dynamo_config = DynamoConfig()
