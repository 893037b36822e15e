"""Hidet Script on the CPU: Python constructs (loops, ifs, while, break/continue, calls, declarations,
tuple assignment), meta-programming from the enclosing scope, scalar and tensor parameters, pointers and
views, and calling built modules with torch and hidet tensors.

This file evaluates annotations eagerly (no ``from __future__ import annotations``): shapes in
annotations are Python values, and tensors with run-time shapes are views of pointers."""
import numpy as np
import pytest
import torch

import hidet
from hidet.lang import (attr, boolean, cast, f16, f32, f64, grid, i32, i64, register_tensor, u8, unroll, view)
from hidet.lang import math as hm


def build(*functions):
    """A module of ``functions`` (already translated), built."""
    module = hidet.script_module()
    for f in functions:
        module.add(f)
    return module.build()


def test_loops_and_branches():
    with hidet.script_module() as module:
        @hidet.script
        def loops(out: i32[8]):
            attr.func_kind = 'cpu_kernel'
            s = 0
            for i in range(5):  # 0..4
                s += i
            out[0] = s
            s = 0
            for i in range(2, 10, 3):  # 2, 5, 8
                s += i
            out[1] = s
            s = 0
            for i in range(10, 0, -2):  # 10, 8, 6, 4, 2
                s = s * 2 + i
            out[2] = s
            s = 0
            for i, j in grid(3, 4):
                s += i * 10 + j
            out[3] = s
            s = 0
            for i in unroll(range(4)):
                if i % 2 == 0:
                    continue
                s += i
            out[4] = s
            k = 0
            while True:
                k += 1
                if k >= 7:
                    break
            out[5] = k
            x = 17
            if x < 10:
                out[6] = 1
            elif x < 20:
                out[6] = 2
            else:
                out[6] = 3
            out[7] = 100 if x > 3 and not x == 4 or x < 0 else -100
    out = torch.zeros(8, dtype=torch.int32)
    module.build()(out)
    expected = [10, 15, 0, sum(i * 10 + j for i in range(3) for j in range(4)), 4, 7, 2, 100]
    s = 0
    for i in range(10, 0, -2):
        s = s * 2 + i
    expected[2] = s
    assert out.tolist() == expected


def test_calls_returns_and_declarations():
    with hidet.script_module() as module:
        @hidet.script
        def clamp(x: f32, lo: f32, hi: f32) -> f32:
            if x < lo:
                return lo
            if x > hi:
                return hi
            return x

        @hidet.script
        def gcd(a: i64, b: i64) -> i64:
            while b != 0:
                a, b = b, a % b  # tuple assignment evaluates every value first
            return a

        @hidet.script
        def fill(p: ~f32, n: i32, value: f32):  # no kind: a void CPU function is exported as cpu_kernel
            for i in range(n):
                p[i] = value

        @hidet.script
        def main(x: f32[6], y: f32[6], g: i64[1], a: i64, b: i64):
            attr.func_kind = 'cpu_kernel'
            for i in range(6):
                y[i] = clamp(x[i], lo=-0.5, hi=0.5)
            g[0] = gcd(a, b)
            acc: f64 = 0.0
            total: i32
            total = 0
            for i in range(6):
                acc += x[i]
                total += 1
            fill(~y[4], 2, cast(acc / total, f32))

    built = module.build()
    assert set(built.kernels) == {'main', 'fill'}
    x = torch.tensor([-2.0, -0.25, 0.0, 0.3, 1.0, 5.0])
    y = torch.empty(6)
    g = torch.zeros(1, dtype=torch.int64)
    built['main'](x, y, g, 2 ** 40 * 3 * 7, 2 ** 38 * 7 * 11)
    assert y[:4].tolist() == pytest.approx([-0.5, -0.25, 0.0, 0.3])
    assert y[4:].tolist() == pytest.approx([x.double().mean().item()] * 2)
    assert g.item() == np.gcd(2 ** 40 * 3 * 7, 2 ** 38 * 7 * 11)
    z = torch.zeros(5)
    built.fill(z, 3, 1.5)
    assert z.tolist() == [1.5, 1.5, 1.5, 0.0, 0.0]


