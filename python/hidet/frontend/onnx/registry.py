"""The ONNX operator registry: (op_type, opset range) → converter, with the attributes each converter
understands, and the whole-model check that lists every unsupported node before anything runs.

A converter is registered with::

    @register('LeakyRelu', attrs={'alpha': 0.01})
    def leaky_relu(ctx, x):
        return ops.leaky_relu(ctx.tensor(x), ctx.attrs['alpha'])

``attrs`` names every attribute the converter understands and its default (``REQUIRED`` for none);
an attribute not named there makes the node unsupported. ``check(attrs) -> Optional[str]`` rejects
attribute values the converter cannot handle (the string says why). ``since``/``until`` bound the
opsets (of the model's default domain) the converter serves, both inclusive; ``until=None`` means the
newest opset the installed ``onnx`` knows.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from hidet.frontend.onnx.utils import onnx_dtype_name, unsupported_dtype

MIN_OPSET = 13

REQUIRED = object()  # an attribute default meaning "the node must set it"


@dataclasses.dataclass(frozen=True)
class OpSpec:
    op_type: str
    since: int
    until: Optional[int]
    convert: Callable
    attrs: Mapping[str, Any]
    check: Optional[Callable[[Dict[str, Any]], Optional[str]]]
    family: str
    outputs: Optional[int] = None  # how many outputs the converter computes (None: all)

    def covers(self, opset: int) -> bool:
        return self.since <= opset <= (self.until if self.until is not None else max_opset())

    @property
    def opsets(self) -> str:
        return f'{self.since}-{self.until if self.until is not None else max_opset()}'


_REGISTRY: Dict[str, List[OpSpec]] = {}


def register(op_types: Union[str, Sequence[str]], since: int = MIN_OPSET, until: Optional[int] = None,
             attrs: Optional[Mapping[str, Any]] = None, check: Optional[Callable] = None,
             outputs: Optional[int] = None):
    """Register the decorated function as the converter of ``op_types`` for opsets ``since``…``until``;
    ``outputs``: how many of the node's outputs it computes (a node asking for more is unsupported)."""
    names = [op_types] if isinstance(op_types, str) else list(op_types)

    def decorate(fn: Callable) -> Callable:
        family = fn.__module__.rsplit('.', 1)[-1]
        for name in names:
            spec = OpSpec(name, since, until, fn, dict(attrs or {}), check, family, outputs)
            for other in _REGISTRY.get(name, []):
                lo, hi = max(other.since, since), min(other.until or 10 ** 6, until or 10 ** 6)
                if lo <= hi:
                    raise ValueError(f'ONNX converter for {name} registered twice for opsets {lo}-{hi}')
            _REGISTRY.setdefault(name, []).append(spec)
        return fn

    return decorate


def max_opset() -> int:
    """The newest opset of the default domain that the installed ``onnx`` knows."""
    import onnx

    return onnx.defs.onnx_opset_version()


def lookup(op_type: str, opset: int) -> Optional[OpSpec]:
    for spec in _REGISTRY.get(op_type, []):
        if spec.covers(opset):
            return spec
    return None


def registered() -> Dict[str, List[OpSpec]]:
    """op_type → its converters (every family module imported)."""
    # (a circle at import time: the package hidet.frontend.onnx imports this module)
    from hidet.frontend.onnx import load_converters

    load_converters()
    return {k: sorted(v, key=lambda s: s.since) for k, v in sorted(_REGISTRY.items())}


def supported_ops_markdown() -> str:
    """The supported-operator table of docs/onnx.md (a test keeps the doc in sync)."""
    by_family: Dict[str, List[str]] = {}
    for name, specs in registered().items():
        for s in specs:
            label = name if (s.since, s.until) == (MIN_OPSET, None) else f'{name} ({s.opsets})'
            by_family.setdefault(s.family, []).append(label)
    lines = ['| family | operators |', '| --- | --- |']
    for family in sorted(by_family):
        lines.append(f'| {family.replace("ops_", "")} | {", ".join(by_family[family])} |')
    return '\n'.join(lines)


