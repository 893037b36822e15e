"""Hidet Script expressions: Python expression nodes → IR expressions or compile-time Python values.

Operations on Python values run in Python (constant folding, meta-programming); with an IR operand they
build IR. Integer ``/`` and ``//`` are C division (truncating), ``%`` the C remainder; ``~a[i, j]`` is the
address of an element, ``p + k`` moves a pointer by ``k`` elements.
"""
from __future__ import annotations

import ast
import builtins
import operator

from hidet.ir.dtypes import DataType, boolean, float32, int32, int64
from hidet.ir.expr import (BufferLoad, Expr, Unary, Var, binary, call, cast, convert, logical_and,
                           logical_not, logical_or, maximum, minimum, promote, select)
from hidet.ir.lowlevel import Address, FunctionCall
from hidet.ir.stmt import Function
from hidet.ir.type import PointerType, TensorType, is_pointer, is_scalar, is_tensor, void

from .constructs import ScriptMacro, as_pointer, cast as lang_cast, describe, pointee, range_spec, scalar_literal

_MISSING = object()

_UNSUPPORTED_EXPRS = {
    ast.Lambda: 'lambda expressions', ast.ListComp: 'list comprehensions', ast.SetComp: 'set comprehensions',
    ast.DictComp: 'dict comprehensions', ast.GeneratorExp: 'generator expressions', ast.Await: "'await'",
    ast.Yield: "'yield'", ast.YieldFrom: "'yield from'",
    ast.NamedExpr: "assignment expressions (':=')", ast.Starred: 'starred expressions', ast.Set: 'sets',
    ast.Dict: 'dicts', ast.Slice: 'slices',
}

_BINOPS = {ast.Add: '+', ast.Sub: '-', ast.Mult: '*', ast.Div: '/', ast.FloorDiv: '//', ast.Mod: '%',
           ast.BitAnd: '&', ast.BitOr: '|', ast.BitXor: '^', ast.LShift: '<<', ast.RShift: '>>', ast.Pow: '**'}
_PY_BINOPS = {'+': operator.add, '-': operator.sub, '*': operator.mul, '/': operator.truediv,
              '//': operator.floordiv, '%': operator.mod, '&': operator.and_, '|': operator.or_, '^': operator.xor,
              '<<': operator.lshift, '>>': operator.rshift, '**': operator.pow}
_CMPOPS = {ast.Lt: '<', ast.LtE: '<=', ast.Gt: '>', ast.GtE: '>=', ast.Eq: '==', ast.NotEq: '!='}
_PY_CMPOPS = {'<': operator.lt, '<=': operator.le, '>': operator.gt, '>=': operator.ge, '==': operator.eq,
              '!=': operator.ne}
_PY_TYPES = {int: int32, float: float32, bool: boolean}


def _is_py_scalar(v) -> bool:
    return isinstance(v, (bool, int, float))


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


