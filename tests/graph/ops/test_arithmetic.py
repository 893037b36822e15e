"""Elementwise operators against torch, on fresh random inputs, every device and several dtypes."""
import math

import pytest
import torch
import torch.nn.functional as F

import hidet
from hidet import ops

FLOAT_TOL = {'float32': (1e-5, 1e-5), 'float16': (2e-3, 2e-3), 'bfloat16': (1.6e-2, 1.6e-2), 'float64': (1e-12, 1e-12)}


def check(actual: hidet.Tensor, expected: torch.Tensor):
    got = actual.torch()
    assert got.dtype == expected.dtype and tuple(got.shape) == tuple(expected.shape), (got.dtype, got.shape)
    if expected.dtype.is_floating_point:
        rtol, atol = FLOAT_TOL[str(expected.dtype).split('.')[-1]]
        torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, expected)


def rand(shape, dtype, device, positive=False):
    tdtype = getattr(torch, dtype)
    if tdtype.is_floating_point:
        x = torch.randn(shape, dtype=torch.float32)
        x = x.abs() + 0.1 if positive else x
        return x.to(tdtype).to(device)
    if tdtype == torch.bool:
        return (torch.rand(shape) > 0.5).to(device)
    return torch.randint(1 if positive else -20, 20, shape, dtype=tdtype).to(device)


UNARY = [
    ('neg', ops.neg, torch.neg, False), ('abs', ops.abs, torch.abs, False), ('exp', ops.exp, torch.exp, False),
    ('log', ops.log, torch.log, True), ('sqrt', ops.sqrt, torch.sqrt, True), ('rsqrt', ops.rsqrt, torch.rsqrt, True),
    ('sin', ops.sin, torch.sin, False), ('cos', ops.cos, torch.cos, False), ('tanh', ops.tanh, torch.tanh, False),
    ('erf', ops.erf, torch.erf, False), ('relu', ops.relu, torch.relu, False),
    ('sigmoid', ops.sigmoid, torch.sigmoid, False), ('silu', ops.silu, F.silu, False),
    ('gelu', ops.gelu, F.gelu, False), ('gelu_tanh', lambda x: ops.gelu(x, 'tanh'), lambda x: F.gelu(x, approximate='tanh'), False),
    ('hardswish', ops.hardswish, F.hardswish, False), ('leaky_relu', lambda x: ops.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2), False),
    ('floor', ops.floor, torch.floor, False), ('round', ops.round, torch.round, False),
    ('clamp', lambda x: ops.clamp(x, -0.5, 0.7), lambda x: torch.clamp(x, -0.5, 0.7), False),
]


@pytest.mark.parametrize('dtype', ['float32', 'float16', 'bfloat16'])
@pytest.mark.parametrize('name,hidet_fn,torch_fn,positive', UNARY, ids=[u[0] for u in UNARY])
def test_unary_float(name, hidet_fn, torch_fn, positive, dtype, device):
    x = rand([3, 33], dtype, device, positive) * 3
    check(hidet_fn(hidet.from_torch(x)), torch_fn(x))


@pytest.mark.parametrize('dtype', ['float32', 'float16'])
def test_activations_far_into_both_tails(dtype, device):
    """sigmoid, silu and GELU-tanh where e^-x overflows and 1 + tanh(z) cancels (the GPU computes them from its
    approximate exp2 and reciprocal: hidet::sigmoid, hidet::one_plus_tanh)."""
    x = torch.cat([torch.linspace(-60, 60, 481), torch.tensor([-1e4, 1e4, 0.0, -0.0, 1e-6, -1e-6])])
    x = x.to(getattr(torch, dtype)).to(device)
    h = hidet.from_torch(x)
    check(ops.sigmoid(h), torch.sigmoid(x))
    check(ops.silu(h), F.silu(x))
    check(ops.gelu(h, 'tanh'), F.gelu(x, approximate='tanh'))
    k = math.sqrt(2.0 / math.pi)  # GPT-2's written-out form: 1 + tanh(z) found inside the fused expression
    check(0.5 * h * (1.0 + ops.tanh(k * (h + 0.044715 * ops.pow(h, 3.0)))),
          0.5 * x * (1.0 + torch.tanh(k * (x + 0.044715 * torch.pow(x, 3.0)))))


