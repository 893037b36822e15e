"""``dynamo_config.fallback_to_eager()``: split an fx graph at its unsupported nodes. The supported
regions become submodules compiled by hidet (on their first call, with the tensors they receive);
the unsupported nodes stay in the parent graph, which torch runs eagerly."""
from __future__ import annotations

import warnings
from typing import Optional, Sequence, Set

import torch
import torch.fx

from hidet.frontend.torch.dynamo_config import CompileOptions
from hidet.frontend.torch.interpreter import node_target_name
from hidet.frontend.torch.registry import Registry
from hidet.option import Options, resolve as resolve_options

_CALLS = ('call_function', 'call_method', 'call_module')


class _HidetRegion(torch.nn.Module):
    """A supported region: compiled by hidet per input signature on its first calls."""

    def __init__(self, gm: torch.fx.GraphModule, constants: Sequence[bool], config: CompileOptions,
                 registry: Optional[Registry], options: Options):
        super().__init__()
        # (a circle at import time: dynamo_backend imports this module)
        from hidet.frontend.torch.dynamo_backend import CompiledFx

        self.gm = gm
        self.compiled = CompiledFx(gm, constants, config, registry, options)

    def forward(self, *args):
        return self.compiled(*args)


def split_unsupported(gm: torch.fx.GraphModule, constants: Sequence[bool], unsupported: Set[str],
                      config: CompileOptions, registry: Optional[Registry] = None, options: Optional[Options] = None
                      ) -> torch.fx.GraphModule:
    """``gm`` with its supported regions compiled by hidet (with ``options``, hidet.option; without them, the
    current ones) and the ``unsupported`` nodes left to eager PyTorch."""
    options = resolve_options(options)
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    class Supported(OperatorSupportBase):
        def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
            return node.op in _CALLS and node.name not in unsupported

    eager = sorted({node_target_name(gm, n) for n in gm.graph.nodes if n.name in unsupported})
    warnings.warn(f'hidet: running {len(unsupported)} unsupported node(s) in eager PyTorch '
                  f'({", ".join(eager)}); the rest is compiled by hidet', stacklevel=2)
    state = {n.name for n, c in zip([n for n in gm.graph.nodes if n.op == 'placeholder'], constants) if c}
    partitioner = CapabilityBasedPartitioner(gm, Supported(), allows_single_node_partition=True)
    fused = partitioner.fuse_partitions(partitioner.propose_partitions())
    for node in list(fused.graph.nodes):
        if node.op != 'call_module' or not str(node.target).startswith('fused_'):
            continue
        sub = fused.get_submodule(node.target)
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        flags = [isinstance(a, torch.fx.Node) and (a.op == 'get_attr' or a.name in state) for a in node.args]
        setattr(fused, node.target, _HidetRegion(sub, flags, config, registry, options))
    fused.recompile()
    return fused
