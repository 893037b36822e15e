"""Reductions and matmul against torch."""
import pytest
import torch

import hidet
from hidet import ops

from .test_arithmetic import check, rand

AXES = [None, 0, 1, -1, (0, 2), (1, 2)]


@pytest.mark.parametrize('axes', AXES, ids=str)
@pytest.mark.parametrize('keepdim', [False, True])
@pytest.mark.parametrize('dtype', ['float32', 'float16'])
def test_reductions(axes, keepdim, dtype, device):
    x = rand([4, 70, 9], dtype, device)
    h = hidet.from_torch(x)
    dims = list(range(3)) if axes is None else axes
    # sums against float64 references: any float32 summation order differs from another by more than
    # a float32 ulp of a sum that cancels
    check(ops.sum(h, axes, keepdim), torch.sum(x.double(), dims, keepdim).to(x.dtype))
    check(ops.mean(h, axes, keepdim), torch.mean(x.double(), dims, keepdim).to(x.dtype))
    check(ops.max(h, axes, keepdim), torch.amax(x, dims, keepdim))
    check(ops.min(h, axes, keepdim), torch.amin(x, dims, keepdim))


def test_float32_sums_one_thread_computes_add_partial_sums(device):
    # a sum of 4,000 positive float32 values: one accumulator for all of them drifts by up to ~1.5e-6 of the sum
    # (rounding at the total's magnitude on every addition); partial sums of 64 keep it within ~2.5e-7
    torch.manual_seed(0)
    for _ in range(4):
        x = (torch.rand(4000) + 1).to(device)
        got, expected = ops.sum(hidet.from_torch(x), None).torch().double(), x.double().sum()
        assert abs(got - expected).item() / expected.item() < 5e-7


def test_large_reduction_uses_block_path(device):
    x = rand([3, 5000], 'float32', device)
    h = hidet.from_torch(x)
    check(ops.sum(h, 1), torch.sum(x.double(), 1).float())
    check(ops.max(h, 1), torch.amax(x, 1))
    check(ops.prod(hidet.from_torch(x[:, :20] * 0.5 + 1), 1), torch.prod(x[:, :20] * 0.5 + 1, 1))


def test_integer_and_bool_reductions(device):
    x = rand([6, 300], 'int32', device)
    h = hidet.from_torch(x)
    check(ops.sum(h, 1), torch.sum(x, 1))  # int64, as torch
    check(ops.max(h, 0), torch.amax(x, 0))
    b = x > 0
    check(ops.any(hidet.from_torch(b), 1), torch.any(b, 1))
    check(ops.all(hidet.from_torch(b), 1), torch.all(b, 1))


def test_reduce_axis_errors():
    with pytest.raises(IndexError, match='axis 3 is out of range'):
        ops.sum(hidet.randn([2, 3]), 3)
    with pytest.raises(ValueError, match='twice'):
        ops.sum(hidet.randn([2, 3]), [1, -1])


MATMUL_SHAPES = [([5, 7], [7, 3]), ([2, 5, 7], [7, 3]), ([2, 1, 5, 7], [3, 7, 4]), ([7], [7, 3]), ([5, 7], [7]),
                 ([7], [7]), ([1, 300], [300, 2])]


@pytest.mark.parametrize('shapes', MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize('dtype', ['float32', 'float16'])
def test_matmul(shapes, dtype, device):
    a, b = rand(shapes[0], dtype, device), rand(shapes[1], dtype, device)
    expected = torch.matmul(a.double(), b.double()).to(a.dtype)
    actual = ops.matmul(hidet.from_torch(a), hidet.from_torch(b)).torch()
    assert actual.shape == expected.shape
    tol = 1e-4 if dtype == 'float32' else 1e-2
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def test_matmul_shape_error():
    with pytest.raises(ValueError, match=r'matmul: shapes \(2, 3\) and \(4, 5\) do not match'):
        ops.matmul(hidet.randn([2, 3]), hidet.randn([4, 5]))


def test_quick_start(device):
    a = hidet.randn([2, 3], device=device)
    b = hidet.randn([3, 4], device=device)
    c = hidet.randn([4], device=device)
    d = hidet.ops.matmul(a, b) + c
    assert str(d).startswith(f"Tensor(shape=(2, 4), dtype='float32', device='{hidet.device(device)}')")
    torch.testing.assert_close(d.torch(), a.torch() @ b.torch() + c.torch(), rtol=1e-5, atol=1e-5)


def test_empty_inputs_still_fill_outputs(device):
    # a reduction over nothing writes its identity: the kernel runs although its inputs are empty
    a, b = rand([3, 0], 'float32', device), rand([0, 4], 'float32', device)
    check(ops.matmul(hidet.from_torch(a), hidet.from_torch(b)), torch.matmul(a, b))
    check(ops.sum(hidet.from_torch(a), 1), torch.sum(a, 1))
