"""The fx interpreter: runs a torch.fx graph on hidet tensors, node by node, through the registered
conversions.

Placeholders take the values the caller binds (symbolic hidet tensors for graph inputs, constant
hidet tensors for parameters and buffers, Python values for specialized scalars). A value is
*dynamic* when it is (or is computed from) a graph input; a call none of whose arguments is dynamic
is evaluated by torch itself, now, and its result becomes a constant (creation ops, weight
transforms, rotary tables, masks built from buffers): its target needs no conversion. A dynamic call
goes through the registry, and one with no conversion is *unsupported*: the interpreter collects
every such node and raises one ``UnsupportedOperatorsError`` naming each target.
"""
from __future__ import annotations

import contextlib
import operator
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch
import torch.fx

import hidet
from hidet.frontend.torch.dynamic_shapes import NotTranslatable, size_to_dim
from hidet.frontend.torch.registry import GUIDE, HidetModule, Registry, default_registry, target_name
from hidet.frontend.torch.utils import to_torch_dtype
from hidet.graph.operator import deferred_constants
from hidet.graph.tensor import Tensor
from hidet.ir.expr import Expr

try:  # dynamo re-raises these unchanged (instead of wrapping them in BackendCompilerFailed)
    from torch._dynamo.exc import ShortenTraceback as _Passthrough

    _PASSTHROUGH = (_Passthrough,)
except ImportError:  # pragma: no cover  (older torch)
    _PASSTHROUGH = ()


class UnsupportedOperatorsError(NotImplementedError, *_PASSTHROUGH):
    """Some fx targets have no hidet conversion; ``targets`` lists their readable names."""

    def __init__(self, message: str, targets: Sequence[str] = (), nodes: Sequence[str] = ()):
        NotImplementedError.__init__(self, message)
        self.msg = message
        self.first_useful_frame = None
        self.targets = list(targets)
        self.nodes = list(nodes)

    def __str__(self) -> str:
        return self.msg


class _Unknown:
    """The value of a node after an unsupported one (when checking, and no stand-in could be made)."""

    def __repr__(self) -> str:
        return '<unknown>'


UNKNOWN = _Unknown()
_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                      operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.imatmul,
                      operator.setitem}


