"""``dynamo_config.correctness_report()``: run an fx graph eagerly in torch and through hidet's
conversions imperatively (concrete hidet tensors, one kernel per operator), node by node, and report
for each node its error e_h = max |actual − expected| / (|expected| + 1), flagging large ones."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.fx

import hidet
from hidet.frontend.torch.interpreter import Interpreter, leaves, map_structure, node_target_name
from hidet.frontend.torch.registry import Registry
from hidet.graph.tensor import Tensor

# e_h above these is flagged
TOLERANCE = {'float64': 1e-6, 'float32': 1e-4, 'float16': 2e-2, 'bfloat16': 5e-2}


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__(gm)
        self.values: Dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node):
        value = super().run_node(n)
        self.values[n.name] = _snapshot(value)
        return value


def _snapshot(value):
    """A copy of the tensors in ``value`` (later in-place ops must not change what was recorded)."""
    return map_structure(value, lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v)


def correctness_report(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], constants: Sequence[bool],
                       registry: Optional[Registry] = None, print_table: bool = True) -> List[dict]:
    """One row per fx node with tensor outputs: name, kind, operator, dtype, shape, e_h, flagged."""
    with torch.no_grad():
        recorder = _Recorder(gm)
        recorder.run(*example_inputs)
    interp = Interpreter(gm, registry, defer_constants=False)  # every node's value, now
    values, dynamic = [], []
    for is_const, a in zip(constants, example_inputs):
        if is_const:
            values.append(interp.to_constant(a))
            dynamic.append(False)
        elif isinstance(a, torch.Tensor):
            values.append(hidet.from_torch(a.detach().contiguous()))
            dynamic.append(True)
        else:
            values.append(a)
            dynamic.append(False)
    actual: Dict[str, Any] = {}

    def on_node(node, value):
        actual[node.name] = [v.torch().clone() if isinstance(v, Tensor) and not v.is_symbolic() else v
                             for v in leaves(value)]

    interp.run(values, dynamic, on_node=on_node)
    rows = []
    for node in gm.graph.nodes:
        if node.op in ('placeholder', 'output') or node.name not in actual:
            continue
        expected = [v for v in leaves(recorder.values.get(node.name)) if isinstance(v, torch.Tensor)]
        got = [v for v in actual[node.name] if isinstance(v, torch.Tensor)]
        if not expected:
            continue
        errors = [_error(a, e) for a, e in zip(got, expected)]
        err = max(errors) if errors and len(got) == len(expected) else float('inf')
        dtype = str(expected[0].dtype).replace('torch.', '')
        flagged = err > TOLERANCE.get(dtype, 0.0)
        rows.append({'name': node.name, 'kind': node.op, 'operator': node_target_name(gm, node), 'dtype': dtype,
                     'shape': list(expected[0].shape), 'e_h': err, 'flagged': flagged})
    if print_table:
        print(format_report(rows))
    return rows


def _error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    if tuple(actual.shape) != tuple(expected.shape):
        return float('inf')
    if expected.numel() == 0:
        return 0.0
    a, e = actual.detach().cpu().double(), expected.detach().cpu().double()
    both_nan = torch.isnan(a) & torch.isnan(e)
    same_inf = torch.isinf(e) & (a == e)
    diff = ((a - e).abs() / (e.abs() + 1)).masked_fill(both_nan | same_inf, 0.0)
    return float(torch.nan_to_num(diff, nan=float('inf')).max())


def format_report(rows: List[dict]) -> str:
    from tabulate import tabulate

    table = [[r['name'], r['kind'], r['operator'], r['dtype'], str(r['shape']), f"{r['e_h']:.2e}",
              '<<< large' if r['flagged'] else ''] for r in rows]
    flagged = sum(r['flagged'] for r in rows)
    head = f'hidet correctness report: {len(rows)} nodes, {flagged} with large errors ' \
           f'(e_h = |actual - expected| / (|expected| + 1))'
    return head + '\n' + tabulate(table, headers=['node', 'kind', 'operator', 'dtype', 'shape', 'e_h', ''])
