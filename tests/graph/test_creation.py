"""Creation functions, compared with numpy/torch semantics."""
import numpy as np
import pytest
import torch

import hidet


def test_empty_zeros_ones_full(device):
    assert hidet.empty([2, 3], 'float16', device).shape == (2, 3)
    assert np.array_equal(hidet.zeros([2, 3], device=device).numpy(), np.zeros((2, 3), np.float32))
    assert np.array_equal(hidet.ones([4], 'int8', device).numpy(), np.ones(4, np.int8))
    f = hidet.full([2, 2], 2.5, 'bfloat16', device)
    assert f.dtype == 'bfloat16' and torch.equal(f.torch().cpu(), torch.full((2, 2), 2.5, dtype=torch.bfloat16))
    assert hidet.full([1], 3).dtype == 'int64' and hidet.full([1], 3.0).dtype == 'float32'
    assert hidet.full([1], True).dtype == 'bool'
    assert hidet.zeros([0, 3], device=device).numpy().shape == (0, 3)


def test_randn_statistics(device):
    hidet.manual_seed(0)
    t = hidet.randn([256, 256], mean=2.0, stddev=3.0, device=device)
    values = t.numpy()
    assert abs(values.mean() - 2.0) < 0.05 and abs(values.std() - 3.0) < 0.05
    assert hidet.randn([3], dtype='float16', device=device).dtype == 'float16'
    with pytest.raises(ValueError, match='floating-point'):
        hidet.randn([3], dtype='int32')


def test_manual_seed_reproduces():
    hidet.manual_seed(7)
    a = hidet.randn([10]).numpy()
    hidet.manual_seed(7)
    assert np.array_equal(a, hidet.randn([10]).numpy())


def test_randint_range(device):
    t = hidet.randint(-3, 5, [1000], device=device)
    values = t.numpy()
    assert t.dtype == 'int32' and values.min() == -3 and values.max() == 4
    assert hidet.randint(4, shape=[100], dtype='int64').numpy().max() < 4
    with pytest.raises(ValueError, match='low < high'):
        hidet.randint(5, 5, [2])


def test_arange_like_torch(device):
    for args in [(5,), (2, 9), (1, 10, 3), (0.0, 1.0, 0.25), (5, 0, -1)]:
        expected = torch.arange(*args)
        actual = hidet.arange(*args, device=device).torch().cpu()
        assert actual.dtype == expected.dtype and torch.equal(actual, expected), args
    assert hidet.arange(4, dtype='float16').dtype == 'float16'


def test_asarray():
    assert hidet.asarray([[1, 2], [3, 4]]).dtype == 'int64'
    assert hidet.asarray([1.5, 2.0]).dtype == 'float32'
    assert hidet.asarray(np.ones(3, np.float64)).dtype == 'float64'
    assert hidet.asarray(3.0).shape == ()
    t = hidet.asarray([1, 2, 3], dtype='float16')
    assert t.dtype == 'float16' and np.array_equal(t.numpy(), np.array([1, 2, 3], np.float16))
    x = torch.randn(3)
    assert hidet.asarray(x).data_ptr() == x.data_ptr()


def test_like_functions(device):
    base = hidet.randn([3, 4], dtype='float16', device=device)
    for fn in (hidet.empty_like, hidet.zeros_like, hidet.ones_like, hidet.randn_like):
        t = fn(base)
        assert (t.shape, t.dtype, t.device) == (base.shape, base.dtype, base.device)
    assert np.all(hidet.full_like(base, 7.0).numpy() == 7.0)
    assert hidet.zeros_like(base, dtype='int32').dtype == 'int32'
    r = hidet.randint_like(base, 0, 3, dtype='int64')
    assert r.shape == (3, 4) and r.numpy().max() < 3
