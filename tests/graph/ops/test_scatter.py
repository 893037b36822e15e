"""Scatters (hidet/graph/ops/scatter.py) against torch, every device: an index smaller than the data, negative
indices, every reduction, ScatterND and the index_* ops."""
import pytest
import torch

import hidet
from hidet import ops


@pytest.mark.parametrize('reduce', ['none', 'sum', 'prod', 'amax', 'amin', 'mean'])
def test_scatter_elements(reduce, device):
    x, src = torch.randn(5, 7, device=device), torch.randn(3, 6, device=device)
    if reduce == 'none':  # one source per element (which of several wins is undefined)
        index = torch.stack([torch.randperm(5, device=device)[:3] for _ in range(6)], 1) - 5  # (from the end)
    else:
        index = torch.randint(-5, 5, (3, 6), device=device)
    got = ops.scatter_elements(hidet.from_torch(x), 0, hidet.from_torch(index), hidet.from_torch(src), reduce)
    want = x.scatter(0, index % 5, src) if reduce == 'none' else x.scatter_reduce(0, index % 5, src, reduce)
    torch.testing.assert_close(got.torch(), want)


def test_scatter_nd_and_index_ops(device):
    data, updates = torch.randn(4, 5, 3, device=device), torch.randn(2, 1, 3, device=device)
    indices = torch.tensor([[[0, 1]], [[3, -1]]], device=device)
    got = ops.scatter_nd(hidet.from_torch(data), hidet.from_torch(indices), hidet.from_torch(updates))
    torch.testing.assert_close(got.torch(), data.index_put((indices[..., 0], indices[..., 1] % 5), updates))
    idx = torch.tensor([2, 0], device=device)
    src = torch.randn(4, 2, 3, device=device)
    torch.testing.assert_close(ops.index_add(hidet.from_torch(data), 1, hidet.from_torch(idx), hidet.from_torch(src),
                                             0.5).torch(), data.index_add(1, idx, src, alpha=0.5))
