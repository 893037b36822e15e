"""hidet.Tensor: dtypes, printing, host/device transfer and casts, checked against torch."""
import numpy as np
import pytest
import torch

import hidet

DTYPES = ['float16', 'float32', 'float64', 'bfloat16', 'int8', 'int16', 'int32', 'int64', 'uint8', 'bool']


def random_torch(shape, dtype: str) -> torch.Tensor:
    tdtype = getattr(torch, dtype)
    if tdtype.is_floating_point:
        return torch.randn(shape, dtype=torch.float32).to(tdtype)
    if tdtype == torch.bool:
        return torch.rand(shape) > 0.5
    info = torch.iinfo(tdtype)
    return torch.randint(max(info.min, -100), min(info.max, 100), shape, dtype=tdtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_torch_round_trip_every_dtype(dtype, device):
    expected = random_torch([3, 5], dtype).to(device)
    t = hidet.from_torch(expected)
    assert t.shape == (3, 5) and t.dtype == dtype and str(t.device) == ('cpu' if device == 'cpu' else 'cuda:0')
    back = t.torch()
    assert back.dtype == expected.dtype and back.device == expected.device
    assert torch.equal(back, expected)
    assert back.data_ptr() == expected.data_ptr()  # zero-copy both ways


@pytest.mark.parametrize('dtype', [d for d in DTYPES if d != 'bfloat16'])
def test_numpy_values(dtype):
    expected = random_torch([4, 2], dtype)
    np.testing.assert_array_equal(hidet.from_torch(expected).numpy(), expected.numpy())
    np.testing.assert_array_equal(hidet.asarray(expected.numpy()).numpy(), expected.numpy())


def test_print_format(device):
    t = hidet.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)
    text = str(t)
    header = "Tensor(shape=(2, 3), dtype='float32', device='%s')" % ('cpu' if device == 'cpu' else 'cuda:0')
    assert text.splitlines()[0] == header
    assert '[[1., 2., 3.],' in text and '[4., 5., 6.]]' in text
    assert '1.5' in str(hidet.asarray([1.5], dtype='bfloat16', device=device))


def test_zero_copy_shares_memory_cpu():
    x = torch.randn(4, 4)
    t = hidet.from_torch(x)
    x[0, 0] = 42.0
    assert t.numpy()[0, 0] == 42.0
    y = t.torch()
    y[1, 1] = -7.0
    assert x[1, 1] == -7.0


def test_memory_outlives_its_producer():
    x = torch.randn(256)
    expected = x.clone()
    t = hidet.from_torch(x)
    del x
    np.testing.assert_array_equal(t.numpy(), expected.numpy())
    h = hidet.randn([256])
    values = h.numpy()
    y = h.torch()
    del h
    np.testing.assert_array_equal(y.numpy(), values)


def test_dlpack_protocols():
    h = hidet.randn([2, 3])
    assert h.__dlpack_device__() == (1, 0)
    legacy = torch.utils.dlpack.from_dlpack(h.__dlpack__())
    versioned = torch.utils.dlpack.from_dlpack(h.__dlpack__(max_version=(1, 0)))
    assert legacy.data_ptr() == versioned.data_ptr() == h.data_ptr()
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = hidet.from_dlpack(a)
    assert t.data_ptr() == a.ctypes.data and t.dtype == 'int32'
    np.testing.assert_array_equal(np.from_dlpack(t), a)
    capsule = torch.utils.dlpack.to_dlpack(torch.ones(2))
    hidet.from_dlpack(capsule)
    with pytest.raises(ValueError, match='consumed only once'):
        hidet.from_dlpack(capsule)


def test_non_contiguous_torch_input_is_made_contiguous():
    x = torch.randn(3, 4).t()
    t = hidet.from_torch(x)
    assert t.shape == (4, 3)
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    with pytest.raises(ValueError, match='contiguous'):
        hidet.from_dlpack(torch.utils.dlpack.to_dlpack(x))


CASTS = [('float32', 'float16'), ('float32', 'bfloat16'), ('bfloat16', 'float32'), ('float32', 'int32'),
         ('int64', 'float32'), ('float16', 'bool'), ('int32', 'int8'), ('bool', 'float32'), ('float64', 'bfloat16')]


@pytest.mark.parametrize('src,dst', CASTS)
def test_to_dtype_matches_torch(src, dst, device):
    x = random_torch([6, 7], src) * (3 if src != 'bool' else 1)
    x = x.to(device)
    actual = hidet.from_torch(x).to(dst).torch()
    expected = x.to(getattr(torch, dst))
    assert actual.dtype == expected.dtype and actual.device == expected.device
    assert torch.equal(actual, expected)


def test_to_same_is_identity():
    t = hidet.randn([2])
    assert t.to('float32') is t and t.to(device='cpu') is t and t.cpu() is t
    c = t.copy()
    assert c.data_ptr() != t.data_ptr() and np.array_equal(c.numpy(), t.numpy())


def test_bfloat16_numpy_is_refused():
    with pytest.raises(TypeError, match="no bfloat16"):
        hidet.randn([2], dtype='bfloat16').numpy()


def test_invalid_arguments_are_named():
    with pytest.raises(ValueError, match="invalid device 'gpu'"):
        hidet.empty([2], device='gpu')
    with pytest.raises(ValueError, match="unknown data type 'float8'"):
        hidet.empty([2], dtype='float8')
    with pytest.raises(ValueError, match='negative'):
        hidet.empty([2, -1])


def test_cuda_request_without_gpu_is_a_clear_error():
    if hidet.cuda.available():
        pytest.skip('this machine has a GPU')
    assert not hidet.cuda.available() and hidet.cuda.device_count() == 0
    with pytest.raises(hidet.HidetRuntimeError, match='CUDA is not available'):
        hidet.randn([2, 3], device='cuda')
    with pytest.raises(hidet.HidetRuntimeError, match='CUDA is not available'):
        hidet.cuda.Stream()


@pytest.mark.cuda
def test_cuda_round_trip_shares_the_data_pointer():
    x = torch.randn(64, 32, device='cuda')
    t = hidet.from_torch(x)
    assert t.device == hidet.device('cuda:0') and t.data_ptr() == x.data_ptr()
    y = t.torch()
    assert y.data_ptr() == x.data_ptr()
    h = hidet.randn([8, 8], device='cuda')
    assert h.torch().data_ptr() == h.data_ptr()
    np.testing.assert_array_equal(h.cpu().numpy(), h.torch().cpu().numpy())
    moved = hidet.randn([5]).cuda()
    assert str(moved.device) == 'cuda:0' and np.array_equal(moved.cpu().numpy(), moved.numpy())
