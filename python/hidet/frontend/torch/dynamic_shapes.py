"""Dynamo's symbolic sizes as hidet's symbolic dimensions.

With ``torch.compile(dynamic=True)``, ``torch._dynamo.mark_dynamic`` or dynamo's automatic dynamic shapes
(after a recompile for a new size), the fx graph's placeholders carry fake tensors whose sizes are SymInts
(``s0``, ``2*s1``) and the graph takes SymInt placeholders for the sizes it computes with. Each symbol
becomes a hidet symbol of the same name, so the graph traces into one symbolic FlowGraph, built once and
run at any size: the CompiledGraph binds the symbols from its input tensors' shapes.

A symbol must be the size of some input tensor dimension (a bare ``s0``) to be bound at run time; a
placeholder whose sizes use any other symbol is specialized to the value it has (and a new value compiles
again), as are sizes whose expressions hidet cannot write.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional, Sequence, Set

import torch
import torch.fx

from hidet.ir.expr import Expr, SymbolVar, simplify_dim, symbols_of


class NotTranslatable(Exception):
    pass


def sympy_to_dim(e) -> Any:
    """A sympy expression of dynamo's size symbols as an int or a hidet integer expression."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

    if isinstance(e, sympy.Integer) or isinstance(e, int):
        return int(e)
    if isinstance(e, sympy.Symbol):
        return SymbolVar(e.name)
    if isinstance(e, (sympy.Mul, sympy.Add)):
        parts = [sympy_to_dim(a) for a in e.args]
        value = parts[0]
        for p in parts[1:]:
            value = value * p if isinstance(e, sympy.Mul) else value + p
        return value
    if isinstance(e, sympy.Pow) and isinstance(e.exp, sympy.Integer) and int(e.exp) >= 1:
        base = sympy_to_dim(e.base)
        value = base
        for _ in range(int(e.exp) - 1):
            value = value * base
        return value
    if isinstance(e, FloorDiv):
        a, b = (sympy_to_dim(x) for x in e.args)
        return a // b  # sizes are non-negative: C division is floor division
    if isinstance(e, (Mod, PythonMod)):
        a, b = (sympy_to_dim(x) for x in e.args)
        return a % b
    raise NotTranslatable(f'size expression {e} ({type(e).__name__})')


def size_to_dim(s) -> Any:
    """An int or SymInt (from a fake tensor's shape, or a SymInt placeholder's example) as a hidet dimension."""
    if isinstance(s, torch.SymInt):
        expr, env = s.node.expr, getattr(s.node, 'shape_env', None)
        if env is not None:
            if hasattr(env, 'replace'):  # sizes dynamo has found equal are one symbol
                expr = env.replace(expr)
            fixed = {}  # symbols dynamo has pinned to one value (its range is a point): that value
            for sym in getattr(expr, 'free_symbols', ()):
                r = getattr(env, 'var_to_range', {}).get(sym)
                if r is not None and r.lower == r.upper and getattr(r.lower, 'is_integer', False):
                    fixed[sym] = int(r.lower)
            if fixed:
                expr = expr.subs(fixed)
        return simplify_dim(sympy_to_dim(expr))
    return int(s)


def placeholder_dims(gm: torch.fx.GraphModule, constants: Sequence[bool]) -> List[Optional[Any]]:
    """For each placeholder: its symbolic shape (a tuple of dims, for a tensor input with symbolic sizes), its
    symbolic value (an Expr, for a SymInt placeholder), or None (static, or specialized as explained above)."""
    placeholders = [n for n in gm.graph.nodes if n.op == 'placeholder']
    dims: List[Optional[Any]] = []
    for is_const, node in zip(constants, placeholders):
        example = node.meta.get('example_value', node.meta.get('val'))
        value = None
        try:
            if not is_const and isinstance(example, torch.Tensor):
                shape = tuple(size_to_dim(s) for s in example.shape)
                value = shape if any(isinstance(d, Expr) for d in shape) else None
            elif isinstance(example, torch.SymInt):
                v = size_to_dim(example)
                value = v if isinstance(v, Expr) else None
        except NotTranslatable:
            value = None
        dims.append(value)
    while True:  # symbols no input dimension carries cannot be bound at run time
        bound: Set[str] = {d.name for v in dims if isinstance(v, tuple) for d in v if isinstance(d, SymbolVar)}
        unbound = [i for i, v in enumerate(dims) if v is not None and
                   not set(symbols_of(list(v) if isinstance(v, tuple) else [v])) <= bound]
        if not unbound:
            return dims
        for i in unbound:
            dims[i] = None


def dims_text(dims: Sequence[Any]) -> str:
    return '[' + ', '.join(str(d) if isinstance(d, int) else repr(d) for d in dims) + ']'


@contextlib.contextmanager
def dynamic_tracing() -> Iterator[None]:
    """Where dynamo traces for ``torch.compile(model, backend='hidet', dynamic=True)``, so that one compile serves
    every batch and sequence length, 1 included: the first call of the compiled model (or any call that may compile
    again) runs inside it; later calls need not.

    - ``backed_size_oblivious``: a size first seen as 1 is a symbol too, not specialized (and no guard >= 2).
    - ``scaled_dot_product_attention`` picks the math kernel while dynamo runs it on fake tensors. Before torch 2.13
      the fused kernels' checks (``check_attn_mask_shape`` in ATen's sdp_utils_cpp.h, reached through
      ``_fused_sdp_choice_cpp`` on CPU and ``can_use_cudnn_attention`` on CUDA at half precision) compare an
      attention mask's batch with 1, and dynamo keeps that as a guard ``batch != 1``: a batch of 1 then compiles
      again. The graph holds one scaled_dot_product_attention node whichever kernel the fake run picked, and hidet
      converts that node itself, so the pick is no part of what runs; dynamo does not guard the SDPA flags.
    """
    import torch.fx.experimental._config as fx_config
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with contextlib.ExitStack() as stack:
        if hasattr(fx_config, 'backed_size_oblivious'):
            stack.enter_context(fx_config.patch(backed_size_oblivious=True))
        stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        yield