@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_16bit_tanh_and_erf_stay_within_their_rounding(dtype, device):
    """A 16-bit tanh or erf (and the GELUs built on them) is the GPU's tanh.approx or a fit on it (APPROX_16BIT),
    within 1e-4 of the exact value before rounding (erf: 5.5e-5 + tanh.approx's 1.1e-5; a GELU half |x| times
    erf's). Rounded, a result moves to the neighbouring 16-bit value only where the exact one lies within that
    error of a rounding midpoint, so against float64 no element is more than twice it further off than torch's
    correctly rounded result."""
    x = torch.linspace(-8, 8, 8193).to(getattr(torch, dtype)).to(device)
    h = hidet.from_torch(x)
    for ours, ref in ((ops.tanh(h), torch.tanh), (ops.erf(h), torch.erf), (ops.gelu(h), F.gelu),
                      (ops.gelu(h, 'tanh'), lambda t: F.gelu(t, approximate='tanh'))):
        exact = ref(x.double())
        got, rounded = ours.torch().double(), ref(x).double()
        excess = ((got - exact).abs() - (rounded - exact).abs()).max().item()
        assert excess <= 2e-4, (ref, excess)


@pytest.mark.parametrize('dtype', ['int32', 'int64', 'int8'])
def test_unary_integer(dtype, device):
    x = rand([4, 7], dtype, device)
    h = hidet.from_torch(x)
    check(ops.neg(h), torch.neg(x))
    check(ops.abs(h), torch.abs(x))
    check(ops.relu(h), torch.relu(x))
    check(ops.exp(h), torch.exp(x))  # integer math gives float32
    check(ops.clamp(h, -3, 5), torch.clamp(x, -3, 5))


BINARY = [('add', ops.add, torch.add), ('subtract', ops.subtract, torch.sub), ('multiply', ops.multiply, torch.mul),
          ('divide', ops.divide, torch.div), ('maximum', ops.maximum, torch.maximum),
          ('minimum', ops.minimum, torch.minimum), ('equal', ops.equal, torch.eq), ('less', ops.less, torch.lt),
          ('greater_equal', ops.greater_equal, torch.ge), ('not_equal', ops.not_equal, torch.ne)]
SHAPES = [([3, 4], [3, 4]), ([2, 3, 4], [4]), ([5, 1, 3], [1, 4, 1]), ([1], [2, 3]), ([], [3])]


