"""In-place updates in compiled graphs (index_put_, fill_, zero_, the in-place twins of mapped operators, the dtype
an in-place update keeps) and max pooling's indices (return_indices=True), against eager."""
import pytest
import torch
import torch.nn.functional as F

from hidet.frontend.torch import default_registry, hidet_backend
from tests.frontend.torch.utils import assert_close


def _compare(fn, *inputs, rtol=1e-4, atol=1e-4):
    expected = fn(*[x.clone() for x in inputs])
    actual = torch.compile(fn, backend='hidet')(*[x.clone() for x in inputs])
    assert_close(actual, expected, rtol, atol)
    return actual


# ---------------------------------------------------------------- max pooling's indices
@pytest.mark.parametrize('fn, shape, spatial', [
    (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (2, 3, 9, 10), 2),
    (lambda x: F.max_pool2d(x, (2, 3), (2, 1), (1, 1), (2, 1), ceil_mode=True, return_indices=True), (2, 3, 9, 10), 2),
    (lambda x: F.max_pool2d_with_indices(x, 2), (2, 3, 9, 10), 2),
    (lambda x: F.max_pool2d(x, 3, return_indices=True), (3, 9, 10), 2),  # unbatched (C, H, W)
    (lambda x: torch.nn.MaxPool2d(3, 2, return_indices=True)(x), (2, 3, 9, 10), 2),
    (lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True), (3, 10), 1),  # unbatched (C, L)
    (lambda x: F.max_pool1d_with_indices(x, 4, 3), (2, 3, 17), 1),
    (lambda x: F.max_pool3d(x, 2, 1, 1, return_indices=True), (1, 2, 3, 9, 10), 3),
    (lambda x: F.max_pool3d(x, (2, 3, 2), (1, 2, 2), ceil_mode=True, return_indices=True), (2, 5, 9, 10), 3),
    (lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True), (2, 3, 9, 10), 2),
    (lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), (3, 10), 1),
], ids=['k3s2p1', 'dilated_ceil', 'with_indices', 'unbatched', 'module', '1d', '1d_with_indices', '3d',
        '3d_unbatched_ceil', 'adaptive', 'adaptive_1d'])
def test_max_pool_indices(fn, shape, spatial):
    x = torch.randn(shape)
    values, indices = _compare(fn, x)
    assert indices.dtype == torch.int64
    # the indices name the values in each flat (spatial) plane, as torch's max_unpool expects
    planes = x.flatten(x.dim() - spatial)
    assert torch.equal(planes.gather(-1, indices.flatten(indices.dim() - spatial)).view_as(values), values)


def test_max_pool_indices_ties_pick_the_first():
    x = torch.randint(0, 3, (1, 2, 8, 8)).float()  # many equal maxima in a window: torch keeps the first
    _compare(lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True), x)


def test_max_pool_indices_feed_max_unpool_in_eager():
    pool = torch.nn.MaxPool2d(2, return_indices=True)
    x = torch.randn(1, 2, 6, 6)
    values, indices = torch.compile(lambda x: pool(x), backend='hidet')(x)
    assert torch.equal(F.max_unpool2d(values, indices, 2), F.max_unpool2d(*pool(x), 2))


# ---------------------------------------------------------------- index_put
def _index_put_cases():
    i = torch.tensor([0, 3, -1, 2])
    j = torch.tensor([[1], [4]])
    dup = torch.tensor([1, 1, 2, 1])
    return [
        ('one_index', lambda x, v: x.index_put((i,), v[:4, None, None]), (5, 4, 6), (4,)),
        ('two_indices', lambda x, v: x.index_put((i[:2], j), v[:2]), (5, 6, 3), (2, 3)),  # broadcast (2, 2)
        ('negative_and_repeats', lambda x, v: x.index_put((i, dup), v[:4], accumulate=True), (5, 4), (4,)),
        ('accumulate_repeats', lambda x, v: x.index_put((dup,), v[:4, None], accumulate=True), (4, 3), (4,)),
        ('inplace', lambda x, v: torch.relu(x).index_put_((i,), v[:4, None], accumulate=True), (5, 2), (4,)),
        ('torch_fn', lambda x, v: torch.index_put(x, (i, i), v[:4], True), (5, 5), (4,)),
        ('scalar_value', lambda x, v: x.index_put((i,), torch.tensor(2.5)), (5, 3), (1,)),
        ('mask', lambda x, v: x.index_put((x > 0,), v[:1]), (4, 5), (1,)),
        ('mask_accumulate', lambda x, v: x.index_put((x[:, 0] > 0,), v[:3], accumulate=True), (4, 3), (3,)),
    ]


@pytest.mark.parametrize('case', _index_put_cases(), ids=lambda c: c[0])
def test_index_put(case):
    _, fn, x_shape, v_shape = case
    _compare(fn, torch.randn(x_shape), torch.randn(v_shape))


