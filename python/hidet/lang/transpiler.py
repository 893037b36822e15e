"""Hidet Script's transpiler: the AST of a Python function (``inspect.getsource`` + ``ast``) → an IR
``Function`` (hidet/ir/stmt.py). Statements are translated by hidet/lang/statements.py, expressions by
hidet/lang/expressions.py.

Names evaluate to IR variables (parameters, variables assigned in the function, loop variables) or, failing
that, to Python values of the function's scope (closure, the defining frame's locals, globals, builtins):
those are compile-time constants, so Python code around a script function is meta-programming. Python
``if`` conditions and loops over Python lists are evaluated at compile time; ``for … in range/grid/unroll``
and ``while`` become C loops. Anything unsupported raises ``HidetScriptError`` naming file and line.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from typing import Dict, List, Optional

from hidet.ir.dtypes import DataType
from hidet.ir.expr import BufferLoad, Expr, SymbolVar, Var, convert
from hidet.ir.lowlevel import FunctionCall, PrimCall
from hidet.ir.stmt import For, Function, Seq, Stmt
from hidet.ir.type import PointerType, TensorMapType, TensorType, is_pointer, is_scalar, is_tensor, type_of, void

from .attr import NAMES as ATTR_NAMES
from .constructs import describe, scalar_literal
from .errors import HidetScriptError
from .expressions import _MISSING, _PY_TYPES, ExprTranslator, _is_py_scalar
from .statements import StmtTranslator
from .walk import iter_exprs, iter_stmt_exprs, iter_stmts

RESERVED_NAMES = ('hidet_kernel_abi_version', 'hidet_kernel_last_error')

__all__ = ['Transpiler', 'HidetScriptError']


class Transpiler(StmtTranslator, ExprTranslator):
    """Translates one Python function; ``env`` holds the Python names it may use (compile-time values)."""

    def __init__(self, func, env: Dict[str, object]):
        self.func = func
        self.env = env
        try:
            lines, first = inspect.getsourcelines(func)
        except (OSError, TypeError) as e:
            code = func.__code__
            raise HidetScriptError(code.co_filename, code.co_firstlineno,
                                   f'cannot read the source of {func.__qualname__}: {e}') from None
        self.filename = func.__code__.co_filename
        self.line_offset = first - 1
        tree = ast.parse(textwrap.dedent(''.join(lines)))
        self.fdef = tree.body[0]
        if not isinstance(self.fdef, ast.FunctionDef):
            raise self.error(self.fdef, 'hidet.script decorates function definitions')
        self.scopes: List[Dict[str, object]] = []
        self.closed_names = set()  # names declared in blocks that have ended, for a better message
        self.loops: List[str] = []  # 'ir' or 'python' for each enclosing loop
        self.attrs: Dict[str, object] = {}
        self.attr_lines: Dict[str, int] = {}
        self.returns: List[tuple] = []  # (Return stmt, ast node, value)
        self.callees: List[Function] = []
        self.params: List[Var] = []

    def error(self, node, message: str) -> HidetScriptError:
        return HidetScriptError(self.filename, getattr(node, 'lineno', self.fdef.lineno) + self.line_offset, message)

    def dispatch(self, node, prefix: str, kind: str, unsupported: Dict[type, str]):
        """``self.<prefix>_<NodeType>(node)``; a node type Hidet Script lacks, or any failure inside, is a
        HidetScriptError at the user's line."""
        if type(node) in unsupported:
            raise self.error(node, f'{unsupported[type(node)]} are not supported in Hidet Script')
        method = getattr(self, f'{prefix}_{type(node).__name__}', None)
        if method is None:
            raise self.error(node, f'{type(node).__name__} {kind} are not supported in Hidet Script')
        try:
            return method(node)
        except HidetScriptError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure is reported at the user's line
            raise self.error(node, f'{type(e).__name__}: {e}') from e

    def lookup(self, name: str, node):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.env:
            return self.env[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        hint = ''
        if name in self.closed_names:
            hint = (' (it was assigned inside a block that has ended: variables are local to the block that '
                    f'first assigns them, as in C; declare it before the block, e.g. `{name}: i32 = 0`)')
        raise self.error(node, f"name '{name}' is not defined{hint}")

    def lookup_ir_var(self, name: str) -> Optional[Var]:
        for scope in reversed(self.scopes):
            if name in scope:
                v = scope[name]
                return v if isinstance(v, Var) else None
        return None

    def bind(self, name: str, value) -> None:
        self.scopes[-1][name] = value

    def block(self, body: List[ast.stmt], bindings: Dict[str, object] = None) -> Stmt:
        self.scopes.append(dict(bindings or {}))
        try:
            stmts = []
            for node in body:
                stmts += self.visit_stmt(node)
        finally:
            closed = self.scopes.pop()
            self.closed_names.update(n for n, v in closed.items() if isinstance(v, Var))
        return stmts[0] if len(stmts) == 1 else Seq(stmts)

    def expand_macro(self, m, args, kwargs, node) -> Stmt:
        """The statements of macro ``m``'s body (a ScriptMacro), its parameters bound to the call's arguments."""
        sub = Transpiler(m.func, m.env)
        a = sub.fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise sub.error(sub.fdef, 'a macro takes plain positional parameters (no *args, **kwargs, keyword-only, '
                                      'positional-only or default ones)')
        names = [p.arg for p in a.args]
        if len(args) > len(names) or set(kwargs) - set(names[len(args):]) or \
                len(args) + len(kwargs) != len(names):
            raise self.error(node, f"the macro '{m.func.__name__}' takes the arguments ({', '.join(names)})")
        bindings = dict(zip(names, args))
        bindings.update(kwargs)
        body = sub.block(sub.fdef.body, bindings)
        if sub.returns or sub.attrs:
            raise sub.error(sub.fdef, 'a macro is statements: no return and no attr settings')
        for f in sub.callees:
            if f not in self.callees:
                self.callees.append(f)
        return body

    def translate(self) -> Function:
        fdef = self.fdef
        args = fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            raise self.error(fdef, 'script functions take plain positional parameters (no *args, **kwargs, '
                                   'keyword-only or positional-only ones)')
        if args.defaults:
            raise self.error(fdef, 'parameters of script functions cannot have default values')
        self.scopes.append({})
        self.declare_params(args.args)
        ret_annotation = None
        if fdef.returns is not None:
            ret_annotation = self.param_type(fdef.returns, self.func.__annotations__.get('return', _MISSING), 'return')
        body = self.block(fdef.body)
        self.scopes.pop()
        return self.finish(body, ret_annotation)

    def param_type(self, node, evaluated, what: str):
        value = evaluated
        if value is _MISSING or isinstance(value, str):
            value = self.visit_expr(node if value is _MISSING else ast.parse(value, mode='eval').body)
        if value is None and what == 'return':
            return void
        if isinstance(value, type) and value in _PY_TYPES:
            return _PY_TYPES[value]
        if isinstance(value, (DataType, PointerType, TensorType)):
            return value
        if isinstance(value, TensorMapType) and what.startswith('parameter'):
            return value
        raise self.error(node, f'the annotation of {what} must be a hidet type (e.g. f32, ~f32 or f32[m, n]), '
                               f'got {describe(value)}')

    def declare_params(self, params: List[ast.arg]) -> None:
        annotations = self.func.__annotations__
        pending = []
        for a in params:
            if a.annotation is None:
                raise self.error(a, f"parameter '{a.arg}' needs a type annotation (e.g. `{a.arg}: f32`)")
            pending.append(a)
        declared: Dict[str, Var] = {}
        # each parameter is in scope once its type is known: scalars for tensor shapes (``a: f32[m, n], m: i32``),
        # tensors for tensor maps (``tmap: tensor_map(a, ...)``), whatever the order
        for attempt in range(3):
            for a in list(pending):
                try:
                    t = self.param_type(a.annotation, annotations.get(a.arg, _MISSING), f"parameter '{a.arg}'")
                except HidetScriptError:
                    if attempt == 2:
                        raise
                    continue
                pending.remove(a)
                declared[a.arg] = self.param_var(a, t)
                self.bind(a.arg, declared[a.arg])
        self.params.extend(declared[a.arg] for a in params)

    def param_var(self, a: ast.arg, t) -> Var:
        if isinstance(t, DataType):
            if t is void:
                raise self.error(a, f"parameter '{a.arg}' cannot be void")
            return Var(a.arg, t)
        if isinstance(t, (PointerType, TensorMapType)):
            return Var(a.arg, t.dtype, type=t)
        for s in t.shape:
            if not (isinstance(s, int) or (isinstance(s, Expr) and is_scalar(s) and s.dtype.is_integer())):
                raise self.error(a, f"the shape of parameter '{a.arg}' must hold integers or expressions of "
                                    f'integer parameters, got {describe(s)}')
        return Var(a.arg, t.dtype, type=t.with_scope('pointer'))

    def finish(self, body: Stmt, ret_annotation) -> Function:
        fdef = self.fdef
        # return type: the annotation, else the first returned value's type
        ret = ret_annotation
        if ret is None:
            values = [v for _, _, v in self.returns if v is not None]
            first = values[0] if values else None
            ret = void if first is None else type_of(first) if isinstance(first, Expr) else scalar_literal(first).dtype
        for stmt, node, value in self.returns:
            if value is None:
                if ret is not void:
                    raise self.error(node, f'this function returns {ret!r}: `return` needs a value')
            elif ret is void:
                raise self.error(node, 'this function returns nothing (its annotation is -> None) but returns a value')
            elif isinstance(ret, DataType):
                if not (_is_py_scalar(value) or (isinstance(value, Expr) and is_scalar(value))):
                    raise self.error(node, f'cannot return {describe(value)} from a function returning {ret}')
                stmt.value = convert(value, ret) if not isinstance(value, Expr) else value
            else:
                if not (isinstance(value, Expr) and (is_pointer(value) or is_tensor(value))):
                    raise self.error(node, f'cannot return {describe(value)} from a function returning {ret!r}')
                stmt.value = value
        if isinstance(ret, TensorType):
            ret = PointerType(ret.dtype)

        kind = self.attrs.get('func_kind')
        launch = [k for k in ATTR_NAMES if k.startswith('cuda_') and k in self.attrs]  # (a kernel's attributes)
        uses_cuda = self.uses_cuda(body)
        if kind is None:
            kind = 'cuda_kernel' if launch else 'cuda_device' if uses_cuda else None
        name = self.attrs.get('func_name', fdef.name)
        if not isinstance(name, str) or not name.isidentifier() or name in RESERVED_NAMES:
            raise self.error(fdef, f'invalid function name {name!r}')
        if kind is not None and kind not in Function.SCRIPT_KINDS:
            raise self.error(self.attr_node('func_kind'), f'attr.func_kind must be one of {Function.SCRIPT_KINDS}, '
                                                          f'got {kind!r}')
        if kind is not None and kind.startswith('cpu') and uses_cuda:
            raise self.error(fdef, f"the CPU function '{name}' uses CUDA intrinsics or shared memory")
        if launch and kind != 'cuda_kernel':
            raise self.error(self.attr_node(launch[0]), f'attr.{launch[0]} is for cuda_kernel functions, '
                                                        f'not {kind}')
        if kind in ('cuda_kernel', 'cpu_kernel') and ret is not void:
            raise self.error(fdef, f"the kernel '{name}' cannot return a value (kernels are launched through the "
                                   "kernel ABI); make it attr.func_kind = 'cuda_device' or 'cpu_internal'")
        grid, block, smem = (1,), (1,), 0
        if kind == 'cuda_kernel':
            for k in ('cuda_grid_dim', 'cuda_block_dim'):
                if k not in self.attrs:
                    raise self.error(fdef, f"the CUDA kernel '{name}' needs attr.{k}")
            grid = self.launch_dims('cuda_grid_dim')
            block = self.launch_dims('cuda_block_dim')
            smem = self.launch_dims('cuda_dynamic_smem_bytes', count=1)[0] if 'cuda_dynamic_smem_bytes' in self.attrs \
                else 0
        if kind is not None and kind.startswith('cuda'):
            parallel = [s for s in iter_stmts(body) if isinstance(s, For) and s.kind == 'parallel']
            if parallel:
                raise self.error(fdef, "parallel loops (grid(..., attrs='p')) are for CPU functions")
        f = Function(name, self.params, body, kind, grid=grid, block=block, ret_type=ret, dynamic_smem=smem)
        if 'cuda_cluster_dim' in self.attrs:
            cluster = self.launch_dims('cuda_cluster_dim')
            if not all(isinstance(c, int) and c >= 1 for c in cluster):
                raise self.error(self.attr_node('cuda_cluster_dim'), 'attr.cuda_cluster_dim takes positive ints, got '
                                                                     f'{cluster}')
            f.cluster = cluster
        if 'cuda_max_registers' in self.attrs:
            regs = self.attrs['cuda_max_registers']
            if not isinstance(regs, int) or isinstance(regs, bool) or not 24 <= regs <= 255:
                raise self.error(self.attr_node('cuda_max_registers'), 'attr.cuda_max_registers takes an int from 24 '
                                                                       f'to 255 (registers a thread), got {regs!r}')
            f.max_registers = regs
        return f

    def attr_node(self, key: str):
        return ast.Pass(lineno=self.attr_lines.get(key, self.fdef.lineno))

    def launch_dims(self, key: str, count: int = 3) -> tuple:
        value = self.attrs[key]
        node = self.attr_node(key)
        values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        if not 1 <= len(values) <= count:
            raise self.error(node, f'attr.{key} takes 1 to {count} values, got {len(values)}')
        params = {id(p) for p in self.params}
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, Expr)) or (isinstance(v, Expr) and not (
                    is_scalar(v) and v.dtype.is_integer())):
                raise self.error(node, f'attr.{key} must hold integers or integer expressions of scalar parameters, '
                                       f'got {describe(v)}')
            if isinstance(v, Expr):
                for e in iter_exprs(v):
                    # (symbolic dimensions: scalars the builder of a template appends to the parameters)
                    if isinstance(e, Var) and id(e) not in params and not isinstance(e, SymbolVar):
                        raise self.error(node, f"attr.{key} may only use the function's scalar parameters, "
                                               f"not '{e.name}'")
                    if isinstance(e, (PrimCall, BufferLoad, FunctionCall)):
                        raise self.error(node, f'attr.{key} may only use scalar parameters and constants')
        return values

    @staticmethod
    def uses_cuda(body: Stmt) -> bool:
        for e in iter_stmt_exprs(body):
            if isinstance(e, PrimCall) and e.name.startswith('cuda_'):
                return True
            if isinstance(e, Var) and isinstance(e.type, TensorType) and e.type.scope == 'shared':
                return True
            if isinstance(e, FunctionCall) and (e.func.kind or '').startswith('cuda'):
                return True
        return False