@pytest.mark.parametrize('name,hidet_fn,torch_fn', BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize('shapes', SHAPES, ids=str)
@pytest.mark.parametrize('dtype', ['float32', 'float16', 'int32'])
def test_binary_broadcast(name, hidet_fn, torch_fn, shapes, dtype, device):
    x, y = rand(shapes[0], dtype, device), rand(shapes[1], dtype, device, positive=True)
    check(hidet_fn(hidet.from_torch(x), hidet.from_torch(y)), torch_fn(x, y))


def test_binary_mixed_dtypes_and_scalars(device):
    x, y = rand([4, 5], 'float16', device), rand([5], 'float32', device)
    i = rand([4, 5], 'int64', device)
    hx, hy, hi = hidet.from_torch(x), hidet.from_torch(y), hidet.from_torch(i)
    check(hx + hy, x + y)
    check(hi * hx, i * x)
    check(hx * 2.5, x * 2.5)
    check(3 - hi, 3 - i)
    check(hi / 4, i / 4)
    check(hi + 1.5, i + 1.5)
    check(hx ** 2, x ** 2)
    check(hx > 0.1, x > 0.1)
    check(-hx, -x)


def test_zero_dim_tensors_promote_as_torch_does(device):
    """A 0-d tensor beside a tensor with dimensions does not raise the result's dtype within its category
    (float32 x * float64 0-d: float32; float16 x compared with a float32 0-d: in float16), one of a higher
    category does (int64 x + float64 0-d: float64)."""
    x, h = rand([4, 5], 'float32', device), rand([4, 5], 'float16', device)
    i = rand([4, 5], 'int64', device)
    s64, s32, n = (torch.tensor(v, dtype=d, device=device) for v, d in ((2.5, torch.float64),
                                                                         (0.1, torch.float32), (3, torch.int32)))
    hx, hh, hi = hidet.from_torch(x), hidet.from_torch(h), hidet.from_torch(i)
    h64, h32, hn = hidet.from_torch(s64), hidet.from_torch(s32), hidet.from_torch(n)
    for got, want in ((hx * h64, x * s64), (h64 - hx, s64 - x), (hh + h32, h + s32), (hh > h32, h > s32),
                      (hi + h64, i + s64), (hi * hn, i * n), (hx * hn, x * n), (h64 * h32, s64 * s32),
                      (ops.where(hx > 0, hx, h64), torch.where(x > 0, x, s64))):
        assert got.dtype.name == str(want.dtype).replace('torch.', ''), (got.dtype, want.dtype)
        check(got, want)


def test_logical_and_where(device):
    c, x, y = rand([3, 4], 'bool', device), rand([3, 4], 'float32', device), rand([4], 'float32', device)
    hc, hx, hy = hidet.from_torch(c), hidet.from_torch(x), hidet.from_torch(y)
    check(ops.where(hc, hx, hy), torch.where(c, x, y))
    check(ops.logical_and(hc, hx > 0), torch.logical_and(c, x > 0))
    check(ops.logical_or(hc, hx > 0), torch.logical_or(c, x > 0))
    check(ops.logical_not(hc), torch.logical_not(c))


@pytest.mark.parametrize('src,dst', [('float32', 'float16'), ('float16', 'float32'), ('float32', 'int32'),
                                     ('int64', 'bfloat16'), ('float32', 'bool'), ('bool', 'float32')])
def test_cast(src, dst, device):
    x = rand([6, 5], src, device) * (7 if src != 'bool' else 1)
    check(ops.cast(hidet.from_torch(x), dst), x.to(getattr(torch, dst)))


def test_nan_propagates_like_torch(device):
    x = torch.tensor([float('nan'), 1.0, -2.0], device=device)
    y = torch.tensor([0.0, float('nan'), 3.0], device=device)
    hx, hy = hidet.from_torch(x), hidet.from_torch(y)
    check(ops.maximum(hx, hy), torch.maximum(x, y))
    check(ops.relu(hx), torch.relu(x))


def test_shape_errors_name_the_op_and_shapes():
    with pytest.raises(ValueError, match=r'add: shapes \(2, 3\) and \(4,\) cannot be broadcast'):
        ops.add(hidet.randn([2, 3]), hidet.randn([4]))


@pytest.mark.cuda
def test_inputs_on_different_devices_are_refused():
    with pytest.raises(ValueError, match=r'add: inputs are on different devices \(cpu, cuda:0\)'):
        ops.add(hidet.randn([2]), hidet.randn([2], device='cuda'))


def test_zero_size_tensors(device):
    x = rand([0, 3], 'float32', device)
    check(ops.exp(hidet.from_torch(x)), torch.exp(x))


@pytest.mark.parametrize('dtype', ['int32', 'int64', 'int8', 'uint8'])
def test_pow_integer(dtype, device):
    # int ** int stays int (wrapping on overflow); negative tensor exponents give 0 or +-1, as torch
    tdtype = getattr(torch, dtype)
    low = 0 if dtype == 'uint8' else -3
    x = torch.randint(low, 6, [5, 7], dtype=tdtype, device=device)
    y = torch.randint(0 if dtype == 'uint8' else -2, 9, [5, 7], dtype=tdtype, device=device)
    hx, hy = hidet.from_torch(x), hidet.from_torch(y)
    check(hx ** hy, x ** y)
    check(ops.pow(hx, 3), x ** 3)
    check(2 ** hy, 2 ** y)
    check(hx ** 0.5, x ** 0.5)  # a float exponent: float32
    with pytest.raises(ValueError, match='negative integer powers'):
        hx ** -1


@pytest.mark.parametrize('exponent', [1, 2, 3, 3.0, 0.5, -1, -2, 2.5])
def test_pow_float_by_a_scalar(exponent, device):
    # small exponents are products (as torch's pow_tensor_scalar), not a pow() call: GELU-tanh's x ** 3
    x = torch.randn(4, 33, device=device) * 3
    if exponent in (0.5, 2.5):
        x = x.abs()
    task = ops.pow(hidet.symbol([4, 33], 'float32', device), exponent).trace[0].task
    assert ('pow' in str(task.outputs[0].definition.value)) == (exponent == 2.5)
    check(ops.pow(hidet.from_torch(x), exponent), x ** exponent)


def test_pow_integer_edge_cases(device):
    x = torch.tensor([2, 3, -1, 1, 0, -2, 7, -1], dtype=torch.int32, device=device)
    y = torch.tensor([-1, 2, -3, -5, -1, -2, 31, -4], dtype=torch.int32, device=device)
    check(hidet.from_torch(x) ** hidet.from_torch(y), x ** y)
    b = torch.tensor([True, False], device=device)
    check(hidet.from_torch(b) ** 2, b ** 2)
    with pytest.raises(TypeError, match='bool'):
        hidet.from_torch(b) ** hidet.from_torch(b)


def test_float16_conversions_are_exact_everywhere(device):
    # every float16 bit pattern to float32 and back, and float32 values around the float16 boundaries
    # (subnormals, rounding ties, overflow to inf, nan): the CPU's branch-free conversions against torch
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    halves = bits.view(torch.float16).to(device)
    got = ops.cast(hidet.from_torch(halves), 'float32').torch()
    assert torch.equal(got.isnan(), halves.float().isnan())
    assert torch.equal(got.nan_to_num(), halves.float().nan_to_num())
    edges = torch.tensor([65504.0, 65519.99, 65520.0, 65536.0, 6e-8, 2.98e-8, 2.99e-8, 5.96e-8, 8.9e-8,
                          6.1e-5, 6.103e-5, 6.1035e-5, 1.00048828125, 1.0009765625 + 2 ** -11, 0.0, -0.0,
                          float('inf'), float('-inf'), 1e-30, -3e-8], device=device)
    values = torch.cat([edges, torch.randn(4000, device=device) * 10.0 ** torch.randint(-9, 6, [4000], device=device)])
    for dst in ('float16', 'bfloat16'):
        got = ops.cast(hidet.from_torch(values), dst).torch()
        assert torch.equal(got.float().nan_to_num(), values.to(getattr(torch, dst)).float().nan_to_num()), dst
    nan = ops.cast(hidet.from_torch(torch.tensor([float('nan')], device=device)), 'float16').torch()
    assert nan.isnan().all()


LIBM = [  # (op, input range): the C math library's functions on their domains
    ('tan', (-1.2, 1.2)), ('asin', (-0.95, 0.95)), ('acos', (-0.95, 0.95)), ('atan', (-4, 4)), ('sinh', (-3, 3)),
    ('cosh', (-3, 3)), ('asinh', (-4, 4)), ('acosh', (1.05, 5)), ('atanh', (-0.9, 0.9)), ('exp2', (-4, 4)),
    ('expm1', (-1e-3, 1e-3)), ('log2', (0.1, 9)), ('log10', (0.1, 9)), ('log1p', (-1e-4, 1e-4)), ('erfc', (-2, 2)),
    ('trunc', (-9, 9))]


@pytest.mark.parametrize('dtype', ['float32', 'float16', 'bfloat16'])
@pytest.mark.parametrize('name,bounds', LIBM, ids=[m[0] for m in LIBM])
def test_math_library_functions(name, bounds, dtype, device):
    lo, hi = bounds
    x = (torch.rand([3, 33]) * (hi - lo) + lo).to(getattr(torch, dtype)).to(device)
    check(getattr(ops, name)(hidet.from_torch(x)), getattr(torch, name)(x))


def test_special_values(device):
    x = torch.tensor([0.0, -0.0, float('inf'), -float('inf'), float('nan'), 1.5, -2.5], device=device)
    h = hidet.from_torch(x)
    for name in ('isinf', 'isfinite', 'isnan', 'trunc', 'exp2', 'expm1', 'log1p', 'atan'):
        check(getattr(ops, name)(h), getattr(torch, name)(x))
    check(ops.copysign(1.0, h), torch.copysign(torch.ones_like(x), x))  # the sign of -0.0 and of NaN
    check(ops.logaddexp(h, h), torch.logaddexp(x, x))  # equal infinities give themselves
    i = rand([6], 'int32', device)
    check(ops.isinf(hidet.from_torch(i)), torch.isinf(i))
    check(ops.isfinite(hidet.from_torch(i)), torch.isfinite(i))


TWO_ARG = ['atan2', 'hypot', 'copysign', 'fmod', 'remainder', 'floor_divide', 'logaddexp']


@pytest.mark.parametrize('dtype', ['float32', 'float16'])
@pytest.mark.parametrize('name', TWO_ARG)
def test_two_argument_math(name, dtype, device):
    x, y = rand([4, 1, 5], dtype, device) * 4, rand([3, 1], dtype, device)
    check(getattr(ops, name)(hidet.from_torch(x), hidet.from_torch(y)), getattr(torch, name)(x, y))
    check(getattr(ops, name)(hidet.from_torch(x), 0.75), getattr(torch, name)(x, torch.tensor(0.75, dtype=x.dtype,
                                                                                           device=device)))


@pytest.mark.parametrize('dtype', ['int32', 'int64', 'int8', 'uint8'])
def test_integer_division_and_bits(dtype, device):
    x, y = rand([5, 6], dtype, device, positive=dtype == 'uint8'), rand([6], dtype, device, positive=True)
    if dtype != 'uint8':
        y = y * torch.tensor([1, -1, 1, -1, 2, -3], dtype=y.dtype, device=device)
    hx, hy = hidet.from_torch(x), hidet.from_torch(y)
    check(ops.floor_divide(hx, hy), torch.floor_divide(x, y))
    check(ops.remainder(hx, hy), torch.remainder(x, y))
    check(ops.fmod(hx, hy), torch.fmod(x, y))
    check(ops.trunc_divide(hx, hy), torch.div(x, y, rounding_mode='trunc'))
    check(ops.bitwise_and(hx, hy), torch.bitwise_and(x, y))
    check(ops.bitwise_or(hx, 6), torch.bitwise_or(x, 6))
    check(ops.bitwise_xor(hx, hy), torch.bitwise_xor(x, y))
    check(ops.bitwise_not(hx), torch.bitwise_not(x))
    # a divisor of 0 gives 0 instead of a trap (torch raises); INT_MIN / -1 wraps as in torch
    zero = ops.floor_divide(hx, 0).torch()
    assert (zero == 0).all()
    if dtype in ('int32', 'int64'):
        low = torch.tensor([torch.iinfo(getattr(torch, dtype)).min, 7], dtype=x.dtype, device=device)
        check(ops.floor_divide(hidet.from_torch(low), -1), torch.floor_divide(low, -1))


def test_bitwise_ops_of_bools_are_logical(device):
    a, b = rand([7], 'bool', device), rand([7], 'bool', device)
    ha, hb = hidet.from_torch(a), hidet.from_torch(b)
    check(ops.bitwise_and(ha, hb), a & b)
    check(ops.bitwise_or(ha, hb), a | b)
    check(ops.bitwise_xor(ha, hb), a ^ b)
    check(ops.bitwise_not(ha), ~a)
    with pytest.raises(TypeError, match='floating-point'):
        ops.bitwise_and(hidet.from_torch(rand([3], 'float32', device)), 1)


def test_math_reductions(device):
    x = rand([3, 5, 4], 'float32', device) * 30
    x[0, :, 1] = -float('inf')
    h = hidet.from_torch(x)
    check(ops.logsumexp(h, [0, 2]), torch.logsumexp(x, [0, 2]))
    check(ops.logsumexp(h, 1, keepdim=True), torch.logsumexp(x, 1, keepdim=True))
    f16 = x.half()
    check(ops.logsumexp(hidet.from_torch(f16), 2), torch.logsumexp(f16, 2))
    n = rand([6, 5], 'float32', device)
    n[n > 1.0] = float('nan')
    n[:, 2] = float('nan')
    check(ops.nansum(hidet.from_torch(n), 0), torch.nansum(n, 0))
    check(ops.nanmean(hidet.from_torch(n), 0), torch.nanmean(n, 0))
    check(ops.count_nonzero(hidet.from_torch(n > 0), 1), torch.count_nonzero(n > 0, 1))