# ---------------------------------------------------------------- attributes
def attribute_values(node) -> Dict[str, Any]:
    """The node's attributes as Python values (tensors as numpy arrays, strings as str)."""
    from onnx import helper, numpy_helper

    values = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode('utf-8')
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode('utf-8') for s in v]
        elif hasattr(v, 'data_type') and hasattr(v, 'dims') and not hasattr(v, 'values'):  # TensorProto
            v = numpy_helper.to_array(v)
        values[a.name] = v
    return values


def node_attrs(spec: OpSpec, node) -> Tuple[Dict[str, Any], List[str]]:
    """(the attributes with defaults filled in, the problems found)."""
    given = attribute_values(node)
    problems = [f"attribute '{k}'" for k in given if k not in spec.attrs]
    attrs = {}
    for k, default in spec.attrs.items():
        if k in given:
            attrs[k] = given[k]
        elif default is REQUIRED:
            problems.append(f"missing attribute '{k}'")
        else:
            attrs[k] = default
    if not problems and spec.check is not None:
        why = spec.check(attrs)
        if why:
            problems.append(why)
    return attrs, problems


# ---------------------------------------------------------------- whole-model check
class OnnxUnsupportedError(NotImplementedError):
    """The model uses operators, attributes or dtypes the ONNX frontend does not support."""


def domain_opsets(model) -> Dict[str, int]:
    return {('' if imp.domain == 'ai.onnx' else imp.domain): imp.version for imp in model.opset_import}


def check_model(model) -> None:
    """Raise one OnnxUnsupportedError listing every unsupported node type (with its opset and the
    attribute or dtype at fault), graph input or initializer dtype; return when all is supported."""
    registered()
    opsets = domain_opsets(model)
    problems: Dict[str, List[str]] = {}  # description → node names

    def add(desc: str, name: str):
        problems.setdefault(desc, []).append(name)

    graph = model.graph
    default_opset = opsets.get('', None)
    if default_opset is None:
        add('the model imports no opset of the default ONNX domain', '')
    elif not MIN_OPSET <= default_opset <= max_opset():
        add(f'model opset {default_opset}: the ONNX frontend supports opsets {MIN_OPSET}-{max_opset()} '
            f'(convert older models with onnx.version_converter.convert_version)', '')
    for kind, values in (('graph input', graph.input), ('graph output', graph.output)):
        for v in values:
            elem = v.type.tensor_type.elem_type if v.type.HasField('tensor_type') else None
            if elem is None:
                add(f'{kind} of a non-tensor type', v.name)
            elif elem and unsupported_dtype(elem):
                add(f'{kind} of dtype {onnx_dtype_name(elem)}', v.name)
    for init in graph.initializer:
        if unsupported_dtype(init.data_type):
            add(f'initializer of dtype {onnx_dtype_name(init.data_type)}', init.name)
    if graph.sparse_initializer:
        add('sparse initializers', graph.sparse_initializer[0].values.name)

    for i, node in enumerate(graph.node):
        name = node.name or f'#{i}'
        domain = '' if node.domain == 'ai.onnx' else node.domain
        if domain:
            add(f'{node.op_type} (domain {domain!r}): only the default ONNX domain is supported', name)
            continue
        opset = default_opset or 0
        spec = lookup(node.op_type, opset)
        if spec is None:
            others = _REGISTRY.get(node.op_type)
            why = (f'supported for opsets {", ".join(s.opsets for s in others)}' if others
                   else 'no converter')
            add(f'{node.op_type} (opset {opset}): {why}', name)
            continue
        _, found = node_attrs(spec, node)
        if spec.outputs is not None:
            found += [f'output #{i} ({node.output[i]!r})' for i in range(spec.outputs, len(node.output))
                      if node.output[i]]
        for p in found:
            add(f'{node.op_type} (opset {opset}): {p} not supported', name)

    if problems:
        lines = []
        for desc, names in problems.items():
            shown = [n for n in names if n][:3]
            where = f" ({len(names)}: {', '.join(repr(n) for n in shown)}{', …' if len(names) > 3 else ''})" \
                if shown else ''
            lines.append(f'  {desc}{where}')
        raise OnnxUnsupportedError(
            f'the ONNX model uses {len(problems)} unsupported feature(s); nothing was converted or compiled:\n'
            + '\n'.join(lines))