def node_target_name(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str:
    if node.op == 'call_module':
        return target_name(type(gm.get_submodule(node.target)))
    if node.op in ('call_function', 'call_method'):
        return target_name(node.target)
    return node.op


def map_structure(value, fn: Callable[[Any], Any]):
    """``fn`` applied to the leaves of nested lists, tuples (namedtuples too) and dicts."""
    if isinstance(value, torch.Size):
        return value
    if isinstance(value, (list, tuple)):
        items = [map_structure(v, fn) for v in value]
        if isinstance(value, list):
            return items
        if hasattr(value, '_fields'):  # namedtuple
            return type(value)(*items)
        try:
            return type(value)(items)
        except TypeError:
            return tuple(items)
    if isinstance(value, dict):
        return type(value)((k, map_structure(v, fn)) for k, v in value.items())
    return fn(value)


def leaves(value) -> List[Any]:
    """The leaves of a structure; a slice's bounds count as leaves (``x[:, :seq]`` with a symbolic seq)."""
    found: List[Any] = []

    def visit(v):
        if isinstance(v, slice):
            found.extend((v.start, v.stop, v.step))
        else:
            found.append(v)

    map_structure(value, visit)
    return found


class Interpreter:
    def __init__(self, graph_module: torch.fx.GraphModule, registry: Optional[Registry] = None,
                 device: Optional[str] = None, defer_constants: bool = True):
        """``defer_constants``: operators a conversion applies to constants only (weight transforms) are
        traced and folded later by the graph optimizer, their kernels compiled together; False runs them
        at once (interpreting on concrete values, as the correctness report does)."""
        self.gm = graph_module
        self.defer_constants = defer_constants
        self.registry = registry or default_registry
        # the graph's device: one-element CPU constants (torch.tensor(2.0) beside CUDA inputs, which
        # torch allows) move there
        self.device = torch.device(device) if device is not None else None
        self._constants: Dict[int, Tensor] = {}       # id(torch tensor) → hidet constant
        self._torch_of: Dict[int, torch.Tensor] = {}  # id(hidet constant) → its torch tensor
        self._keep: List[Any] = []                    # keeps the keys above alive
        self._dynamic: Dict[int, Tensor] = {}         # concrete tensors computed from graph inputs
        self._modules: Dict[str, HidetModule] = {}
        self.reasons: Dict[str, str] = {}
        # of the last run: (placeholder position, final value) of each graph input updated in place, which the
        # compiled function writes back to the caller's tensor
        self.input_updates: List[Tuple[int, Any]] = []

    # ------------------------------------------------------------------ constants
    def to_constant(self, t: torch.Tensor) -> Tensor:
        """A torch tensor (parameter, buffer, folded value) as a hidet constant, zero-copy where it is
        contiguous; one hidet tensor per torch tensor."""
        key = id(t)
        if key not in self._constants:
            if t.dtype in (torch.complex64, torch.complex128):
                raise NotImplementedError(f'hidet has no complex dtypes ({t.dtype})')
            src = t
            if self.device is not None and self.device.type == 'cuda' and t.device.type == 'cpu' and t.numel() == 1:
                t = t.to(self.device)
            h = hidet.from_torch(t)
            self._keep.append(src)
            self._constants[key] = h
            self._torch_of[id(h)] = t
            self._keep.append((t, h))
        return self._constants[key]

    def _to_torch(self, value):
        def convert(v):
            if isinstance(v, Tensor):
                return self._torch_of.get(id(v)) if id(v) in self._torch_of else v.torch()
            return v

        return map_structure(value, convert)

    def _from_torch(self, value):
        return map_structure(value, lambda v: self.to_constant(v) if isinstance(v, torch.Tensor) else v)

    def is_dynamic(self, value) -> bool:
        """Whether ``value`` depends on the graph inputs: symbolic tensors, tensors computed from them, and
        symbolic sizes (hidet expressions of dynamo's size symbols)."""
        return any(isinstance(v, Expr) or isinstance(v, Tensor) and (v.is_symbolic() or id(v) in self._dynamic)
                   for v in leaves(value))

    def mark_dynamic(self, value) -> None:
        for v in leaves(value):
            if isinstance(v, Tensor) and not v.is_symbolic():
                self._dynamic[id(v)] = v

    # ------------------------------------------------------------------ running
    def run(self, inputs: Sequence[Any], dynamic: Optional[Sequence[bool]] = None, *,
            on_node: Optional[Callable[[torch.fx.Node, Any], None]] = None, check_only: bool = False):
        """Interpret the graph with ``inputs`` bound to its placeholders (in order). ``dynamic[i]`` marks
        concrete input i as a graph input (symbolic tensors always are). Returns the output structure;
        raises UnsupportedOperatorsError listing every unsupported node (``check_only``: returns the
        list of those nodes instead)."""
        placeholders = [n for n in self.gm.graph.nodes if n.op == 'placeholder']
        if len(inputs) != len(placeholders):
            raise ValueError(f'the graph has {len(placeholders)} placeholders, got {len(inputs)} inputs')
        env: Dict[torch.fx.Node, Any] = {}
        for i, (node, value) in enumerate(zip(placeholders, inputs)):
            env[node] = value
            if dynamic is not None and dynamic[i]:
                self.mark_dynamic(value)
        # the real inputs (not model state): an in-place update of one is written back to the caller's tensor
        writable = {node for node, value in zip(placeholders, inputs) if isinstance(value, Tensor)
                    and self.is_dynamic(value)}
        updated: List[torch.fx.Node] = []
        unsupported: List[torch.fx.Node] = []
        aliases: Dict[torch.fx.Node, List[torch.fx.Node]] = {}  # node → the nodes naming its tensor (in-place calls)
        reasons = self.reasons = {}  # node name → why its conversion declined (kept for the error of a check)
        # 0-d tensors standing for a number computed in the graph (``.item()`` of a number argument, and math on
        # such numbers alone) → the node of the first (env keeps them alive)
        numbers: Dict[int, str] = {}
        order = {n: i for i, n in enumerate(self.gm.graph.nodes)}
        result = None
        for node in self.gm.graph.nodes:
            if node.op == 'placeholder':
                continue
            if node.op == 'output':
                result = torch.fx.node.map_arg(node.args[0], lambda n: env[n])
                break
            args = torch.fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
            foreign = _foreign_dtype(node) if node.op != 'get_attr' else None
            if node.op == 'get_attr':
                value = self._get_attr(node.target)
            elif foreign is not None:  # (complex values: left to eager by the fallback, with their consumers)
                error = NotImplementedError(f'{foreign} values: hidet has no such dtype')
                if not check_only:
                    raise _with_context(error, node, self.gm)
                unsupported.append(node)
                reasons[node.name] = str(error)
                value = self._stand_in(node)
            elif any(v is UNKNOWN for v in leaves((args, kwargs))):
                if not self._has_conversion(node):
                    unsupported.append(node)
                value = self._stand_in(node)
            elif self.is_dynamic((args, kwargs)) and not self._has_conversion(node):
                unsupported.append(node)
                value = self._stand_in(node)
            else:
                folded = not self.is_dynamic((args, kwargs))
                try:
                    if _is_inplace(node, self.registry):  # (also on constants: a buffer's counter is the caller's)
                        written = _check_inplace_target(node, order, writable)
                        if written is not None and written not in updated:
                            updated.append(written)
                    if folded:
                        value = self._fold(node, args, kwargs)
                    else:
                        with deferred_constants() if self.defer_constants else contextlib.nullcontext():
                            value = self._convert(node, args, kwargs)
                except Exception as raised:
                    e = _needs_constant_number(raised, numbers, (args, kwargs))
                    if not isinstance(e, NotImplementedError) or not check_only or \
                            isinstance(e, InPlaceUpdateOfShared) and not e.eager_ok:
                        raise _with_context(e, node, self.gm) from raised
                    unsupported.append(node)
                    reasons[node.name] = str(e)
                    if isinstance(e, InPlaceUpdateOfShared):  # (the views run in eager with the update)
                        unsupported.extend(v for v in e.views if v not in unsupported)
                    value, folded = self._stand_in(node), False
                if _is_inplace(node, self.registry) and node.args and isinstance(node.args[0], torch.fx.Node):
                    value = value if folded else _keep_dtype(value, env[node.args[0]])
                    self._updated(node, value, folded and node not in unsupported, node not in unsupported, env,
                                  aliases, order)
                if not folded:
                    self.mark_dynamic(value)
                    if _is_number(node, value, (args, kwargs), numbers):
                        numbers[id(value)] = node.name
            env[node] = value
            if on_node is not None:
                on_node(node, value)
        if check_only:
            return unsupported
        if unsupported:
            raise self.unsupported_error(unsupported, reasons)
        self.input_updates = [(placeholders.index(p), env[p]) for p in updated]
        return result

    def check(self, inputs: Sequence[Any], dynamic: Optional[Sequence[bool]] = None) -> List[torch.fx.Node]:
        """The nodes that cannot be converted (no registered conversion, or one that declined)."""
        return self.run(inputs, dynamic, check_only=True)

    def unsupported_error(self, nodes: Sequence[torch.fx.Node], reasons: Optional[Dict[str, str]] = None
                          ) -> UnsupportedOperatorsError:
        by_target: Dict[str, List[str]] = {}
        for node in nodes:
            by_target.setdefault(node_target_name(self.gm, node), []).append(node.name)
        lines = [f'hidet cannot compile this graph: {len(by_target)} operator(s) have no hidet mapping:']
        for name, node_names in by_target.items():
            shown = ', '.join(node_names[:4]) + (', ...' if len(node_names) > 4 else '')
            lines.append(f'  {name}  (node{"s" if len(node_names) > 1 else ""} {shown})')
            for n in node_names:
                if reasons and n in reasons:
                    lines.append(f'      {n}: {reasons[n]}')
        lines.append(f'Add a mapping with hidet.torch.register_function / register_method / register_module: see '
                     f'{GUIDE}. Or run the unsupported parts in eager PyTorch: '
                     f'hidet.torch.dynamo_config.fallback_to_eager(True).')
        return UnsupportedOperatorsError('\n'.join(lines), list(by_target), [n.name for n in nodes])

    # ------------------------------------------------------------------ nodes
    def _get_attr(self, target: str):
        value = self.gm
        for part in target.split('.'):
            value = getattr(value, part)
        return self.to_constant(value) if isinstance(value, torch.Tensor) else value

    def _has_conversion(self, node: torch.fx.Node) -> bool:
        if node.op == 'call_function':
            return self.registry.has_function(node.target)
        if node.op == 'call_method':
            return self.registry.has_method(node.target)
        if node.op == 'call_module':
            return self.registry.module(type(self.gm.get_submodule(node.target))) is not None
        return True

    def _convert(self, node: torch.fx.Node, args, kwargs):
        if node.op == 'call_function':
            return Registry.call(self.registry.functions(node.target), target_name(node.target), args, kwargs)
        if node.op == 'call_method':
            if not isinstance(args[0], Tensor):  # a method of a Python value (a shape tuple, …)
                return getattr(args[0], node.target)(*args[1:], **kwargs)
            return Registry.call(self.registry.methods(node.target), target_name(node.target), args, kwargs)
        if node.op == 'call_module':
            if node.target not in self._modules:
                mod = self.gm.get_submodule(node.target)
                self._modules[node.target] = self.registry.module(type(mod))(mod, self.to_constant)
            return self._modules[node.target](*args, **kwargs)
        raise ValueError(f'unexpected fx node {node.op}')

    def _updated(self, node: torch.fx.Node, value, folded: bool, views: bool, env: Dict[torch.fx.Node, Any],
                 aliases: Dict[torch.fx.Node, List[torch.fx.Node]], order: Dict[torch.fx.Node, int]) -> None:
        """After in-place call ``node`` gave ``value``: every name of its target's tensor (the target, and the
        in-place calls' results that return it, as in ``m.mul_(2).add_(1)``) rebound to it, so later reads of any
        see the update (a folded call ran on a copy); and (``views``) the views of the tensor taken before the call,
        which torch's share its memory with, taken again from it."""
        names = aliases.setdefault(node.args[0], [node.args[0]])
        names.append(node)
        aliases[node] = names
        for name in names:
            env[name] = value
        if not views:
            return
        for view in [v for name in names for v in _views_of(name)]:
            if order[view] < order[node] and view in env:
                vargs = torch.fx.node.map_arg(view.args, lambda n: env[n])
                vkwargs = torch.fx.node.map_arg(view.kwargs, lambda n: env[n])
                if folded:
                    env[view] = self._fold(view, vargs, vkwargs)
                else:
                    env[view] = self._convert(view, vargs, vkwargs)
                    self.mark_dynamic(env[view])

    def _fold(self, node: torch.fx.Node, args, kwargs):
        """Evaluate a call on constants with torch (in-place calls on copies, so weights stay intact)."""
        targs, tkwargs = self._to_torch(args), self._to_torch(kwargs)
        inplace = _is_inplace(node, self.registry)
        if inplace:
            targs, tkwargs = map_structure((targs, tkwargs), lambda v: v.clone() if isinstance(v, torch.Tensor) else v)
        with torch.no_grad():
            if node.op == 'call_function':
                value = node.target(*targs, **tkwargs)
            elif node.op == 'call_method':
                value = getattr(targs[0], node.target)(*targs[1:], **tkwargs)
            else:
                value = self.gm.get_submodule(node.target)(*targs, **tkwargs)
        if inplace and targs and isinstance(targs[0], torch.Tensor):
            value = targs[0]  # (the updated copy: operator.setitem returns None)
        return self._from_torch(value)

    def _stand_in(self, node: torch.fx.Node):
        """Symbolic tensors shaped like the node's example value (from dynamo's metadata), so checking
        can go on past an unsupported node."""
        example = node.meta.get('example_value', node.meta.get('val'))
        if example is None:
            return UNKNOWN

        def convert(v):
            try:
                if isinstance(v, torch.Tensor):
                    shape = [size_to_dim(s) for s in v.shape]
                    return hidet.symbol(shape, str(v.dtype).replace('torch.', ''), _device_text(v.device))
                if isinstance(v, torch.SymInt):
                    return size_to_dim(v)
            except NotTranslatable:
                return UNKNOWN
            return v

        try:
            return map_structure(example, convert)
        except Exception:  # noqa: BLE001  (a stand-in is best effort)
            return UNKNOWN


def _device_text(device: torch.device) -> str:
    return 'cpu' if device.type != 'cuda' else f'cuda:{device.index or 0}'


# calls whose result shares its first argument's memory (torch's views; a reshape may be one)
_VIEW_METHODS = frozenset({
    'view', 'view_as', 'reshape', 'reshape_as', 'permute', 'transpose', 't', 'unsqueeze', 'squeeze', 'expand',
    'expand_as', 'narrow', 'select', 'flatten', 'unflatten', 'as_strided', 'unfold', 'diagonal', 'movedim',
    'swapaxes', 'swapdims', 'split', 'chunk', 'unbind', 'tensor_split', '__getitem__', 'detach'})
_VIEW_FUNCTIONS = frozenset({
    operator.getitem, torch.reshape, torch.permute, torch.transpose, torch.t, torch.unsqueeze, torch.squeeze,
    torch.narrow, torch.select, torch.flatten, torch.split, torch.chunk, torch.unbind, torch.movedim, torch.swapaxes,
    torch.diagonal, torch.tensor_split, torch.detach})


def _foreign_dtype(node: torch.fx.Node) -> Optional[str]:
    """The name of a dtype hidet lacks (complex ones) that ``node`` reads or produces, per dynamo's example
    values, or None."""
    def example(n):
        return n.meta.get('example_value', n.meta.get('val')) if isinstance(n, torch.fx.Node) else None

    values = [example(node)] + [example(a) for a in node.all_input_nodes]
    for v in leaves(values):
        if isinstance(v, torch.Tensor) and (v.dtype.is_complex or v.dtype.itemsize == 1 and v.dtype.is_floating_point):
            return str(v.dtype).replace('torch.', '')
    return None


def _view_base(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    """The node whose memory ``node``'s value is a view of, or None."""
    is_view = (node.op == 'call_method' and node.target in _VIEW_METHODS
               or node.op == 'call_function' and node.target in _VIEW_FUNCTIONS)
    return node.args[0] if is_view and node.args and isinstance(node.args[0], torch.fx.Node) else None


class InPlaceUpdateOfShared(NotImplementedError):
    """An in-place call whose target shares memory that others see (``views``: the view nodes between the
    target and that memory, which must run in eager with the call for torch's semantics). ``eager_ok``: the
    fallback can run them in eager (a graph input's memory is the caller's tensor, which eager receives); a view
    of an intermediate cannot (the tensor it views is hidet's, and hidet may read it before eager updates it)."""

    def __init__(self, message: str, views: Sequence[torch.fx.Node], eager_ok: bool):
        super().__init__(message)
        self.views, self.eager_ok = list(views), eager_ok


def _check_inplace_target(node: torch.fx.Node, order: Dict[torch.fx.Node, int],
                          inputs: Set[torch.fx.Node]) -> Optional[torch.fx.Node]:
    """In-place calls are converted by rebinding their target to the new value, which is right when nothing
    else sees the target's memory. A whole graph input of ``inputs`` (a real input, not model state) is returned:
    the caller's tensor, which the compiled function writes back after running (Interpreter.input_updates).
    Declined (InPlaceUpdateOfShared) where torch would change more: model state (baked into the build), a view of
    a graph input, or a view whose base (or another view of it) is read after the call."""
    target = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
    if target is None:
        return None
    views, root = [], target
    while _view_base(root) is not None:
        views.append(root)
        root = _view_base(root)
    if root.op == 'placeholder' and root in inputs and not views:
        return root
    if root.op == 'placeholder':
        what = 'the graph input' if root in inputs else 'model state (a parameter or buffer, baked into the build)'
        raise InPlaceUpdateOfShared(f'in-place update of {what} {root.name!r}' +
                                    (f' through {target.name!r}' if views else '') +
                                    ' (the caller\'s tensor changes): not supported; update a copy, or enable '
                                    'fallback_to_eager', views, eager_ok=True)
    for view in views:
        base = _view_base(view)
        later = [u for u in base.users if u not in views and order.get(u, -1) > order[node]]
        if later:
            raise InPlaceUpdateOfShared(
                f'in-place update of {target.name!r}, a view of {base.name!r} that {later[0].name!r} reads '
                'afterwards: not supported (hidet would update only the view); write it out of place (e.g. '
                'torch.where, or assigning into the base tensor)', views, eager_ok=False)
    # (an update of a whole tensor: the interpreter takes its earlier views again, see Interpreter._updated)
    if not views:
        return
    # another view of the same memory, taken before the call and read after it, sees the update in torch, and
    # would keep the old values here (``v = m.view(16); m[0].add_(1); v * 2``)
    for other in _views_of(root):
        if other in views or other is target or order.get(other, -1) > order[node]:
            continue
        later = [u for u in other.users if order.get(u, -1) > order[node]]
        if later:
            raise InPlaceUpdateOfShared(
                f'in-place update of {target.name!r} while {other.name!r}, a view of the same tensor taken before '
                f'it, is read afterwards by {later[0].name!r}: not supported (the view would keep the old values); '
                'take the view after the update, or write the update out of place', views, eager_ok=False)


def _views_of(root: torch.fx.Node) -> List[torch.fx.Node]:
    """Every node whose value is a view (through view calls) of ``root``'s memory."""
    found, todo = [], [root]
    while todo:
        for user in todo.pop().users:
            if _view_base(user) is not None and _view_base(user) in ([root] + found) and user not in found:
                found.append(user)
                todo.append(user)
    return found


def _keep_dtype(value, target):
    """An in-place update keeps its target's dtype, as in torch: ``x.eq_(y)`` of a float x holds 0.0 and 1.0;
    a result that torch may not cast to it (``x.add_(1.5)`` of an integer x) is the error eager raises."""
    if isinstance(value, Tensor) and isinstance(target, Tensor) and value.dtype != target.dtype:
        result, wanted = to_torch_dtype(value.dtype), to_torch_dtype(target.dtype)
        if not torch.can_cast(result, wanted):
            raise RuntimeError(f"result type {str(result).replace('torch.', '')} can't be cast to the desired output "
                               f"type {str(wanted).replace('torch.', '')} of an in-place update")
        return hidet.ops.cast(value, target.dtype)
    return value


def _is_inplace(node: torch.fx.Node, registry: Registry) -> bool:
    if node.op == 'call_method':
        name = node.target
        return name.endswith('_') and not name.endswith('__')
    if node.op == 'call_function':
        if node.target in _INPLACE_OPERATORS:
            return True
        if getattr(node.target, '__module__', None) in ('_operator', 'operator'):
            return False  # (operator.and_, or_, not_: the underscore only dodges a keyword)
        if node.kwargs.get('inplace') is True:
            return True
        name = getattr(node.target, '__name__', '')
        if name.endswith('_') and not name.endswith('__'):
            return True
        return _bound_inplace(node)
    return False


def _bound_inplace(node: torch.fx.Node) -> bool:
    import inspect

    try:
        sig = inspect.signature(node.target)
    except (TypeError, ValueError):
        return False
    if 'inplace' not in sig.parameters:
        return False
    try:
        bound = sig.bind(*node.args, **node.kwargs)
    except TypeError:
        return False
    return bound.arguments.get('inplace') is True


def _is_number(node: torch.fx.Node, value, inputs, numbers: Dict[int, str]) -> bool:
    """Whether ``value`` (node's symbolic result) stands for a number computed in the graph: ``.item()``'s 0-d
    tensor, or a 0-d result of math whose tensor operands are such numbers alone (``-t``, ``1 / t``)."""
    if not isinstance(value, Tensor) or value.ndim != 0:
        return False
    if node.op == 'call_method' and node.target == 'item':
        return True
    tensors = [v for v in leaves(inputs) if isinstance(v, Tensor)]
    return bool(tensors) and all(id(v) in numbers for v in tensors)


def _needs_constant_number(e: Exception, numbers: Dict[int, str], inputs) -> Exception:
    """``e`` as a conversion declining (NotImplementedError: the fallback runs the node in torch) where the node
    failed on an argument that is a number computed in the graph (the conversion needs a Python number there)."""
    read = [numbers[id(v)] for v in leaves(inputs) if isinstance(v, Tensor) and id(v) in numbers]
    if not read or not isinstance(e, (TypeError, ValueError)):
        return e
    return NotImplementedError(
        f'an argument is a number computed in the graph ({read[0]}: dynamo passes a Python number that changed '
        f'between calls as a tensor and reads it with .item()), where this conversion needs a constant number '
        f'({type(e).__name__}: {e}). Run it in eager with hidet.torch.dynamo_config.fallback_to_eager(True), or '
        f'keep the number fixed (torch._dynamo.config.specialize_float = True)')


def _with_context(e: Exception, node: torch.fx.Node, gm: torch.fx.GraphModule) -> Exception:
    where = f'converting fx node {node.name!r} ({node.op} {node_target_name(gm, node)})'
    trace = node.meta.get('stack_trace')
    if trace:
        lines = [ln for ln in trace.strip().splitlines() if ln.strip()]
        where += '\n  from user code:\n    ' + '\n    '.join(lines[-2:])
    message = f'{where}: {type(e).__name__}: {e}'
    try:
        return type(e)(message)
    except Exception:  # noqa: BLE001  (exception types with other constructors)
        return RuntimeError(message)