def _setitem(key):
    def fn(x, v):
        y = x + 0
        y[key] = v
        return y

    return fn


@pytest.mark.parametrize('key, x_shape, v_shape', [
    ((slice(None), torch.tensor([0, 3, -1]), torch.tensor([0, 1, 2])), (2, 5, 4), (3,)),  # inner dims: (2, 3)
    ((torch.tensor([0, 3]), slice(None), torch.tensor([1, 0])), (5, 3, 2), (2, 1)),  # apart: index shape first
    ((torch.tensor([[0], [2]]), torch.tensor([1, 0, 2])), (3, 3, 2), (2, 3, 2)),  # broadcast index tensors
    ((Ellipsis, torch.tensor([1, 0]), torch.tensor([2, 2])), (2, 3, 4), (1,)),
], ids=['inner_dims', 'apart', 'broadcast', 'ellipsis'])
def test_setitem_with_several_index_tensors(key, x_shape, v_shape):
    _compare(_setitem(key), torch.randn(x_shape), torch.randn(v_shape))


def test_index_put_in_place_on_an_intermediate():
    def fn(x, i, v):
        y = x * 2
        y.index_put_((i,), v, accumulate=True)
        y[i[0]] = 7.0
        return y

    _compare(fn, torch.randn(6, 3), torch.tensor([5, 0, 5]), torch.randn(3, 3))


# ---------------------------------------------------------------- in-place methods dynamo leaves in graphs
@pytest.mark.parametrize('fn', [
    lambda x, y: (x + 0).add_(y, alpha=2).mul_(y).sub_(1.5).div_(y.abs() + 1),
    lambda x, y: (x + 0).clamp_(-0.5, 0.5).clamp_min_(-0.2).clamp_max_(0.3),
    lambda x, y: (x + 0).masked_fill_(y > 0, -3.0),
    lambda x, y: (x + 0).square_().sqrt_().neg_().exp_(),
    lambda x, y: (x + 0).lt_(y),  # comparisons in place keep the float dtype (1.0 / 0.0)
    lambda x, y: (x + 0).eq_(x).logical_not_().logical_or_(y > 0),
    lambda x, y: (x + 0).tril_(-1).triu_(-2),
    lambda x, y: (x + 0).fill_(y[0, 0]) + (x + 0).zero_() + (x + 0).fill_(2),
    lambda x, y: torch.relu_(x + 0) + torch.sigmoid_(y + 0),
    lambda x, y: (x + 0).t_().unsqueeze_(0).squeeze_(0),
    lambda x, y: (x + 0).addcmul_(x, y, value=0.5).lerp_(y, 0.25).atan2_(y),
    lambda x, y: (x + 0).baddbmm(x[None], y.t()[None]).squeeze(0),
], ids=['arith', 'clamp', 'masked_fill', 'unary', 'lt_', 'logical', 'tril_triu', 'fill_zero', 'torch_fn', 'view',
        'ternary', 'method_from_function'])
def test_inplace_methods(fn):
    _compare(fn, torch.randn(5, 5), torch.randn(5, 5))


def test_mapped_inplace_methods_have_conversions():
    for name in ('add_', 'mul_', 'clamp_', 'masked_fill_', 'square_', 'lt_', 'tril_', 'index_put_', 'fill_',
                 'zero_', 'cumsum_', 'bitwise_and_', 'transpose_'):
        assert default_registry.has_method(name), name
    assert default_registry.has_function(torch.relu_) and default_registry.has_function(torch.index_put_)
    assert not default_registry.has_method('normal_')  # random draws do not convert like torch.normal


def test_inplace_update_that_eager_rejects_is_an_error():
    class Model(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            y.add_(1.5)  # int64 += float: eager raises (and so does dynamo, before hidet sees it)
            return y

    x = torch.arange(6)
    with pytest.raises(RuntimeError):
        Model()(x)
    gm = torch.fx.symbolic_trace(Model())  # (an fx graph with the update, as other tracers hand hidet)
    with pytest.raises(Exception, match="can't be cast to the desired output type"):
        hidet_backend(gm, [x])(x)


# ---------------------------------------------------------------- cumulative ops (found by the OpInfo test)
def test_cumsum_cumprod_of_0d_and_integers():
    _compare(lambda x: (torch.cumsum(x[0, 0], 0), torch.cumprod(x[0, 0], -1), x.cumsum(1)), torch.randn(3, 4))
    _compare(lambda x: (torch.cumsum(x, 0), x.cumprod(1), torch.cumsum(x > 0, 1), torch.cumsum(x, 0, dtype=torch.float32)),
             torch.randint(-3, 4, (3, 4), dtype=torch.int32))
