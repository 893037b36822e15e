"""The operator-mapping registry: which hidet conversion runs for each torch.fx target.

    @register_function(torch.nn.functional.relu, torch.relu)
    def relu(x: Tensor, inplace: bool = False): return ops.relu(x)

    @register_method(torch.Tensor.flatten)
    def tensor_flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1): ...

    @register_module(torch.nn.Linear)
    class HidetLinear(HidetModule):
        def __call__(self, x): return ops.matmul(x, ops.transpose(self.param('weight'), 0, 1)) + ...

A target may have several conversions (overloads). A call is converted by the newest one whose
Python signature binds the fx node's args/kwargs (``inspect.signature().bind``). Registering a
conversion with the same signature as an existing one replaces it: registering twice keeps the last.
"""
from __future__ import annotations

import builtins
import inspect
import math
import operator
from collections.abc import MutableMapping
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type

import hidet
from hidet.graph.tensor import Tensor

GUIDE = 'docs/torch-frontend.md ("Adding an operator mapping")'


class HidetModule:
    """The conversion of a ``torch.nn.Module`` leaf (an fx ``call_module`` node). Subclass it, register
    it with ``register_module(TorchModuleClass)`` and implement ``__call__`` on hidet tensors; read the
    module's parameters and buffers (as constant hidet tensors) with ``self.param(name)``."""

    def __init__(self, torch_module, to_constant: Optional[Callable[[Any], Any]] = None):
        self.mod = torch_module
        self._to_constant = to_constant

    def param(self, name: str, optional: bool = False):
        """The module's parameter or buffer ``name`` as a constant hidet tensor; None when it is absent
        or None and ``optional`` (else a ValueError)."""
        value = getattr(self.mod, name, None)
        if value is None:
            if optional:
                return None
            raise ValueError(f'{type(self.mod).__name__} has no parameter or buffer {name!r}')
        if self._to_constant is None:
            return hidet.from_torch(value)
        return self._to_constant(value)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f'{type(self).__name__} must implement __call__')


class _Conversions(MutableMapping):
    """One kind of a registry's conversions as a mapping keyed by what torch calls (a function, a
    torch.Tensor method or its name, an nn.Module class), as the original Hidet's
    ``Registry.registered_functions`` / ``registered_methods`` / ``registered_modules`` were: ``del
    Registry.registered_functions[torch.nn.functional.relu]`` removes relu's conversions from the default
    registry. A value is the list of a target's conversions (overloads), or a module's HidetModule class."""

    def __init__(self, table: dict, key: Callable[[Any], Any]):
        self._table, self._key = table, key

    def __getitem__(self, target):
        return self._table[self._key(target)]

    def __setitem__(self, target, conversions):
        self._table[self._key(target)] = conversions

    def __delitem__(self, target):
        del self._table[self._key(target)]

    def __iter__(self) -> Iterator:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


class _ConversionsOf:
    """``Registry.registered_<kind>``: the default registry's conversions on the class, a registry's own on
    an instance."""

    def __init__(self, attr: str, key: Callable[[Any], Any]):
        self._attr, self._key = attr, key

    def __get__(self, registry, owner) -> _Conversions:
        return _Conversions(getattr(default_registry if registry is None else registry, self._attr), self._key)


