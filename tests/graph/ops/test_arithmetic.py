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