class ExprTranslator:
    """The expression half of the Transpiler (hidet/lang/transpiler.py)."""

    def condition(self, cond, node) -> Expr:
        if isinstance(cond, Expr) and (is_scalar(cond) or is_pointer(cond)):
            return cond
        raise self.error(node, f'a condition must be a scalar, got {describe(cond)}')

    def visit_expr(self, node: ast.expr):
        return self.dispatch(node, 'expr', 'expressions', _UNSUPPORTED_EXPRS)

    def expr_Constant(self, node):
        return node.value

    def expr_JoinedStr(self, node):
        """An f-string of compile-time values (e.g. ``attr.func_name = f'mm_{m}x{n}'``)."""
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
                continue
            value = self.visit_expr(v.value)
            if isinstance(value, Expr):
                raise TypeError('f-strings format compile-time Python values, not IR values')
            value = {-1: lambda x: x, ord('r'): repr, ord('s'): str, ord('a'): ascii}[v.conversion](value)
            spec = '' if v.format_spec is None else self.visit_expr(v.format_spec)
            parts.append(format(value, spec))
        return ''.join(parts)

    def expr_Name(self, node):
        return self.lookup(node.id, node)

    def expr_Tuple(self, node):
        return tuple(self.visit_expr(e) for e in node.elts)

    def expr_List(self, node):
        return [self.visit_expr(e) for e in node.elts]

    def expr_Attribute(self, node):
        obj = self.visit_expr(node.value)
        if isinstance(obj, Expr):
            raise TypeError(f"{describe(obj)} has no attribute '{node.attr}'")
        return getattr(obj, node.attr)

    def expr_BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"the operator '{type(node.op).__name__}' is not supported in Hidet Script")
        return self.binop(op, self.visit_expr(node.left), self.visit_expr(node.right))

    def binop(self, op: str, a, b):
        if not isinstance(a, Expr) and not isinstance(b, Expr):
            return _PY_BINOPS[op](a, b)
        if op in ('+', '-') and isinstance(a, Expr) and (is_pointer(a) or is_tensor(a)):
            offset = self.operand(b, op)
            if not offset.dtype.is_integer():
                raise TypeError(f'a pointer moves by integers, not by {describe(b)}')
            return Address(a, offset if op == '+' else -offset)
        if op == '+' and isinstance(b, Expr) and (is_pointer(b) or is_tensor(b)):
            return self.binop('+', b, a)
        x, y = self.operand(a, op), self.operand(b, op)
        if op == '//':
            if x.dtype.is_float() or y.dtype.is_float():
                return call('floor', binary('/', a, b))
            return binary('/', a, b)  # C division (truncates toward zero)
        if op == '**':
            return call('pow', cast(x, promote(x.dtype, float32)) if not x.dtype.is_float() else x, y)
        if op in ('&', '|', '^', '<<', '>>') and (x.dtype.is_float() or y.dtype.is_float()):
            raise TypeError(f"the operator '{op}' needs integer operands")
        return binary(op, a, b)

    @staticmethod
    def operand(x, op: str) -> Expr:
        if isinstance(x, Expr):
            if is_scalar(x):
                return x
            raise TypeError(f"unsupported operand for '{op}': {describe(x)}")
        if _is_py_scalar(x):
            return convert(x)
        raise TypeError(f"unsupported operand for '{op}': {describe(x)}")

    def expr_UnaryOp(self, node):
        if isinstance(node.op, ast.Invert) and isinstance(node.operand, ast.Subscript):
            base = self.visit_expr(node.operand.value)
            if isinstance(base, Expr):  # ~a[i, j]: the address of an element
                buffer, index, _ = self.element(node.operand, base)
                return Address(buffer, index)
        x = self.visit_expr(node.operand)
        if not isinstance(x, Expr):
            return {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
                    ast.Invert: operator.invert}[type(node.op)](x)
        x = self.operand(x, type(node.op).__name__)
        if isinstance(node.op, ast.Not):
            return logical_not(x)
        if isinstance(node.op, ast.USub):
            return -x
        if isinstance(node.op, ast.UAdd):
            return x
        if not (x.dtype.is_integer() or x.dtype.is_boolean()):
            raise TypeError(f"'~' needs an integer operand (or a tensor element, for its address), got {describe(x)}")
        return Unary('~', x)

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        exprs = []
        for v_node in node.values:
            v = self.visit_expr(v_node)
            if not isinstance(v, Expr):
                if bool(v) != is_and:  # False in `and`, True in `or`: decides at compile time
                    return v if not exprs else bool(v)
                continue
            exprs.append(self.condition(v, node))
        if not exprs:
            return is_and
        return logical_and(*exprs) if is_and else logical_or(*exprs)

    def expr_Compare(self, node):
        left = self.visit_expr(node.left)
        conds = []
        for op_node, right_node in zip(node.ops, node.comparators):
            right = self.visit_expr(right_node)
            op = _CMPOPS.get(type(op_node))
            if not isinstance(left, Expr) and not isinstance(right, Expr):
                result = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
                          ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}.get(
                    type(op_node), _PY_CMPOPS.get(op))(left, right)
                if not result:
                    return False
            else:
                if op is None:
                    raise self.error(node, f"'{type(op_node).__name__}' comparisons of IR values are not supported")
                self.operand(left, op), self.operand(right, op)  # type checks
                conds.append(binary(op, left, right))
            left = right
        return logical_and(*conds) if conds else True

    def expr_IfExp(self, node):
        cond = self.visit_expr(node.test)
        if not isinstance(cond, Expr):
            return self.visit_expr(node.body if cond else node.orelse)
        t, f = self.visit_expr(node.body), self.visit_expr(node.orelse)
        if isinstance(t, Expr) and not is_scalar(t) or isinstance(f, Expr) and not is_scalar(f):
            raise TypeError('conditional expressions choose between scalars')
        return select(self.condition(cond, node), self.operand(t, 'if-else') if not isinstance(t, Expr) else t,
                      self.operand(f, 'if-else') if not isinstance(f, Expr) else f)

    def expr_Subscript(self, node):
        base = self.visit_expr(node.value)
        if isinstance(base, Expr):
            buffer, index, dtype = self.element(node, base)
            return BufferLoad(buffer, index, dtype)
        index = self.visit_expr(node.slice)
        if isinstance(index, Expr) and not isinstance(base, DataType):
            if isinstance(base, (list, tuple)) and 0 < len(base) <= 64 and all(_is_py_scalar(v) for v in base) \
                    and is_scalar(index) and index.dtype.is_integer():
                return self.table_lookup(base, index)
            raise TypeError(f'cannot index the Python object {describe(base)} with a run-time value')
        return base[index]

    @staticmethod
    def table_lookup(values, index: Expr) -> Expr:
        """``values[index]`` of a Python list of numbers at a run-time index: a chain of selects."""
        dtype = scalar_literal(values[0]).dtype
        for v in values[1:]:
            dtype = promote(dtype, scalar_literal(v).dtype)
        result: Expr = convert(values[-1], dtype)
        for i in range(len(values) - 2, -1, -1):
            result = select(binary('==', index, i), convert(values[i], dtype), result)
        return result

    def element(self, node: ast.Subscript, base=None):
        """(buffer, flat index, dtype) of ``tensor[i, j]`` / ``pointer[i]``."""
        if base is None:
            base = self.visit_expr(node.value)
        if isinstance(node.slice, ast.Slice) or (isinstance(node.slice, ast.Tuple) and any(
                isinstance(e, ast.Slice) for e in node.slice.elts)):
            raise self.error(node, 'slices are not supported in Hidet Script; index single elements')
        index_nodes = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        indices = [self.visit_expr(i) for i in index_nodes]
        for i in indices:
            if isinstance(i, bool) or not isinstance(i, (int, Expr)) or (isinstance(i, Expr) and not (
                    is_scalar(i) and i.dtype.is_integer())):
                raise TypeError(f'indices must be integers, got {describe(i)}')
        if not isinstance(base, Var):
            raise TypeError('only named tensors and pointers can be indexed; assign this one to a variable first')
        t = base.type
        if isinstance(t, PointerType):
            if isinstance(t.base, PointerType) or t.base is void:
                raise TypeError(f"'{base.name}' is a {t!r} pointer and cannot be indexed; cast it first")
            if len(indices) != 1:
                raise IndexError(f"the pointer '{base.name}' takes one index, got {len(indices)}")
            return base, convert(indices[0]), t.base
        if isinstance(t, TensorType):
            if len(indices) != len(t.shape):
                raise IndexError(f"'{base.name}' has {len(t.shape)} dimensions, indexed with {len(indices)}")
            return base, convert(self.flatten(t.shape, indices)), t.dtype
        raise TypeError(f"'{base.name}' is a {base.dtype} scalar and cannot be indexed")

    @staticmethod
    def flatten(shape, indices):
        """The row-major flat index; int64 arithmetic when the tensor may hold 2^31 elements or more."""
        static = all(isinstance(s, int) for s in shape)
        wide = len(shape) > 1 and (not static or _prod(shape) >= 2 ** 31)
        index = None
        for i, (x, extent) in enumerate(zip(indices, shape)):
            if wide and isinstance(x, Expr) and x.dtype != int64:
                x = cast(x, int64)
            if wide and isinstance(extent, Expr) and extent.dtype != int64:
                extent = cast(extent, int64)
            if i == 0:
                index = x
                continue
            if isinstance(index, int) and isinstance(extent, int):
                index = index * extent
            elif not (isinstance(index, int) and index == 0):
                index = binary('*', index, extent)
            if isinstance(index, int) and isinstance(x, int):
                index = index + x
            elif not (isinstance(x, int) and x == 0):
                index = binary('+', index, x) if not (isinstance(index, int) and index == 0) else x
        return index

    def expr_Call(self, node):
        func = self.visit_expr(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                value = self.visit_expr(a.value)
                if isinstance(value, Expr):
                    raise TypeError(f'cannot unpack {describe(value)}')
                args += list(value)
            else:
                args.append(self.visit_expr(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.error(node, "'**' arguments are not supported in Hidet Script")
            kwargs[k.arg] = self.visit_expr(k.value)
        return self.call(func, args, kwargs, node)

    def call(self, func, args, kwargs, node):
        any_ir = any(isinstance(a, Expr) for a in list(args) + list(kwargs.values()))
        if isinstance(func, Function):
            return self.call_function(func, args, kwargs, node)
        if isinstance(func, ScriptMacro):
            return self.expand_macro(func, args, kwargs, node)
        if func is range:
            return range_spec(*args)
        if isinstance(func, (DataType, PointerType)):
            if len(args) != 1 or kwargs:
                raise TypeError(f'{func!r}(x) converts one value')
            return lang_cast(args[0], func)
        if func is print:
            raise self.error(node, 'print is not supported in Hidet Script')
        if any_ir and func in (builtins.max, builtins.min) and not kwargs:
            values = list(args[0]) if len(args) == 1 else list(args)
            result = values[0]
            for v in values[1:]:
                result = (maximum if func is builtins.max else minimum)(result, v)
            return result
        if any_ir and func is builtins.abs:
            return call('abs', self.operand(args[0], 'abs'))
        if any_ir and func in _PY_TYPES:
            return lang_cast(self.operand(args[0], func.__name__), _PY_TYPES[func])
        if any_ir and func in (len, isinstance, list, tuple, str, dict, set, sorted, sum, enumerate, zip):
            raise TypeError(f'{func.__name__}() of IR values is not supported in Hidet Script')
        return func(*args, **kwargs)

    def call_function(self, f: Function, args, kwargs, node) -> FunctionCall:
        if f.kind == 'cuda_kernel':
            raise self.error(node, f"cannot call the CUDA kernel '{f.name}' from a script function")
        names = [p.name for p in f.params]
        if len(args) > len(names):
            raise self.error(node, f"'{f.name}' takes {len(names)} arguments, got {len(args)}")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in bound:
                raise self.error(node, f"'{f.name}' got an unexpected or repeated argument '{k}'")
            bound[k] = v
        missing = [n for n in names if n not in bound]
        if missing:
            raise self.error(node, f"'{f.name}' is missing the argument(s) {', '.join(missing)}")
        converted = []
        for p in f.params:
            a = bound[p.name]
            if p.type is None:
                if not (_is_py_scalar(a) or (isinstance(a, Expr) and is_scalar(a))):
                    raise self.error(node, f"argument '{p.name}' of '{f.name}' must be a {p.dtype} scalar, "
                                           f'got {describe(a)}')
                converted.append(convert(a, p.dtype) if not isinstance(a, Expr) else a)
            else:
                a = as_pointer(a, f"argument '{p.name}' of '{f.name}'")
                expected = p.type.base if isinstance(p.type, PointerType) else p.type.dtype
                if expected is not void and pointee(a) != expected:
                    raise self.error(node, f"argument '{p.name}' of '{f.name}' must point to {expected} values, "
                                           f'got {describe(a)}')
                converted.append(a)
        if f not in self.callees:
            self.callees.append(f)
        return FunctionCall(f, converted)
