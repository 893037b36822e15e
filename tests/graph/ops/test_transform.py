"""Shape and data-movement operators against torch, on fresh random inputs, every device and several
dtypes; and their build-time shape errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hidet
from hidet import ops

from .test_arithmetic import check, rand

DTYPES = ['float32', 'float16', 'int32']
# (dtype, index dtype) pairs for the indexing ops: each pair compiles its own kernels
INDEXED = [('float32', 'int64'), ('float32', 'int32'), ('float16', 'int64'), ('int32', 'int32')]

# Each distinct (op, shape, dtype) compiles a kernel: the tests run every dtype through a few cases and
# float32 through the rest.


def h(x: torch.Tensor) -> hidet.Tensor:
    return hidet.from_torch(x)


def index_tensor(values, dtype, device):
    return torch.tensor(values, dtype=getattr(torch, dtype), device=device)


# ---------------------------------------------------------------- reshape family
@pytest.mark.parametrize('dtype', DTYPES)
def test_reshape_flatten_squeeze_unsqueeze(dtype, device):
    x = rand([2, 3, 4], dtype, device)
    hx = h(x)
    check(ops.reshape(hx, [4, -1]), x.reshape(4, -1))
    check(ops.flatten(hx, 1), torch.flatten(x, 1))
    if dtype == 'float32':
        check(ops.reshape(hx, [6, 1, 4]), x.reshape(6, 1, 4))
        check(ops.flatten(hx), torch.flatten(x))
        check(hx.reshape(3, 8), x.reshape(3, 8))
        check(hx.reshape([-1]), x.reshape([-1]))  # the same task as flatten: no new kernel


def test_reshape_shapes(device):
    x = rand([5, 1, 6], 'float32', device)
    hx = h(x)
    check(ops.reshape(hx, [3, 10]), x.reshape(3, 10))
    check(ops.reshape(hx, [2, 15, 1]), x.reshape(2, 15, 1))
    check(ops.flatten(hx, 0, 1), torch.flatten(x, 0, 1))
    check(ops.squeeze(hx), torch.squeeze(x))
    check(ops.squeeze(hx, 0), torch.squeeze(x, 0))  # size 5: kept, as torch
    check(hx.squeeze([1, 2]), x.squeeze(1))
    check(ops.unsqueeze(hx, -1), x.unsqueeze(-1))
    check(hx.unsqueeze(0), x.unsqueeze(0))
    check(ops.unsqueeze(hx, [0, 4]), x.unsqueeze(0).unsqueeze(4))
    s = rand([], 'float32', device)
    check(ops.reshape(h(s), [1, 1]), s.reshape(1, 1))
    check(ops.flatten(h(s)), torch.flatten(s))
    check(ops.reshape(h(s.reshape(1)), []), s)
    e = rand([0, 3], 'float32', device)
    check(ops.reshape(h(e), [3, -1, 1]), e.reshape(3, -1, 1))


# ---------------------------------------------------------------- permute, transpose, broadcast
@pytest.mark.parametrize('dtype', DTYPES)
def test_permute_transpose(dtype, device):
    x = rand([2, 3, 4, 5], dtype, device)
    hx = h(x)
    check(ops.permute(hx, [3, 1, 0, 2]), x.permute(3, 1, 0, 2))
    if dtype != 'float32':
        return
    check(hx.permute(0, 2, -1, 1), x.permute(0, 2, -1, 1))
    check(ops.transpose(hx, 1, -1), x.transpose(1, -1))
    y = rand([7, 9], dtype, device)
    check(h(y).transpose(0, 1), y.transpose(0, 1))


@pytest.mark.parametrize('dtype', DTYPES)
def test_broadcast(dtype, device):
    x = rand([3, 1, 4], dtype, device)
    hx = h(x)
    check(ops.broadcast(hx, [3, 5, 4]), x.expand(3, 5, 4))
    if dtype != 'float32':
        return
    check(hx.expand(2, -1, 6, -1), x.expand(2, -1, 6, -1))
    v = rand([1], dtype, device)
    check(h(v).expand([4, 3]), v.expand([4, 3]))


# ---------------------------------------------------------------- concat, stack, split
@pytest.mark.parametrize('dtype', DTYPES)
def test_concat(dtype, device):
    a, b, c = rand([2, 3, 4], dtype, device), rand([2, 1, 4], dtype, device), rand([2, 5, 4], dtype, device)
    check(ops.concat([h(a), h(b), h(c)], 1), torch.cat([a, b, c], 1))
    if dtype != 'float32':
        return
    check(ops.cat([h(a), h(a)], -1), torch.cat([a, a], -1))
    check(ops.concat([h(a)], 0), torch.cat([a], 0))


def test_concat_promotes_and_skips_empty(device):
    a, b = rand([3, 2], 'float16', device), rand([1, 2], 'float32', device)
    i = rand([2, 2], 'int64', device)
    e = rand([0, 2], 'float32', device)
    check(ops.concat([h(a), h(e), h(b), h(i)], 0), torch.cat([a, e, b, i], 0))
    legacy = torch.empty([0], device=device)
    check(ops.concat([h(b), h(legacy), h(b)], 1), torch.cat([b, legacy, b], 1))


@pytest.mark.parametrize('dtype', DTYPES)
def test_stack(dtype, device):
    xs = [rand([3, 4], dtype, device) for _ in range(3)]
    check(ops.stack([h(x) for x in xs], 0), torch.stack(xs, 0))
    if dtype != 'float32':
        return
    check(ops.stack([h(x) for x in xs[:2]], -1), torch.stack(xs[:2], -1))
    i = rand([3, 4], 'int64', device)
    check(ops.stack([h(xs[0]), h(i)], 1), torch.stack([xs[0], i], 1))


@pytest.mark.parametrize('dtype', DTYPES)
def test_split(dtype, device):
    x = rand([4, 7, 3], dtype, device)
    hx = h(x)
    cases = [(3, 1), ([1, 0, 3], 0), ([1, 2], -1)] if dtype == 'float32' else [(3, 1)]
    for sizes, axis in cases:
        got, expected = ops.split(hx, sizes, axis), torch.split(x, sizes, axis)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            check(g, e)


# ---------------------------------------------------------------- slicing, flip
SLICES = [  # (starts, ends, axes, strides) and the same as a Python index
    (([1], [3], None, None), (slice(1, 3),)),
    (([-3, 0], [100, -1], [2, 1], [2, 1]), (slice(None), slice(0, -1), slice(-3, 100, 2))),
    (([-100, 4], [2, -100], [0, 2], [1, -2]), (slice(-100, 2), slice(None), slice(4, -100, -2))),
    (([5], [1], [-1], None), (Ellipsis, slice(5, 1))),  # empty
    (([7, -1], [-9, 0], [1, 0], [-3, -1]), (slice(-1, 0, -1), slice(7, -9, -3))),
]


@pytest.mark.parametrize('args,index', SLICES, ids=[str(s[1]) for s in SLICES])
def test_strided_slice(args, index, device):
    x = rand([4, 6, 5], 'float32', device)
    expected = torch.from_numpy(x.cpu().numpy()[index].copy()).to(device)
    check(ops.strided_slice(h(x), *args), expected)


@pytest.mark.parametrize('dtype', DTYPES)
def test_strided_slice_and_flip_dtypes(dtype, device):
    x = rand([5, 8], dtype, device)
    check(ops.strided_slice(h(x), [1, -2], [4, -9], [0, 1], [2, -3]), torch.from_numpy(
        x.cpu().numpy()[1:4:2, -2:-9:-3].copy()).to(device))
    check(ops.flip(h(x), [0, -1]), torch.flip(x, [0, -1]))
    if dtype == 'float32':
        check(ops.flip(h(x), 1), torch.flip(x, [1]))


# ---------------------------------------------------------------- gather, index_select, take, embedding
@pytest.mark.parametrize('dtype,index_dtype', INDEXED)
def test_gather(dtype, index_dtype, device):
    x = rand([3, 5, 4], dtype, device)
    index = torch.randint(-5, 5, [2, 6, 3], device=device).to(getattr(torch, index_dtype))
    expected = torch.gather(x, 1, index.long().remainder(5))
    check(ops.gather(h(x), 1, h(index)), expected)
    if dtype != 'float32':
        return
    index0 = torch.randint(0, 3, [3, 2, 4], device=device)
    check(ops.gather(h(x), -3, h(index0.to(getattr(torch, index_dtype)))), torch.gather(x, 0, index0))


@pytest.mark.parametrize('dtype,index_dtype', INDEXED)
def test_index_select_take_embedding(dtype, index_dtype, device):
    x = rand([4, 6], dtype, device)
    itype = getattr(torch, index_dtype)
    index = index_tensor([5, 0, -1, 2, -6], index_dtype, device)
    check(ops.index_select(h(x), 1, h(index)), torch.index_select(x, 1, index.remainder(6).to(itype)))
    index2 = index_tensor([[3, -4], [0, 1], [2, 2]], index_dtype, device)
    expected = torch.from_numpy(np.take(x.cpu().numpy(), index2.cpu().numpy(), axis=0)).to(device)
    check(ops.take(h(x), h(index2), 0), expected)
    check(ops.embedding(h(index2 % 4), h(x)), F.embedding((index2 % 4).long(), x))


def test_take_scalar_index_and_index_select_scalar(device):
    x = rand([3, 4, 2], 'float32', device)
    i = torch.tensor(-2, device=device)
    check(ops.take(h(x), h(i), 1), x[:, -2])
    check(ops.index_select(h(x), 2, h(torch.tensor(1, device=device))), torch.index_select(x, 2, i + 3))


# ---------------------------------------------------------------- pad, tile, repeat, tril, triu
@pytest.mark.parametrize('dtype', DTYPES)
def test_pad_constant(dtype, device):
    x = rand([2, 3, 4], dtype, device)
    check(ops.pad(h(x), [1, 2]), F.pad(x, [1, 2]))
    if dtype != 'float32':
        return
    check(ops.pad(h(x), [0, 1, 2, 0, 1, 1], value=3), F.pad(x, [0, 1, 2, 0, 1, 1], value=3))
    check(ops.pad(h(x), [-1, 2, 1, -2]), F.pad(x, [-1, 2, 1, -2]))


@pytest.mark.parametrize('mode', ['reflect', 'replicate'])
def test_pad_reflect_replicate(mode, device):
    x = rand([2, 3, 5], 'float32', device)
    check(ops.pad(h(x), [4, 2], mode), F.pad(x, [4, 2], mode=mode))
    check(ops.pad(h(x), [1, 0, 2, 2], mode), F.pad(x, [1, 0, 2, 2], mode=mode))


def test_pad_of_empty_input(device):
    e = rand([0, 3], 'float32', device)
    check(ops.pad(h(e), [0, 0, 1, 1], value=2.5), F.pad(e, [0, 0, 1, 1], value=2.5))


@pytest.mark.parametrize('dtype', DTYPES)
def test_tile_repeat(dtype, device):
    x = rand([2, 3], dtype, device)
    check(ops.tile(h(x), [2, 3]), torch.tile(x, [2, 3]))
    if dtype != 'float32':
        return
    check(ops.tile(h(x), [2]), torch.tile(x, [2]))
    check(ops.repeat(h(x), [2, 1, 2]), x.repeat(2, 1, 2))


@pytest.mark.parametrize('dtype', DTYPES + ['bool'])
def test_tril_triu(dtype, device):
    x = rand([2, 4, 5], dtype, device)
    check(ops.tril(h(x), -1), torch.tril(x, -1))
    check(ops.triu(h(x), 1), torch.triu(x, 1))
    if dtype == 'float32':
        check(ops.tril(h(x), 2), torch.tril(x, 2))
        check(ops.triu(h(x)), torch.triu(x))


# ---------------------------------------------------------------- Tensor.__getitem__
GETITEM = [
    (1,), (-1,), (slice(None), 2), (slice(1, None, 2),), (Ellipsis, slice(None, None, -2)),
    (None, 0, Ellipsis, None), (slice(-2, None), None, slice(None), -3), (Ellipsis,),
    (0, 1, 2), (slice(5, 1),),
]


@pytest.mark.parametrize('key', GETITEM, ids=str)
def test_getitem(key, device):
    x = rand([3, 4, 5], 'float32', device)
    expected = torch.from_numpy(np.array(x.cpu().numpy()[key])).to(device)  # numpy: negative steps too
    check(h(x)[key], expected)


@pytest.mark.parametrize('index_dtype', ['int32', 'int64'])
def test_getitem_with_tensor_index(index_dtype, device):
    x = rand([3, 4, 5], 'float32', device)
    i = index_tensor([2, -1, 0], index_dtype, device)
    hx, hi = h(x), h(i)
    check(hx[hi], x[i])
    check(hx[1:, hi], x[1:, i])
    if index_dtype != 'int64':
        return
    check(hx[0, :, hi], x[0, :, i])  # ints index first (torch's rule, unlike numpy's)
    check(hx[None, ..., hi], x[None, ..., i])
    check(hx[[1, 0]], x[[1, 0]])
    i2 = index_tensor([[0, 1], [3, 2]], index_dtype, device)
    check(hx[:, h(i2)], x[:, i2])


def test_getitem_dtypes(device):
    for dtype in ('float16', 'int32', 'bool'):
        x = rand([3, 4], dtype, device)
        check(h(x)[1:, ::2], x[1:, ::2])


def test_getitem_errors():
    x = hidet.randn([3, 4])
    with pytest.raises(IndexError, match=r'index 3 is out of range for dimension 0 of size 3'):
        x[3]
    with pytest.raises(IndexError, match=r'too many indices for a tensor of 2 dimensions'):
        x[0, 1, 2]
    with pytest.raises(IndexError, match=r'the shape of the mask \[2\] at index 0 does not match'):
        x[hidet.asarray([True, False])]
    with pytest.raises(NotImplementedError, match='more than one tensor'):
        x[hidet.asarray([0]), hidet.asarray([1])]
    with pytest.raises(ValueError, match='slice step cannot be zero'):
        x[::0]
    with pytest.raises(IndexError, match='integer dtype'):
        x[hidet.asarray([0.5])]


def test_getitem_with_bool_mask(device):
    x = rand([3, 4, 5], 'float32', device)
    hx = h(x)
    full = x > 0
    check(hx[h(full)], x[full])
    rows = x[:, :, 0] > 0
    check(hx[h(rows)], x[rows])
    cols = torch.tensor([True, False, True, True], device=device)
    check(hx[:, h(cols)], x[:, cols])
    check(hx[..., h(cols), 1:4], x[..., cols, 1:4])
    check(hx[1, h(cols)], x[1, cols])
    check(hx[[True, False, True]], x[[True, False, True]])
    check(hx[True], x[True])
    check(hx[False], x[False])
    none = torch.zeros(3, 4, dtype=torch.bool, device=device)
    check(hx[h(none)], x[none])
    i = rand([6, 2], 'int32', device)
    check(h(i)[h(i[:, 0] > 0)], i[i[:, 0] > 0])


def test_bool_mask_needs_concrete_tensors():
    x = hidet.Tensor([3, 4], 'float32', 'cpu', None)
    with pytest.raises(NotImplementedError, match='concrete tensors'):
        x[hidet.asarray([True, False, True])]


def test_out_of_range_indices_raise_for_host_indices():
    x = hidet.randn([3, 4])
    bad = hidet.asarray([0, 3])
    for fn in (lambda: ops.gather(x, 0, hidet.asarray([[3]])), lambda: ops.index_select(x, 0, bad),
               lambda: ops.take(x, bad, 0), lambda: ops.embedding(bad, x), lambda: x[bad],
               lambda: ops.index_select(x, 1, hidet.asarray([-5]))):
        with pytest.raises(IndexError, match='out of range for dimension'):
            fn()
    with pytest.raises(IndexError, match='size 0'):
        ops.take(hidet.randn([0, 2]), hidet.asarray([0]), 0)


def test_out_of_range_indices_never_read_outside(device):
    # the kernels clamp indices into range: on the GPU (no host check) an out-of-range index reads the
    # nearest end of its dimension; the operators built directly show the same on the CPU
    from hidet.graph.ops.indexing import GatherOp, TakeOp

    x = rand([5, 8], 'float32', device)
    index = torch.tensor([7, -9, 2, 100, -1], device=device)
    clamped = torch.tensor([4, 0, 2, 4, 4], device=device)
    check(TakeOp(h(x), 0, h(index)).get_output(0), x[clamped])
    check(TakeOp(h(x), 0, h(index), 'embedding').get_output(0), F.embedding(clamped, x))
    g = torch.tensor([[9, -20, 3, 0, 12, 1, -1, 5]], device=device)
    check(GatherOp(h(x), 0, h(g)).get_output(0), torch.gather(x, 0, g.clamp(-5, 4).remainder(5)))
    if device == 'cuda':
        check(ops.take(h(x), h(index), 0), x[clamped])


# ---------------------------------------------------------------- symbolic tensors: shapes only
def test_symbolic_inputs_give_traced_outputs():
    x = hidet.Tensor([2, 6, 4], 'float32', 'cpu', None)
    assert ops.reshape(x, [-1, 4]).shape == (12, 4)
    pieces = ops.split(x, [2, 0, 4], 1)
    assert [p.shape for p in pieces] == [(2, 2, 4), (2, 0, 4), (2, 4, 4)]
    assert all(p.is_symbolic() for p in pieces)
    assert pieces[0].trace[0] is pieces[2].trace[0]  # one operator (one kernel library) for the split
    assert x[:, hidet.Tensor([3], 'int64', 'cpu', None), 1:].shape == (2, 3, 3)


# ---------------------------------------------------------------- errors name the op, shapes and rule
ERRORS = [
    (lambda: ops.reshape(hidet.randn([2, 3]), [4, 2]), ValueError,
     r'reshape: cannot reshape \(2, 3\) \(6 elements\) into \(4, 2\) \(8 elements\)'),
    (lambda: ops.reshape(hidet.randn([2, 3]), [-1, 4]), ValueError,
     r'reshape: cannot reshape \(2, 3\) \(6 elements\) into \(-1, 4\)'),
    (lambda: ops.reshape(hidet.randn([2, 3]), [-1, -1]), ValueError, r'reshape: shape \(-1, -1\) has more than one -1'),
    (lambda: ops.flatten(hidet.randn([2, 3, 4]), 2, 1), ValueError, r'flatten: start_dim 2 comes after end_dim 1'),
    (lambda: ops.squeeze(hidet.randn([2, 3]), 2), IndexError, r'squeeze: axis 2 is out of range'),
    (lambda: ops.permute(hidet.randn([2, 3]), [0, 0]), ValueError, r'permute: dims \(0, 0\) is not a permutation'),
    (lambda: ops.transpose(hidet.randn([2, 3]), 0, 2), IndexError, r'transpose: axis 2 is out of range'),
    (lambda: ops.broadcast(hidet.randn([2, 3]), [4, 3]), ValueError,
     r'broadcast: cannot broadcast \(2, 3\) to \(4, 3\): dimension 0 has size 2, which must equal 4 or be 1'),
    (lambda: ops.broadcast(hidet.randn([2, 3]), [3]), ValueError, r'broadcast: .* has fewer dimensions'),
    (lambda: ops.concat([hidet.randn([2, 3]), hidet.randn([3, 3])], 1), ValueError,
     r'concat: shapes \(2, 3\), \(3, 3\) do not match: all dimensions except 1 must be equal'),
    (lambda: ops.stack([hidet.randn([2, 3]), hidet.randn([3, 2])]), ValueError,
     r'stack: shapes \(2, 3\), \(3, 2\) do not match'),
    (lambda: ops.split(hidet.randn([5, 3]), [2, 2]), ValueError,
     r'split: sections \(2, 2\) must be non-negative and sum to the size of dimension 0 of \(5, 3\) \(5\)'),
    (lambda: ops.split(hidet.randn([5, 3]), 0), ValueError, r'split: the split size must be positive'),
    (lambda: ops.strided_slice(hidet.randn([5, 3]), [0], [2], [0], [0]), ValueError,
     r'strided_slice: the stride of axis 0 is 0'),
    (lambda: ops.strided_slice(hidet.randn([5, 3]), [0, 1], [2], None, None), ValueError,
     r'strided_slice: starts \[0, 1\], ends \[2\].* must have the same length'),
    (lambda: ops.gather(hidet.randn([2, 3]), 1, hidet.zeros([3, 1], 'int64')), ValueError,
     r'gather: index \(3, 1\) is larger than the input \(2, 3\) in dimension 0'),
    (lambda: ops.gather(hidet.randn([2, 3]), 1, hidet.zeros([3], 'int64')), ValueError,
     r'gather: index \(3,\) must have as many dimensions as the input \(2, 3\)'),
    (lambda: ops.index_select(hidet.randn([2, 3]), 0, hidet.zeros([2], 'float32')), TypeError,
     r'index_select: the index tensor must have an integer dtype, got float32'),
    (lambda: ops.index_select(hidet.randn([2, 3]), 0, hidet.zeros([2, 2], 'int32')), ValueError,
     r'index_select: index must be a vector or a scalar, got shape \(2, 2\)'),
    (lambda: ops.embedding(hidet.zeros([2], 'int64'), hidet.randn([3])), ValueError,
     r'embedding: the weight must be a 2-D table'),
    (lambda: ops.pad(hidet.randn([2, 3]), [1, 1, 1]), ValueError, r'pad: pads \(1, 1, 1\) must have an even length'),
    (lambda: ops.pad(hidet.randn([2, 3]), [3, 0], 'reflect'), ValueError,
     r'pad: reflect padding \(3, 0\) of dimension 1 of \(2, 3\) must be smaller than the dimension \(3\)'),
    (lambda: ops.pad(hidet.randn([2, 3]), [1, 1], 'circular'), NotImplementedError, r"pad: mode 'circular'"),
    (lambda: ops.pad(hidet.randn([2, 3]), [-2, -2]), ValueError, r'pad: pads \(-2, -2\) shrink dimension 1'),
    (lambda: ops.flip(hidet.randn([2, 3]), [0, -2]), ValueError, r'flip: dims \[0, 0\] name a dimension twice'),
    (lambda: ops.repeat(hidet.randn([2, 3]), [2]), ValueError,
     r'repeat: repeats \(2,\) has fewer entries than the tensor \(2, 3\) has dimensions \(2\)'),
    (lambda: ops.tril(hidet.randn([3])), ValueError, r'tril: the input must have at least 2 dimensions, got \(3,\)'),
]


@pytest.mark.parametrize('fn,error,pattern', ERRORS, ids=[e[2].split(':')[0] + str(i) for i, e in enumerate(ERRORS)])
def test_shape_errors(fn, error, pattern):
    with pytest.raises(error, match=pattern):
        fn()


def _gather_nd_reference(x, index, batch_dims):
    """ONNX GatherND, spelled out with numpy (negative indices count from the end)."""
    m = index.shape[-1]
    out_shape = index.shape[:-1] + x.shape[batch_dims + m:]
    out = np.empty(out_shape, x.dtype)
    for pos in np.ndindex(*index.shape[:-1]):
        coords = tuple(int(c) for c in index[pos])
        out[pos] = x[pos[:batch_dims] + coords]
    return out


@pytest.mark.parametrize('batch_dims,xshape,ishape', [(0, (4, 5, 3), (2, 2)), (0, (4, 5), (3, 1)),
                                                       (1, (2, 4, 5), (2, 3, 1)), (1, (2, 4, 5, 3), (2, 2, 2))])
def test_gather_nd(batch_dims, xshape, ishape, device):
    x = rand(list(xshape), 'float32', device)
    g = torch.Generator().manual_seed(0)
    m = ishape[-1]
    extents = torch.tensor(xshape[batch_dims:batch_dims + m])
    index = (torch.rand(*ishape, generator=g) * 2 * extents - extents).floor().long()  # negative ones too
    expected = _gather_nd_reference(x.cpu().numpy(), index.numpy(), batch_dims)
    got = ops.gather_nd(hidet.from_torch(x), hidet.from_torch(index.to(device)), batch_dims)
    np.testing.assert_array_equal(got.torch().cpu().numpy(), expected)


def test_gather_nd_errors():
    x = hidet.randn([3, 4])
    with pytest.raises(IndexError, match='index 3 is out of range for dimension 0 with size 3'):
        ops.gather_nd(x, hidet.asarray(np.array([[3, 0]])))
    with pytest.raises(ValueError, match='batch dimensions must match'):
        ops.gather_nd(x, hidet.asarray(np.zeros([2, 1], np.int64)), batch_dims=1)


# ---------------------------------------------------------------- ops.index_assign (x[key] = value, functionally)
def test_index_assign(device):
    x = rand([4, 5, 6], 'float32', device)
    v = rand([4, 5, 6], 'float32', device)
    idx = torch.tensor([2, -1], device=device)
    cases = [((0,), 7.0), ((slice(1, None), Ellipsis, slice(None, None, 2)), v[0, 0, :3]), ((None, 1, 2), v[0, 0]),
             ((Ellipsis, 3), v[:, :, 0]), ((slice(None), idx), v[:, :2]), ((idx,), 1.5), ((x > 0.5,), -2.0),
             ((x[:, :, 0] > 0,), v[0, 0]), ((3, 4, 5), v[0, 0, 0])]
    for key, value in cases:
        hkey = tuple(hidet.from_torch(k) if isinstance(k, torch.Tensor) else k for k in key)
        hvalue = hidet.from_torch(value) if isinstance(value, torch.Tensor) else value
        expected = x.clone()
        expected[key] = value
        check(ops.index_assign(hidet.from_torch(x), hkey, hvalue), expected)
    with pytest.raises(ValueError, match='cannot be broadcast'):
        ops.index_assign(hidet.from_torch(x), (0,), hidet.from_torch(v[0, :2]))
    with pytest.raises(NotImplementedError, match='per masked element'):
        ops.index_assign(hidet.from_torch(x), (hidet.from_torch(x > 0),), hidet.from_torch(v[x > 0]))
