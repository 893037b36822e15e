"""sort, argsort, topk, kthvalue and median (hidet/graph/ops/sort.py) against torch, every device."""
import pytest
import torch

import hidet
from hidet import ops


def _same(got, want):
    got = got.torch()
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize('dtype', ['float32', 'float16', 'int32'])
@pytest.mark.parametrize('descending', [False, True])
def test_sort_is_stable_with_nan_largest(dtype, descending, device):
    if dtype == 'int32':
        x = torch.randint(-3, 3, (5, 33), dtype=torch.int32)  # full of ties: the stable order is the only one
    else:
        x = torch.randn(5, 33).to(getattr(torch, dtype))
        x[2, [3, 17]] = float('nan')
    x = x.to(device)
    values, indices = ops.sort(hidet.from_torch(x), 1, descending)
    want = torch.sort(x, dim=1, descending=descending, stable=True)
    _same(values, want.values)
    _same(indices, want.indices)
    _same(ops.argsort(hidet.from_torch(x), 0, descending), torch.sort(x, dim=0, descending=descending, stable=True)[1])


@pytest.mark.parametrize('largest', [True, False])
def test_topk_kthvalue_median(largest, device):
    x = torch.randn(3, 40, 6, device=device)
    h = hidet.from_torch(x)
    values, indices = ops.topk(h, 5, 1, largest)
    want = torch.topk(x, 5, 1, largest=largest)
    _same(values, want.values)
    _same(indices, want.indices)
    for got, exp in zip(ops.kthvalue(h, 4, -1, keepdim=True), torch.kthvalue(x, 4, -1, keepdim=True)):
        _same(got, exp)
    x[1, 4, 2] = float('nan')
    for got, exp in zip(ops.median(hidet.from_torch(x), 1), torch.median(x, 1)):
        _same(got, exp)


def test_sort_errors():
    with pytest.raises(ValueError, match='k = 9 is out of range'):
        ops.topk(hidet.randn([2, 8]), 9)

