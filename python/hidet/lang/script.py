"""``hidet.script`` and ``hidet.script_module``: Python functions → IR functions → a kernel library.

    with hidet.script_module() as module:
        @hidet.script
        def kernel(...): ...
    built = module.build()        # = hidet.drivers.build_ir_module(module.ir_module())
    built(a, b, c, m, n)          # or built['kernel'](...) when the module exports several kernels
"""
from __future__ import annotations

import copy
import sys
import threading
import weakref
from typing import Dict, List, Optional

from hidet.ir.stmt import Function, IRModule
from hidet.ir.type import void

from .constructs import ScriptMacro
from .transpiler import HidetScriptError, Transpiler

_CALLEES: 'weakref.WeakKeyDictionary[Function, List[Function]]' = weakref.WeakKeyDictionary()
_state = threading.local()


def _module_stack() -> List['ScriptModule']:
    if not hasattr(_state, 'stack'):
        _state.stack = []
    return _state.stack


def script(func) -> Function:
    """Translate the Python function ``func`` into an IR Function (hidet.ir.stmt.Function); inside a
    ``script_module()`` block it also joins that module. Python names of the defining scope are
    compile-time constants."""
    if isinstance(func, Function):
        return func
    env = _scope(func, sys._getframe(1))
    try:
        transpiler = Transpiler(func, env)
        f = transpiler.translate()
    except HidetScriptError as e:  # the user's location is the message; keep the cause only for unexpected ones
        cause = e.__cause__
        expected = cause is None or isinstance(cause, (TypeError, ValueError, IndexError, KeyError, OverflowError))
        raise HidetScriptError(e.filename, e.lineno, e.message) from (None if expected else cause)
    _CALLEES[f] = list(transpiler.callees)
    stack = _module_stack()
    if stack:
        stack[-1].add(f)
    return f


def _scope(func, caller) -> Dict[str, object]:
    """The Python names a script function may use: its globals, the defining frame's locals, its closure."""
    env = dict(func.__globals__)
    env.update(caller.f_locals)
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                env[name] = cell.cell_contents
            except ValueError:  # an empty cell: the name is assigned later in the enclosing function
                pass
    return env


def macro(func) -> ScriptMacro:
    """Hidet Script statements shared by several script functions (a kernel template's step that two kernels
    take): where a script calls ``func``, its body is translated in place (no C function, no call), its
    parameters bound to the call's arguments (IR variables and tensors, or Python values: compile-time
    constants) and its other names to ``func``'s own scope. A macro has no return value and no ``attr``
    settings; the variables it assigns are its own (a tensor argument is the caller's: writes to its elements
    are the caller's to see)."""
    return ScriptMacro(func, _scope(func, sys._getframe(1)))


class ScriptModule:
    """Collects the script functions defined in its ``with`` block."""

    def __init__(self, name: Optional[str] = None):
        self.name = name
        self.functions: List[Function] = []

    def __enter__(self) -> 'ScriptModule':
        _module_stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _module_stack().remove(self)

    def add(self, f: Function) -> None:
        if f not in self.functions:
            self.functions.append(f)

    def ir_module(self) -> IRModule:
        """The IRModule of the collected functions and the functions they call. Its target is 'cuda' when
        any function is a CUDA one; functions with no kind become 'cuda_device' there, elsewhere
        'cpu_kernel' (returning nothing, exported) or 'cpu_internal'. Kernels are exported by name."""
        if not self.functions:
            raise ValueError('the script module has no functions: define them with @hidet.script inside its block')
        ordered: List[Function] = []

        def visit(f: Function) -> None:
            if f in ordered:
                return
            for callee in _CALLEES.get(f, []):
                visit(callee)
            ordered.append(f)

        for f in self.functions:
            visit(f)
        target = 'cuda' if any((f.kind or '').startswith('cuda') for f in ordered) else 'cpu'
        functions = []
        for f in ordered:
            kind = f.kind
            if kind is None:
                kind = 'cuda_device' if target == 'cuda' else 'cpu_kernel' if f.ret_type is void else 'cpu_internal'
            elif not kind.startswith(target):
                raise ValueError(f"the script module mixes CUDA and CPU functions: '{f.name}' is a {kind} function; "
                                 'a module builds for one target')
            if kind != f.kind:
                f = copy.copy(f)
                f.kind = kind
            functions.append(f)
        names = [f.name for f in functions]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"the script module has several functions named {', '.join(duplicates)}; "
                             'rename them (attr.func_name)')
        exports = [f.name for f in functions if f.kind in ('cuda_kernel', 'cpu_kernel')]
        if not exports:
            raise ValueError('the script module has no kernel to export (cuda_kernel or cpu_kernel functions)')
        return IRModule(self.name or exports[0], target, functions, exports=exports)

    def source(self) -> str:
        """The generated C++ / CUDA source."""
        # (the code generator loads when a script is built, so import hidet stays light)
        from hidet.backend.codegen import generate

        return generate(self.ir_module())

    def build(self):
        """Build and load the module: ``hidet.drivers.build_ir_module(self.ir_module())``."""
        from hidet.drivers.build_module import build_ir_module

        return build_ir_module(self.ir_module())


def script_module(name: Optional[str] = None) -> ScriptModule:
    """A context manager collecting the ``@hidet.script`` functions defined in its block."""
    return ScriptModule(name)


__all__ = ['script', 'script_module', 'ScriptModule', 'HidetScriptError']
