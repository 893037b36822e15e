"""Elementwise operators against torch, on fresh random inputs, every device and several dtypes."""
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