class Registry:
    """Conversions for fx targets: functions (``call_function``), torch.Tensor methods
    (``call_method``, keyed by name) and nn.Module classes (``call_module``)."""

    registered_functions = _ConversionsOf('_functions', lambda target: _key(target))
    registered_methods = _ConversionsOf('_methods', lambda method: _method_name(method))
    registered_modules = _ConversionsOf('_modules', lambda cls: cls)

    def __init__(self):
        self._functions: Dict[Any, List[Callable]] = {}
        self._methods: Dict[str, List[Callable]] = {}
        self._modules: Dict[type, Type[HidetModule]] = {}

    # ------------------------------------------------------------------ registering
    def register_function(self, *targets) -> Callable[[Callable], Callable]:
        """Decorator: ``fn`` converts calls of each of ``targets`` (torch functions, operator.*, …)."""
        if not targets:
            raise TypeError('register_function needs at least one target')

        def decorator(fn: Callable) -> Callable:
            for target in targets:
                _add_overload(self._functions.setdefault(_key(target), []), fn)
            return fn

        return decorator

    def register_method(self, *methods) -> Callable[[Callable], Callable]:
        """Decorator: ``fn(self, ...)`` converts ``tensor.<name>(...)``; ``methods`` are torch.Tensor
        methods (``torch.Tensor.flatten``) or their names (``'flatten'``)."""
        if not methods:
            raise TypeError('register_method needs at least one method')

        def decorator(fn: Callable) -> Callable:
            for method in methods:
                _add_overload(self._methods.setdefault(_method_name(method), []), fn)
            return fn

        return decorator

    def register_module(self, *module_classes: type) -> Callable[[type], type]:
        """Class decorator: a ``HidetModule`` subclass converting instances of ``module_classes``."""
        for cls in module_classes:
            if not isinstance(cls, type):
                raise TypeError(f'register_module expects torch.nn.Module classes, got {cls!r}')

        def decorator(hidet_cls: type) -> type:
            if not (isinstance(hidet_cls, type) and issubclass(hidet_cls, HidetModule)):
                raise TypeError(f'register_module decorates HidetModule subclasses, got {hidet_cls!r}')
            for cls in module_classes:
                self._modules[cls] = hidet_cls
            return hidet_cls

        return decorator

    def unregister(self, target) -> None:
        """Remove every conversion of ``target`` (a function, a torch.Tensor method or its name, or an
        nn.Module class)."""
        if isinstance(target, type):
            self._modules.pop(target, None)
            return
        self._functions.pop(_key(target), None)
        if isinstance(target, str) or _is_tensor_method(target):
            self._methods.pop(_method_name(target), None)

    def copy(self) -> 'Registry':
        """An independent registry with the same conversions."""
        r = Registry()
        r.restore(self)
        return r

    def restore(self, snapshot: 'Registry') -> None:
        """Make this registry's conversions those of ``snapshot`` (a ``copy()`` taken earlier)."""
        self._functions = {k: list(v) for k, v in snapshot._functions.items()}
        self._methods = {k: list(v) for k, v in snapshot._methods.items()}
        self._modules = dict(snapshot._modules)

    # ------------------------------------------------------------------ looking up
    def functions(self, target) -> List[Callable]:
        """The conversions of a function; a torch.Tensor method called as a function (``torch.Tensor.split(x, 2)``,
        which dynamo keeps as such for methods written in Python) converts as the method."""
        found = self._functions.get(_key(target))
        if not found and _is_tensor_method(target):
            found = self._methods.get(_method_name(target))
        return list(found or ())

    def methods(self, name: str) -> List[Callable]:
        return list(self._methods.get(_method_name(name), ()))

    def module(self, cls: type) -> Optional[Type[HidetModule]]:
        for base in cls.__mro__:  # a subclass of a registered module converts like its base
            if base in self._modules:
                return self._modules[base]
        return None

    def has_function(self, target) -> bool:
        return bool(self.functions(target))

    def has_method(self, name: str) -> bool:
        return bool(self._methods.get(_method_name(name)))

    @staticmethod
    def call(overloads: Sequence[Callable], what: str, args: Tuple, kwargs: Dict[str, Any]):
        """Call the newest overload whose signature binds ``args``/``kwargs``."""
        for fn in overloads:
            if _binds(fn, args, kwargs):
                return fn(*args, **kwargs)
        shown = ', '.join([_short(a) for a in args] + [f'{k}={_short(v)}' for k, v in kwargs.items()])
        signatures = '; '.join(f'{fn.__name__}{_signature(fn)}' for fn in overloads)
        raise NotImplementedError(f'{what}: no registered conversion takes the arguments ({shown}); the registered '
                                  f'signatures are: {signatures}. See {GUIDE}.')


def _key(target):
    """Functions are keyed by themselves; unhashable targets by identity."""
    try:
        hash(target)
        return target
    except TypeError:
        return ('id', id(target))


def _is_tensor_method(obj) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    name = getattr(obj, '__name__', None)
    return name is not None and getattr(torch.Tensor, name, None) is obj


def _method_name(method) -> str:
    if isinstance(method, str):
        return method
    name = getattr(method, '__name__', None)
    if name is None:
        raise TypeError(f'register_method expects torch.Tensor methods or their names, got {method!r}')
    return name


_SIGNATURES: Dict[Callable, Optional[inspect.Signature]] = {}


