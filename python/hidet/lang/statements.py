"""Hidet Script statements: Python statement nodes → IR statements.

Assignments declare a variable at their first assignment in a block (visible to the end of that block, as in
C); annotated assignments declare typed variables or tensors; ``for`` over range/grid/unroll and ``while``
become C loops; ``for`` over a Python sequence and ``if`` on a Python value unroll / choose at compile time.
"""
from __future__ import annotations

import ast
from typing import Dict, List

from hidet.ir.dtypes import DataType, boolean, int32, int64
from hidet.ir.expr import BufferLoad, Call, Constant, Expr, Var, convert, promote
from hidet.ir.lowlevel import FunctionCall, PrimCall
from hidet.ir.stmt import (Assign, Break, Continue, Declare, Evaluate, For, Function, If, Return, Stmt, Store,
                           While)
from hidet.ir.type import PointerType, TensorType, is_scalar, type_of, void

from .attr import AttrNamespace
from .constructs import LoopSpec, TensorDecl, as_pointer, describe, scalar_literal
from .expressions import _BINOPS, _MISSING, _is_py_scalar

_UNSUPPORTED_STMTS = {
    ast.With: "'with' statements", ast.AsyncWith: "'async with' statements", ast.Try: "'try' statements",
    ast.Raise: "'raise' statements", ast.Import: "'import' statements", ast.ImportFrom: "'import' statements",
    ast.Global: "'global' statements", ast.Nonlocal: "'nonlocal' statements",
    ast.FunctionDef: 'nested function definitions', ast.AsyncFunctionDef: 'nested function definitions',
    ast.ClassDef: 'class definitions', ast.Delete: "'del' statements", ast.Assert: "'assert' statements",
    ast.AsyncFor: "'async for' loops",
}
for _name, _text in (('Match', "'match' statements"), ('TryStar', "'try' statements")):
    if hasattr(ast, _name):
        _UNSUPPORTED_STMTS[getattr(ast, _name)] = _text


