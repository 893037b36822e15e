"""hidet.ir.evaluate: a task's compute definition evaluated with numpy gives its CPU kernel's results, bit for bit
where the arithmetic is exact (copies, transposes, casts, integer arithmetic, one rounding of a 16-bit float)
and within floating-point rounding otherwise (sums in another order, math functions)."""
import numpy as np
import pytest

import hidet.ir.evaluate as ev
from hidet.drivers.build_task import build_task
from hidet.graph.tensor import _empty, _from_host_values, _host_values
from hidet.ir.compute import compute, reduce, tensor_input
from hidet.ir.dtypes import bfloat16, data_type, f32_to_bf16
from hidet.ir.expr import Call, call, cast, logical_and, maximum, select
from hidet.ir.task import Task
from hidet.runtime.device import Device


def _rand(shape, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    dtype = data_type(dtype)
    values = rng.standard_normal(shape) * scale
    if dtype == bfloat16:
        return f32_to_bf16(values.astype(np.float32))
    if dtype.is_integer():
        return np.round(values).astype(dtype.np_dtype)
    if dtype.is_boolean():
        return values > 0
    return values.astype(dtype.np_dtype)


def _kernel(task: Task, arrays):
    """The task's outputs by its CPU kernel (the auto-scheduler's), as host arrays."""
    cpu = Device('cpu')
    inputs = [_from_host_values(a, t.dtype, cpu) for a, t in zip(arrays, task.inputs)]
    outputs = [_empty([int(s) for s in t.shape], t.dtype, cpu) for t in task.outputs]
    build_task(task, 'cpu')['launch'](*inputs, *outputs, dims=[])
    return [_host_values(t) for t in outputs]


def _check(task: Task, arrays, exact: bool, rtol=1e-6, atol=1e-6):
    expected, actual = _kernel(task, arrays), ev.evaluate(task, arrays)
    for out, e, a in zip(task.outputs, expected, actual):
        assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, a.dtype, e.shape, e.dtype)
        if exact:
            np.testing.assert_array_equal(a, e)
        else:
            to_f = ev.to_compute
            np.testing.assert_allclose(to_f(a, out.dtype), to_f(e, out.dtype), rtol=rtol, atol=atol, equal_nan=True)


def _task(name, inputs, outputs):
    return Task(name, inputs, outputs)