def make_scale_rows(rows: int, cols: int, factors, use_bias: bool):
    """Meta-programming: sizes, a Python list and a flag are compile-time constants of the kernel."""
    with hidet.script_module() as module:
        @hidet.script
        def scale_rows(x: f32[rows, cols], y: f32[rows, cols], bias: f32):
            attr.func_kind = 'cpu_kernel'
            attr.func_name = f'scale_rows_{rows}x{cols}'
            for i, j in grid(rows, cols, attrs='p.'):  # the outer loop is OpenMP-parallel
                v = x[i, j] * factors[i % len(factors)]
                if use_bias:  # decided at compile time
                    v += bias
                y[i, j] = v
    return module


@pytest.mark.parametrize('use_bias', [False, True])
def test_meta_programming(use_bias):
    module = make_scale_rows(5, 7, [1.0, -2.0, 3.0], use_bias)
    source = module.source()
    body = source.split('void scale_rows_5x7(')[1].split('HIDET_KERNEL_EXPORT')[0]
    assert body.count('bias_') == (2 if use_bias else 1)  # the parameter, and its use only with use_bias
    assert '#pragma omp parallel for' in source
    built = module.build()
    x = torch.randn(5, 7)
    y = torch.empty(5, 7)
    built['scale_rows_5x7'](x, y, 0.5)
    factors = torch.tensor([1.0, -2.0, 3.0, 1.0, -2.0]).reshape(5, 1)
    torch.testing.assert_close(y, x * factors + (0.5 if use_bias else 0.0))


def test_unrolled_python_loops_and_register_tensors():
    taps = (0.25, 0.5, 0.25)
    with hidet.script_module() as module:
        @hidet.script
        def smooth(x: ~f32, y: ~f32, n: i32):
            attr.func_kind = 'cpu_kernel'
            window = register_tensor(f32, [3])
            for i in range(1, n - 1):
                for t, w in enumerate(taps):  # unrolled at compile time: t and w are Python values
                    window[t] = x[i - 1 + t] * w
                y[i] = window[0] + window[1] + window[2]
            acc: f32[2]  # an annotated tensor without value: a register (local) array
            acc[0] = x[0]
            acc[1] = x[n - 1]
            y[0] = acc[0]
            y[n - 1] = acc[1]
    x = torch.randn(20)
    y = torch.empty(20)
    module.build()(x, y, 20)
    ref = x.clone()
    ref[1:-1] = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
    torch.testing.assert_close(y, ref)


def _accumulate_macro(scale):
    """A macro of another scope (as a template module shares one between its kernels): ``scale`` is its own
    compile-time constant."""
    @hidet.lang.macro
    def accumulate(acc, x, i, twice):
        v = x[i] * scale  # (v is the macro's own variable)
        acc[0] += v
        if twice:  # a Python value: decided at translation
            acc[0] += v
    return accumulate


def test_macros_are_translated_in_place():
    """A macro's body runs where a script calls it, in place (no C function): its parameters bound to the call's
    IR tensors and scalars or Python values, its other names from its own scope."""
    accumulate = _accumulate_macro(2.0)
    with hidet.script_module() as module:
        @hidet.script
        def sums(x: f32[4], out: f32[2]):
            attr.func_kind = 'cpu_kernel'
            acc = register_tensor(f32, [1])
            acc[0] = 0.0
            for i in range(4):
                accumulate(acc, x, i, False)
            out[0] = acc[0]
            acc[0] = 0.0
            accumulate(acc, x, 1, True)
            v = 1.0  # the caller's v: the macro's assignments leave it alone
            out[1] = acc[0] + v
    source = module.source()
    assert 'accumulate' not in source
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    out = torch.empty(2)
    module.build()(x, out)
    torch.testing.assert_close(out, torch.tensor([20.0, 9.0]))