class StmtTranslator:
    """The statement half of the Transpiler (hidet/lang/transpiler.py)."""

    def visit_stmt(self, node: ast.stmt) -> List[Stmt]:
        return self.dispatch(node, 'stmt', 'statements', _UNSUPPORTED_STMTS)

    def stmt_Pass(self, node) -> List[Stmt]:
        return []

    def stmt_Expr(self, node) -> List[Stmt]:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return []  # docstring
        value = self.visit_expr(node.value)
        if isinstance(value, Stmt):  # IR built by a Python function of the template (meta-programming)
            return [value]
        return [Evaluate(value)] if isinstance(value, (PrimCall, FunctionCall, Call)) else []

    def stmt_Assign(self, node) -> List[Stmt]:
        value = self.visit_expr(node.value)
        out = []
        for target in node.targets:
            out += self.assign(target, value, node)
        return out

    def stmt_AnnAssign(self, node) -> List[Stmt]:
        if not isinstance(node.target, ast.Name):
            raise self.error(node, 'only names can be annotated (`x: f32 = 0.0`)')
        name = node.target.id
        t = self.param_type(node.annotation, _MISSING, f"'{name}'")
        value = None if node.value is None else self.visit_expr(node.value)
        if isinstance(t, DataType):
            if value is not None and not (_is_py_scalar(value) or (isinstance(value, Expr) and is_scalar(value))):
                raise self.error(node, f"cannot initialize the {t} variable '{name}' with {describe(value)}")
            var = Var(name, t)
            init = None if value is None else convert(value, t) if not isinstance(value, Expr) else value
            self.bind(name, var)
            return [Declare(var, init)]
        if isinstance(t, PointerType):
            if value is not None:
                value = as_pointer(value, f"the initial value of '{name}'")
            var = Var(name, t.dtype, type=t)
            self.bind(name, var)
            return [Declare(var, value)]
        # a tensor: a register array, or a view of a pointer
        decl = TensorDecl(t.with_scope('register')) if value is None else TensorDecl(
            t.with_scope('pointer'), as_pointer(value, f"the initial value of '{name}'"))
        if decl.type.scope == 'register':
            decl.type.const_numel()
        return self.declare(name, decl, node)

    def stmt_AugAssign(self, node) -> List[Stmt]:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f'the operator {type(node.op).__name__} is not supported in Hidet Script')
        value = self.visit_expr(node.value)
        target = node.target
        if isinstance(target, ast.Name):
            current = self.lookup(target.id, target)
            if not isinstance(current, Var):
                if isinstance(current, Expr):
                    raise self.error(node, f"cannot assign to '{target.id}'")
                self.bind(target.id, self.binop(op, current, value))
                return []
            return self.assign(target, self.binop(op, current, value), node)
        if isinstance(target, ast.Subscript):
            buffer, index, dtype = self.element(target)
            return [Store(buffer, index, self.store_value(self.binop(op, BufferLoad(buffer, index, dtype), value),
                                                          dtype))]
        raise self.error(node, f'cannot assign to {type(target).__name__} expressions')

    def assign(self, target, value, node) -> List[Stmt]:
        if isinstance(target, ast.Name):
            return self.assign_name(target.id, value, node)
        if isinstance(target, ast.Subscript):
            base = self.visit_expr(target.value)
            if not isinstance(base, Expr):
                raise self.error(node, 'cannot assign into Python objects in Hidet Script')
            buffer, index, dtype = self.element(target, base)
            return [Store(buffer, index, self.store_value(value, dtype))]
        if isinstance(target, ast.Attribute):
            obj = self.visit_expr(target.value)
            if isinstance(obj, AttrNamespace):
                key = obj.key(target.attr)
                self.attrs[key] = value
                self.attr_lines[key] = node.lineno
                if key == 'func_kind' and value not in Function.SCRIPT_KINDS:
                    raise self.error(node, f'attr.func_kind must be one of {Function.SCRIPT_KINDS}, got {value!r}')
                return []
            raise self.error(node, f"cannot assign to the attribute '{target.attr}' in Hidet Script")
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, Expr) or not isinstance(value, (tuple, list)):
                raise self.error(node, f'cannot unpack {describe(value)}')
            if len(value) != len(target.elts):
                raise self.error(node, f'cannot unpack {len(value)} values into {len(target.elts)} targets')
            out, temps = [], []
            for v in value:  # evaluate every value before assigning any target (a, b = b, a)
                if isinstance(v, Expr) and not isinstance(v, Constant) and is_scalar(v):
                    tmp = Var('tmp', v.dtype)
                    out.append(Declare(tmp, v))
                    v = tmp
                temps.append(v)
            for t, v in zip(target.elts, temps):
                out += self.assign(t, v, node)
            return out
        raise self.error(node, f'cannot assign to {type(target).__name__} expressions')

    def assign_name(self, name: str, value, node) -> List[Stmt]:
        var = self.lookup_ir_var(name)
        if var is None:
            return self.declare(name, value, node)
        t = var.type
        if isinstance(t, TensorType) and t.scope != 'pointer':
            raise self.error(node, f"cannot assign to the {t.scope} tensor '{name}'")
        if isinstance(value, TensorDecl):
            raise self.error(node, f"'{name}' is already a variable; declare the tensor under a new name")
        if t is None:
            if not (_is_py_scalar(value) or (isinstance(value, Expr) and is_scalar(value))):
                raise self.error(node, f"cannot assign {describe(value)} to the {var.dtype} variable '{name}'")
            return [Assign(var, convert(value, var.dtype) if not isinstance(value, Expr) else value)]
        value = as_pointer(value, f"the value assigned to the pointer '{name}'")
        return [Assign(var, value)]

    def declare(self, name: str, value, node) -> List[Stmt]:
        if isinstance(value, TensorDecl):
            var = Var(name, value.type.dtype, type=value.type)
            self.bind(name, var)
            return [Declare(var, value.init)]
        if isinstance(value, Expr):
            t = type_of(value)
            if t is void:
                raise self.error(node, f"cannot assign to '{name}': the call returns nothing")
            if isinstance(t, DataType):
                var = Var(name, t)
            elif isinstance(t, PointerType):
                var = Var(name, t.dtype, type=t)
            else:  # another name for a tensor
                var = Var(name, t.dtype, type=TensorType(t.dtype, t.shape, 'pointer'))
            self.bind(name, var)
            return [Declare(var, value)]
        if _is_py_scalar(value):
            c = scalar_literal(value)
            var = Var(name, c.dtype)
            self.bind(name, var)
            return [Declare(var, c)]
        self.bind(name, value)  # a compile-time Python value
        return []

    @staticmethod
    def store_value(value, dtype: DataType) -> Expr:
        if _is_py_scalar(value):
            return convert(value, dtype)
        if isinstance(value, Expr) and is_scalar(value):
            return value
        raise TypeError(f'cannot store {describe(value)} into a {dtype} element')

    def stmt_If(self, node) -> List[Stmt]:
        cond = self.visit_expr(node.test)
        if not isinstance(cond, Expr):
            body = node.body if cond else node.orelse  # compile-time condition
            return [self.block(body)] if body else []
        cond = self.condition(cond, node)
        then = self.block(node.body)
        otherwise = self.block(node.orelse) if node.orelse else None
        return [If(cond, then, otherwise)]

    def stmt_While(self, node) -> List[Stmt]:
        if node.orelse:
            raise self.error(node, "'else' clauses of loops are not supported in Hidet Script")
        cond = self.visit_expr(node.test)
        if not isinstance(cond, Expr):
            if not cond:
                return []
            cond = Constant(True, boolean)
        self.loops.append('ir')
        try:
            body = self.block(node.body)
        finally:
            self.loops.pop()
        return [While(self.condition(cond, node), body)]

    def stmt_Break(self, node) -> List[Stmt]:
        return [self.loop_jump(node, Break())]

    def stmt_Continue(self, node) -> List[Stmt]:
        return [self.loop_jump(node, Continue())]

    def loop_jump(self, node, stmt):
        word = 'break' if isinstance(stmt, Break) else 'continue'
        if not self.loops:
            raise self.error(node, f"'{word}' outside a loop")
        if self.loops[-1] != 'ir':
            raise self.error(node, f"'{word}' in a loop over a Python sequence (unrolled at compile time) is not "
                                   'supported')
        return stmt

    def stmt_Return(self, node) -> List[Stmt]:
        value = None if node.value is None else self.visit_expr(node.value)
        if value is not None and not isinstance(value, Expr) and not _is_py_scalar(value):
            raise self.error(node, f'cannot return {describe(value)}')
        stmt = Return(None)
        self.returns.append((stmt, node, value))
        return [stmt]

    def stmt_For(self, node) -> List[Stmt]:
        if node.orelse:
            raise self.error(node, "'else' clauses of loops are not supported in Hidet Script")
        it = self.visit_expr(node.iter)
        if isinstance(it, LoopSpec):
            return self.ir_loop(node, it)
        if isinstance(it, Expr):
            raise self.error(node, f'cannot iterate over {describe(it)}; use range(...), grid(...) or unroll(...)')
        try:
            values = list(it)
        except TypeError:
            raise self.error(node, f'cannot iterate over {describe(it)}') from None
        out = []
        self.loops.append('python')
        try:
            for v in values:  # unrolled at compile time: the loop variables are Python values
                bindings: Dict[str, object] = {}
                self.unpack(node.target, v, bindings, node)
                out.append(self.block(node.body, bindings))
        finally:
            self.loops.pop()
        return out

    def unpack(self, target, value, bindings: Dict[str, object], node) -> None:
        if isinstance(target, ast.Name):
            bindings[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and not isinstance(value, Expr):
            values = list(value)
            if len(values) != len(target.elts):
                raise self.error(node, f'cannot unpack {len(values)} values into {len(target.elts)} targets')
            for t, v in zip(target.elts, values):
                self.unpack(t, v, bindings, node)
        else:
            raise self.error(node, 'the loop variable must be a name or a tuple of names')

    def ir_loop(self, node, spec: LoopSpec) -> List[Stmt]:
        target = node.target
        names = [target] if isinstance(target, ast.Name) else list(target.elts) if isinstance(
            target, (ast.Tuple, ast.List)) else None
        if names is None or not all(isinstance(n, ast.Name) for n in names):
            raise self.error(node, 'a loop variable must be a name (or a tuple of names for grid(...))')
        if len(names) != len(spec.dims):
            raise self.error(node, f'the loop has {len(spec.dims)} dimensions but {len(names)} loop variables')
        loop_vars = []
        for n, (start, stop, step) in zip(names, spec.dims):
            dtype = None
            for v in (start, stop, step):
                if isinstance(v, Expr):
                    dtype = v.dtype if dtype is None else promote(dtype, v.dtype)
            if dtype is None:
                dtype = int32 if all(-2 ** 31 <= v < 2 ** 31 for v in (start, stop, start + step)) else int64
            loop_vars.append(Var(n.id, dtype))
        self.loops.append('ir')
        try:
            body = self.block(node.body, {n.id: v for n, v in zip(names, loop_vars)})
        finally:
            self.loops.pop()
        for var, (start, stop, step), kind in reversed(list(zip(loop_vars, spec.dims, spec.kinds))):
            body = For(var, convert(start, var.dtype), convert(stop, var.dtype), convert(step, var.dtype), body, kind)
        return [body]