# ------------------------------------------------------------------ exact: copies, index arithmetic, casts
def test_transpose_and_reshape_with_index_arithmetic():
    a = tensor_input('a', 'float32', [3, 4, 5])
    t = compute('t', [5, 3, 4], lambda i, j, k: a[j, k, i])
    flat = compute('flat', [6, 10], lambda i, j: t[(i * 10 + j) // 12, ((i * 10 + j) // 4) % 3, (i * 10 + j) % 4])
    _check(_task('transpose_reshape', [a], [flat]), [_rand([3, 4, 5], 'float32')], exact=True)


def test_broadcasting_and_a_select_reading_out_of_bounds():
    """A pad: the select's discarded branch reads outside the input (clamped on the host, never read by the
    kernel); a [4, 1] operand broadcasts along the columns."""
    a, b = tensor_input('a', 'float32', [4, 6]), tensor_input('b', 'float32', [4, 1])
    out = compute('out', [4, 9], lambda i, j: select(logical_and(j >= 2, j < 8), a[i, j - 2] * b[i, 0], -1.0))
    _check(_task('pad_scale', [a, b], [out]), [_rand([4, 6], 'float32'), _rand([4, 1], 'float32', 1)], exact=True)


@pytest.mark.parametrize('src,dst', [('float32', 'float16'), ('float32', 'bfloat16'), ('float16', 'float32'),
                                     ('bfloat16', 'float16'), ('float32', 'int32'), ('float32', 'bool'),
                                     ('int64', 'float32'), ('float64', 'float16'), ('int32', 'int8')])
def test_casts(src, dst):
    a = tensor_input('a', src, [7, 9])
    out = compute('out', [7, 9], lambda i, j: cast(a[i, j], dst))
    values = _rand([7, 9], src, scale=100.0 if data_type(src).is_integer() or dst.startswith('int') else 3.0)
    if src == 'float32' and dst in ('float16', 'bfloat16'):  # (float → int past the range: undefined in C)
        values[0, :4] = [np.inf, -np.inf, 70000.0, 1e-6]  # (past float16's range, below its normals)
    _check(_task(f'cast_{src}_{dst}', [a], [out]), [values], exact=True)


@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_16_bit_floats_are_computed_in_float32_and_rounded_once(dtype):
    """``a * b / c`` of float16 operands: float32 arithmetic, one rounding when stored (as the kernels);
    an explicit cast to the 16-bit type rounds there."""
    a, b, c = (tensor_input(n, dtype, [5, 8]) for n in 'abc')
    out = compute('out', [5, 8], lambda i, j: a[i, j] * b[i, j] / c[i, j])
    rounded = compute('rounded', [5, 8], lambda i, j: cast(cast(a[i, j] * 3.1, dtype), 'float32') * b[i, j])
    values = [_rand([5, 8], dtype, seed) for seed in range(3)]
    _check(_task(f'arith_{dtype}', [a, b, c], [out, rounded]), values, exact=True)


def test_integer_division_and_remainder_truncate_as_in_c():
    a, b = tensor_input('a', 'int64', [6, 5]), tensor_input('b', 'int32', [6, 5])
    q = compute('q', [6, 5], lambda i, j: a[i, j] / b[i, j])
    r = compute('r', [6, 5], lambda i, j: a[i, j] % b[i, j])
    p = compute('p', [6, 5], lambda i, j: call('ipow', a[i, j], cast(b[i, j], 'int64') % 4))
    bs = _rand([6, 5], 'int32', 1, scale=5.0)
    bs[bs == 0] = 3
    _check(_task('int_divmod', [a, b], [q, r, p]), [_rand([6, 5], 'int64', scale=40.0), bs], exact=True)


def test_max_and_isnan_propagate_nan():
    a, b = tensor_input('a', 'float32', [4]), tensor_input('b', 'float32', [4])
    m = compute('m', [4], lambda i: maximum(a[i], b[i]))
    n = compute('n', [4], lambda i: call('isnan', a[i], dtype='bool'))
    values = [np.array([1, np.nan, 3, -np.inf], np.float32), np.array([np.nan, 2, 1, -1], np.float32)]
    _check(_task('nan', [a, b], [m, n]), values, exact=True)


# ------------------------------------------------------------------ reductions
@pytest.mark.parametrize('kind', ['sum', 'mean', 'max', 'min', 'prod', 'any', 'all'])
def test_reductions(kind):
    a = tensor_input('a', 'float32', [3, 40, 5])
    out = compute('out', [3, 5], lambda i, k: reduce([40], lambda r: a[i, r, k], kind))
    values = _rand([3, 40, 5], 'float32')
    if kind in ('any', 'all'):
        values[values < 0.5] = 0
    if kind == 'prod':
        values = 1 + 0.05 * values
    _check(_task(f'reduce_{kind}', [a], [out]), [values], exact=kind in ('max', 'min', 'any', 'all'))


@pytest.mark.parametrize('dtype', ['float16', 'int32', 'bool'])
def test_reductions_accumulate_in_their_acc_dtype(dtype):
    a = tensor_input('a', dtype, [4, 300])
    out = compute('out', [4], lambda i: reduce([300], lambda r: a[i, r], 'sum'))
    _check(_task(f'sum_{dtype}', [a], [out]), [_rand([4, 300], dtype, scale=30.0 if dtype == 'int32' else 1.0)],
           exact=dtype != 'float16', rtol=1e-3, atol=1e-2)


def test_nested_reductions_and_inlined_tensors():
    """Layer norm: a mean read inside the variance's sum and by the output, through computed tensors."""
    x = tensor_input('x', 'float32', [6, 32])
    mean = compute('mean', [6], lambda i: reduce([32], lambda r: x[i, r], 'mean'))
    var = compute('var', [6], lambda i: reduce([32], lambda r: (x[i, r] - mean[i]) * (x[i, r] - mean[i]), 'mean'))
    out = compute('out', [6, 32], lambda i, j: (x[i, j] - mean[i]) * call('rsqrt', var[i] + 1e-5))
    _check(_task('layer_norm', [x], [out]), [_rand([6, 32], 'float32')], exact=False, rtol=1e-5, atol=1e-5)


def test_a_convolution_window():
    x, w = tensor_input('x', 'float32', [1, 3, 9, 9]), tensor_input('w', 'float32', [4, 3, 3, 3])

    def value(n, k, p, q):
        def term(c, r, s):
            inside = logical_and(p + r >= 1, p + r < 10, q + s >= 1, q + s < 10)
            return select(inside, x[n, c, p + r - 1, q + s - 1], 0.0) * w[k, c, r, s]
        return reduce([3, 3, 3], term, 'sum')

    out = compute('out', [1, 4, 9, 9], value)
    _check(_task('conv', [x, w], [out]), [_rand([1, 3, 9, 9], 'float32'), _rand([4, 3, 3, 3], 'float32', 1)],
           exact=False, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('func', ['exp', 'tanh', 'erf', 'rsqrt', 'log1p', 'round'])
def test_math_functions(func):
    a = tensor_input('a', 'float32', [50])
    out = compute('out', [50], lambda i: call(func, a[i] * a[i] if func in ('rsqrt', 'log1p') else a[i]))
    _check(_task(f'math_{func}', [a], [out]), [_rand([50], 'float32', scale=2.0)], exact=func == 'round',
           rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ chunks, limits, refusals
def test_grids_past_the_array_limit_are_evaluated_in_chunks(monkeypatch):
    a = tensor_input('a', 'float32', [7, 11, 13])
    t = compute('t', [13, 7, 11], lambda i, j, k: a[j, k, i] * 2.0)
    s = compute('s', [7, 13], lambda i, k: reduce([11], lambda r: a[i, r, k], 'max'))
    task, values = _task('chunks', [a], [t, s]), [_rand([7, 11, 13], 'float32')]
    whole = ev.evaluate(task, values)
    for limit in (1, 5, 30, 100):
        monkeypatch.setattr(ev, 'MAX_ELEMENTS', limit)
        for w, c in zip(whole, ev.evaluate(task, values)):
            np.testing.assert_array_equal(c, w)


def test_what_the_evaluator_refuses(monkeypatch):
    a = tensor_input('a', 'float32', [64, 64])
    unknown = compute('u', [64], lambda i: Call('hidet_warp_reduce_sum', [a[i, 0]], a.dtype))
    assert 'hidet_warp_reduce_sum' in ev.evaluation_problem(_task('unknown', [a], [unknown]))
    mm = compute('mm', [64, 64], lambda i, j: reduce([64], lambda r: a[i, r] * a[r, j], 'sum'))
    assert ev.evaluation_problem(_task('mm', [a], [mm])) is None
    monkeypatch.setattr(ev, 'MAX_WORK', 64 * 64 * 63)
    assert 'too much work' in ev.evaluation_problem(_task('mm', [a], [mm]))
    with pytest.raises(ev.NotEvaluable):
        ev.evaluate(_task('mm', [a], [mm]), [_rand([64, 64], 'float32')])


def test_symbolic_dimensions_take_their_values():
    from hidet.ir.expr import symbol_var

    n = symbol_var('n')
    a = tensor_input('a', 'float32', [n, 3])
    out = compute('out', [3, n], lambda i, j: a[j, i] + 1.0)
    task = _task('sym', [a], [out])
    assert 'n' in ev.evaluation_problem(task)
    values = _rand([5, 3], 'float32')
    np.testing.assert_array_equal(ev.evaluate(task, [values], {'n': 5})[0], values.T + 1)
