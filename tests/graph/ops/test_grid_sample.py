"""grid_sample and affine_grid against torch, every device: both modes, the three paddings, align_corners
either way, grids reaching past the borders."""
import pytest
import torch
import torch.nn.functional as F

import hidet
from hidet import ops


@pytest.mark.parametrize('mode', ['bilinear', 'nearest'])
@pytest.mark.parametrize('padding', ['zeros', 'border', 'reflection'])
@pytest.mark.parametrize('align_corners', [False, True])
def test_grid_sample(mode, padding, align_corners, device):
    x = torch.randn(2, 3, 5, 7, device=device)
    grid = torch.rand(2, 4, 6, 2, device=device) * 2.6 - 1.3
    got = ops.grid_sample(hidet.from_torch(x), hidet.from_torch(grid), mode, padding, align_corners).torch()
    torch.testing.assert_close(got, F.grid_sample(x, grid, mode, padding, align_corners), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('align_corners', [False, True])
def test_affine_grid(align_corners, device):
    theta = torch.randn(2, 2, 3, device=device)
    got = ops.affine_grid(hidet.from_torch(theta), (2, 3, 4, 5), align_corners).torch()
    torch.testing.assert_close(got, F.affine_grid(theta, [2, 3, 4, 5], align_corners), rtol=1e-5, atol=1e-5)


def test_errors():
    with pytest.raises(NotImplementedError, match="mode 'bicubic'"):
        ops.grid_sample(hidet.randn([1, 1, 2, 2]), hidet.randn([1, 2, 2, 2]), 'bicubic')
    with pytest.raises(NotImplementedError, match='volumetric'):
        ops.grid_sample(hidet.randn([1, 1, 2, 2, 2]), hidet.randn([1, 2, 2, 2, 3]))