def test_dynamic_shapes_views_and_pointers():
    with hidet.script_module() as module:
        @hidet.script
        def transpose(src: ~f32, dst: ~f32, m: i32, n: i32):
            attr.func_kind = 'cpu_kernel'
            a = view(src, f32[m, n])
            b = view(dst, f32, [n, m])
            for i in range(m):
                row = ~a[i, 0]  # a pointer to the row
                for j in range(n):
                    b[j, i] = row[j]
            last = dst + (m * n - 1)  # pointer arithmetic
            last[0] = -last[0]
    x = torch.randn(6, 9)
    y = torch.empty(9, 6)
    module.build()(x, y, 6, 9)
    ref = x.t().contiguous()
    ref[-1, -1] = -ref[-1, -1]
    torch.testing.assert_close(y, ref)


def test_scalar_types_and_math():
    with hidet.script_module() as module:
        @hidet.script
        def scalars(out: f64[8], flags: u8[2], a: f64, b: i64, c: boolean, d: f32, e: i32):
            attr.func_kind = 'cpu_kernel'
            out[0] = a
            out[1] = b
            out[2] = 1.0 if c else 0.0
            out[3] = d
            out[4] = e // 4 + e % 4 * 100  # C division and remainder
            out[5] = hm.exp(d) + hm.sqrt(a) + max(d, 2.0) + min(e, 3) + abs(e) + hm.pow(d, 2)
            out[6] = f32(a)  # rounds to float32
            out[7] = cast(cast(d, f16), f64)  # rounds to float16
            flags[0] = c and e > 0
            flags[1] = 255
    out = torch.zeros(8, dtype=torch.float64)
    flags = torch.zeros(2, dtype=torch.uint8)
    a, b, d, e = 2.0 ** 0.5 * 1e10, -(2 ** 50) - 3, -1.2345678, -23
    module.build()(out, flags, a, b, True, d, e)
    d32 = float(np.float32(d))
    expected = [a, float(b), 1.0, d32, -5 + -3 * 100,
                np.exp(np.float32(d)) + np.sqrt(a) + 2.0 + e + abs(e) + d32 ** 2,
                float(np.float32(a)), float(np.float16(d))]
    assert out.tolist() == pytest.approx(expected, rel=1e-6)
    assert flags.tolist() == [0, 255]


def test_float16_tensors_and_hidet_tensors():
    with hidet.script_module() as module:
        @hidet.script
        def axpy(x: f16[16], y: f16[16], alpha: f16):
            attr.func_kind = 'cpu_kernel'
            for i in range(16):
                y[i] = alpha * x[i] + y[i]  # computed in float32, rounded when stored
    built = module.build()
    x = torch.randn(16).half()
    y = torch.randn(16).half()
    ref = (0.5 * x.float() + y.float()).half()
    built(x, y, 0.5)
    torch.testing.assert_close(y, ref)
    hx, hy = hidet.from_torch(x), hidet.from_torch(torch.zeros(16).half())
    built(hx, hy, 2.0)
    torch.testing.assert_close(hy.torch(), (2 * x.float()).half())


def test_argument_checks():
    with hidet.script_module() as module:
        @hidet.script
        def k(x: f32[4], n: i32):
            attr.func_kind = 'cpu_kernel'
            x[0] = n
    built = module.build()
    with pytest.raises(TypeError, match='takes 2 arguments'):
        built(torch.zeros(4))
    with pytest.raises(TypeError, match='must hold float32'):
        built(torch.zeros(4, dtype=torch.float64), 1)
    with pytest.raises(OverflowError, match='does not fit in int32'):
        built(torch.zeros(4), 2 ** 40)
    with pytest.raises(TypeError, match='must be an integer'):
        built(torch.zeros(4), 1.5)
    x = torch.zeros(4)
    built(x, 7)
    assert x[0].item() == 7


def test_ir_module_and_drivers():
    with hidet.script_module('my_module') as module:
        @hidet.script
        def twice(x: f32) -> f32:
            return x * 2

        @hidet.script
        def apply(x: f32[3]):
            for i in range(3):
                x[i] = twice(x[i])
    ir_module = module.ir_module()
    assert ir_module.target == 'cpu' and ir_module.name == 'my_module'
    assert ir_module.exports == ['apply']
    assert [f.kind for f in ir_module.functions] == ['cpu_internal', 'cpu_kernel']
    built = hidet.drivers.build_ir_module(ir_module)
    x = torch.tensor([1.0, 2.0, 3.0])
    built(x)
    assert x.tolist() == [2.0, 4.0, 6.0]