def _signature(fn) -> Optional[inspect.Signature]:
    if fn not in _SIGNATURES:
        try:
            _SIGNATURES[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            _SIGNATURES[fn] = None
    return _SIGNATURES[fn]


def _same_signature(a: Callable, b: Callable) -> bool:
    sa, sb = _signature(a), _signature(b)
    if sa is None or sb is None:
        return False
    pa, pb = list(sa.parameters.values()), list(sb.parameters.values())
    return len(pa) == len(pb) and all(x.name == y.name and x.kind == y.kind and
                                      (x.default is inspect.Parameter.empty) == (y.default is inspect.Parameter.empty)
                                      for x, y in zip(pa, pb))


def _add_overload(overloads: List[Callable], fn: Callable) -> None:
    overloads[:] = [f for f in overloads if not _same_signature(f, fn)]
    overloads.insert(0, fn)  # newest first


def _binds(fn, args, kwargs) -> bool:
    """Whether ``fn`` takes these arguments: its signature binds them, and each parameter annotated
    ``Tensor`` (hidet.Tensor) gets a Tensor, each annotated ``Optional[Tensor]`` a Tensor or None."""
    sig = _signature(fn)
    if sig is None:
        return True
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return False
    for name, value in bound.arguments.items():
        want = _tensor_annotation(sig.parameters[name].annotation)
        if want == 'tensor' and not isinstance(value, Tensor):
            return False
        if want == 'optional' and value is not None and not isinstance(value, Tensor):
            return False
    return True


def _tensor_annotation(annotation) -> Optional[str]:
    if annotation is Tensor or annotation == 'Tensor':
        return 'tensor'
    if annotation == 'Optional[Tensor]':
        return 'optional'
    args = getattr(annotation, '__args__', None)
    if args is not None and set(args) == {Tensor, type(None)}:
        return 'optional'
    return None


def _short(value) -> str:
    sig = getattr(value, 'signature', None)
    if callable(sig) and hasattr(value, 'dtype') and hasattr(value, 'shape'):
        return f'Tensor({value.dtype.name}{list(value.shape)})'
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + '...'


# ---------------------------------------------------------------- readable target names
_NAMES: Optional[Dict[int, str]] = None


def _namespaces():
    import torch
    import torch.nn.functional as F

    spaces = [('torch.nn.functional', F), ('torch', torch), ('operator', operator), ('math', math),
              ('builtins', builtins), ('torch.special', getattr(torch, 'special', None)),
              ('torch.linalg', getattr(torch, 'linalg', None)), ('torch.fft', getattr(torch, 'fft', None)),
              ('torch._C._nn', torch._C._nn), ('torch.Tensor', torch.Tensor)]
    return [(n, s) for n, s in spaces if s is not None]


def _name_table() -> Dict[int, str]:
    global _NAMES
    if _NAMES is None:
        table: Dict[int, str] = {}
        for prefix, space in _namespaces():
            for attr in dir(space):
                if attr.startswith('__'):
                    continue
                try:
                    obj = getattr(space, attr)
                except Exception:  # noqa: BLE001  (lazy attributes may fail to import)
                    continue
                if callable(obj) and not isinstance(obj, type) and id(obj) not in table:
                    table[id(obj)] = f'{prefix}.{attr}'
        _NAMES = table
    return _NAMES


def target_name(target) -> str:
    """A readable name of an fx target: ``torch.nn.functional.relu``, ``operator.add``,
    ``torch.Tensor.flatten`` (a method name), ``torch.nn.Linear`` (a module class)."""
    if isinstance(target, str):
        return f'torch.Tensor.{target}'
    if isinstance(target, type):
        try:
            import torch.nn

            if getattr(torch.nn, target.__name__, None) is target:
                return f'torch.nn.{target.__name__}'
        except ImportError:  # pragma: no cover
            pass
        return f'{target.__module__}.{target.__qualname__}'
    name = _name_table().get(id(target))
    if name is not None:
        return name
    module = getattr(target, '__module__', None) or getattr(getattr(target, '__self__', None), '__name__', None)
    qualname = getattr(target, '__qualname__', None) or getattr(target, '__name__', None) or repr(target)
    return f'{module}.{qualname}' if module else qualname


# ---------------------------------------------------------------- the default registry
default_registry = Registry()


def register_function(*targets):
    """``default_registry.register_function``: see Registry.register_function."""
    return default_registry.register_function(*targets)


def register_method(*methods):
    """``default_registry.register_method``: see Registry.register_method."""
    return default_registry.register_method(*methods)


def register_module(*module_classes):
    """``default_registry.register_module``: see Registry.register_module."""
    return default_registry.register_module(*module_classes)
