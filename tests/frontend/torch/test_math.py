"""torch's elementwise math, bitwise logic and math reductions through backend='hidet', against eager on
random inputs in each function's domain (and on the special values: ±0, ±inf, NaN)."""
import pytest
import torch
import torch.nn.functional as F



def compile_and_compare(f, *make_inputs):
    """``f`` through backend='hidet' against eager, on two draws of ``make_inputs`` (callables giving
    inputs in the function's domain); NaN must match NaN (the special-value cases make them on purpose)."""
    compiled = torch.compile(f, backend='hidet')
    for _ in range(2):
        inputs = [make() for make in make_inputs]
        with torch.no_grad():
            got, want = compiled(*inputs), f(*inputs)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, w.dtype, g.shape, w.shape)
            tol = 2e-3 if w.dtype == torch.float16 else 1e-5  # (float16: an ulp of rounding either way)
            torch.testing.assert_close(g, w, rtol=max(tol, 1e-4), atol=tol, equal_nan=True,
                                       msg=lambda m: f'output {i}: {m}')

UNARY = ['tan', 'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'atanh', 'exp2', 'expm1', 'log1p', 'erfc', 'trunc',
         'fix', 'frac', 'sgn', 'signbit', 'isinf', 'isfinite', 'isposinf', 'isneginf', 'special.ndtr', 'special.expit',
         'arcsin', 'arctan']


def _fn(name):
    obj = torch
    for part in name.split('.'):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize('name', UNARY)
def test_unary_functions(name):
    f = _fn(name)
    compile_and_compare(lambda x: f(x), lambda: torch.rand(4, 7) * 1.8 - 0.9)


def test_unary_functions_of_larger_and_special_values():
    special = torch.tensor([0.0, -0.0, float('inf'), -float('inf'), float('nan'), -2.5, 3.5, 1e-30])

    def f(x, s):
        return (torch.acosh(x), torch.log2(x), torch.log10(x), x.log1p(), torch.logit(x / 8, eps=1e-6),
                torch.signbit(s), torch.isinf(s), torch.isfinite(s), s.isposinf(), s.isneginf(), torch.trunc(s),
                torch.frac(s[5:7]), torch.expm1(s[-1:]), torch.log1p(s[-1:]), s.sgn())

    compile_and_compare(f, lambda: torch.rand(3, 8) * 5 + 1.5, lambda: special)


def test_methods_and_in_place_twins():
    def f(x, y):
        a = x.clone()
        a.tan_()
        b = x.clone().atanh_()
        return a, b, x.arcsin(), x.exp2(), x.erfc(), y.atan2(x), x.hypot(y), x.copysign(y), x.fmod(0.3), \
            x.logaddexp(y), x.lerp(y, 0.7), x.addcmul(y, y, value=0.5), x.addcdiv(y, y.abs() + 1), x.xlogy(y.abs())

    compile_and_compare(f, lambda: torch.rand(4, 6) * 1.8 - 0.9, lambda: torch.randn(4, 6))


def test_two_argument_math():
    def f(x, y, w):
        return (torch.atan2(x, y), torch.arctan2(y, x), torch.hypot(x, y), torch.copysign(x, y),
                torch.fmod(x * 7, y), torch.remainder(x * 7, y), torch.logaddexp(x, y), torch.xlogy(x, y.abs()),
                torch.special.xlogy(torch.zeros_like(x), y), torch.lerp(x, y, w), torch.lerp(x, y, 0.25),
                torch.lerp(x, y, 0.75), torch.addcmul(x, y, w, value=-2), torch.addcdiv(x, y, w + 2),
                (x * 100) // y, (x * 100) % y, torch.div(x * 100, y, rounding_mode='trunc'))

    compile_and_compare(f, lambda: torch.randn(5, 6), lambda: torch.randn(5, 6), lambda: torch.rand(5, 6))


def test_integer_math_and_bitwise_operators():
    def f(i, j, b, c):
        return (torch.fmod(i, j), i % j, i & j, i | j, i ^ j, ~i, torch.bitwise_and(i, 6), torch.bitwise_xor(i, j),
                torch.bitwise_not(j), b & c, b | c, b ^ c, ~b, torch.logical_and(i, j), torch.logical_xor(i, b),
                torch.logical_not(i), i.bitwise_or(j), torch.atan2(i, j), torch.log2(j), torch.count_nonzero(i, 1),
                i // j, torch.floor_divide(i, -3), torch.div(i, j, rounding_mode='trunc'), torch.remainder(i, -4))

    def ints():
        i = torch.randint(-40, 40, (4, 6), dtype=torch.int32)
        i[0, 0] = 0
        return i

    compile_and_compare(f, ints, lambda: torch.randint(1, 9, (4, 6), dtype=torch.int32),
                        lambda: torch.rand(4, 6) > 0.5, lambda: torch.rand(4, 6) > 0.5)


def test_math_reductions():
    def f(x, n):
        return (torch.logsumexp(x, 1), x.logsumexp((0, 2), keepdim=True), torch.nansum(n), n.nansum(1),
                torch.nanmean(n, 0), n.nanmean(), torch.count_nonzero(x > 0.5, (0, 1)))

    def logits():
        x = torch.randn(3, 5, 4) * 20
        x[0, :, 1] = -float('inf')
        return x

    def with_nans():
        n = torch.randn(6, 5)
        n[n > 1.0] = float('nan')
        n[:, 2] = float('nan')  # a column with nothing but NaN: its mean is NaN
        return n

    compile_and_compare(f, logits, with_nans)


def test_and_or_leave_their_operands_alone():
    # operator.and_ / or_ end in '_' to dodge a keyword: they are not in-place (a mask used twice stays itself)
    def f(a, b):
        m = a > 0
        both, either = m & (b > 0), m | (b > 0)
        return m, both, either, m.sum()

    compile_and_compare(f, lambda: torch.randn(3, 4), lambda: torch.randn(3, 4))


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
def test_more_activations_and_1d_pooling(dtype):
    special = torch.tensor([float('nan'), 0.3, -0.3, 0.6, -0.6, 30.0, -30.0], dtype=dtype)

    def f(x, w, s):
        return (F.selu(x), F.celu(x, 0.7), F.prelu(x, w), F.prelu(x, w[:1]), F.rrelu(x), F.logsigmoid(x * 20),
                F.softsign(x), F.softshrink(x, 0.3), F.hardshrink(x, 0.3), F.tanhshrink(x), F.threshold(x, 0.1, -2.0),
                F.softmin(x, 1), F.softplus(x * 30), F.softplus(x, beta=2, threshold=1), F.hardshrink(s),
                F.softshrink(s), F.threshold(s, 0.5, 9.0), torch.selu(x), torch.celu(x), torch.prelu(x, w),
                F.max_pool1d(x, 2), F.max_pool1d(x, 3, 2, 1), F.avg_pool1d(x, 3, 1, 1, count_include_pad=False),
                F.adaptive_max_pool1d(x, 3), torch.max_pool1d(x, 2), torch.avg_pool1d(x, 2),
                F.local_response_norm(x, 3), F.local_response_norm(x, 2, alpha=0.1, beta=0.5, k=2.0))

    compile_and_compare(f, lambda: torch.randn(2, 4, 7, dtype=dtype), lambda: torch.rand(4, dtype=dtype),
                        lambda: special)


def test_sorting():
    def f(x, r):
        v, i = torch.sort(x, 1)
        top = torch.topk(x, 3)
        return (v, i, *torch.sort(x, 0, descending=True), torch.argsort(x, -1, descending=True), torch.msort(x),
                top.values, top.indices, *torch.topk(x, 2, dim=0, largest=False), *x.topk(1), *x.sort(stable=True),
                *torch.sort(r, stable=True), *torch.kthvalue(x, 2, 1), *x.kthvalue(3, 0, keepdim=True),
                *torch.median(x, 1), torch.median(x), r.median(-1, keepdim=True).values, x.argsort(0))

    def with_nan():
        x = torch.randn(4, 7)
        x[1, 3] = float('nan')
        return x

    compile_and_compare(f, with_nan, lambda: torch.randint(0, 3, (3, 9)))  # (integer rows full of ties)


def test_modules_in_fx_graphs():
    """The nn.Module twins of the functions above, as call_module nodes of torch.fx.symbolic_trace graphs."""
    from torch import nn

    from hidet.frontend.torch import dynamo_backend

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.SELU(), nn.CELU(0.5), nn.LogSigmoid(), nn.Softsign(), nn.Softshrink(0.2),
                                      nn.Hardshrink(0.1), nn.Tanhshrink(), nn.Threshold(-0.5, 1.0), nn.RReLU(),
                                      nn.PReLU(8), nn.Softmin(1), nn.LocalResponseNorm(3), nn.PixelShuffle(2),
                                      nn.PixelUnshuffle(2))
            self.pool1d, self.avg1d = nn.MaxPool1d(3, 2, 1), nn.AvgPool1d(2)
            self.cos, self.dist = nn.CosineSimilarity(dim=1), nn.PairwiseDistance(p=1.0)

        def forward(self, x):
            y = self.body(x)
            flat = y.flatten(2)
            return y, self.pool1d(flat), self.avg1d(flat), self.cos(y, x), self.dist(flat[0], flat[1])

    model = Net().eval()
    x = torch.randn(2, 8, 4, 6)
    gm = torch.fx.symbolic_trace(model)
    assert {type(m).__name__ for m in gm.modules()} >= {'SELU', 'PReLU', 'PixelShuffle', 'CosineSimilarity'}
    compiled = dynamo_backend.hidet_backend(gm, [x])
    with torch.no_grad():
        for got, want in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('case', ['reduce_0d', 'roll_empty', 'unbatched_pooling', 'divisor_override', 'pool3d'])
def test_frontend_gaps_found_by_the_original_tests(case):
    # cases from PyTorch's OpInfo samples and the original Hidet's tests that failed here (issue 24)
    x0, empty = (lambda: torch.randn(())), (lambda: torch.randn(0, 3))
    image = lambda: torch.randn(3, 7, 6)  # noqa: E731  (unbatched: C, H, W)
    batch = lambda: torch.randn(2, 3, 7, 7)  # noqa: E731
    if case == 'reduce_0d':  # dimension 0 (or -1) of a 0-d tensor, as torch
        compile_and_compare(lambda x: (x.sum(0) + 1, torch.amax(x, -1), x.mean(0, keepdim=True), x.argmax(0)), x0)
    elif case == 'roll_empty':
        compile_and_compare(lambda x: torch.roll(x, 1, 0) + 1, empty)
    elif case == 'unbatched_pooling':
        compile_and_compare(lambda x: (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, 2, 1), F.adaptive_avg_pool2d(x, 2),
                                       F.adaptive_max_pool2d(x, 2), F.avg_pool1d(x[0], 2),
                                       F.adaptive_avg_pool1d(x[0], 3)), image)
    elif case == 'divisor_override':
        compile_and_compare(lambda x: (F.avg_pool2d(x, 3, 2, 1, divisor_override=5),
                                       F.avg_pool2d(x, 2, divisor_override=3)), batch)
    else:  # 3-D pooling, as two 2-D ones (max and average are separable over a box window)
        compile_and_compare(lambda x: (F.max_pool3d(x, 2), F.avg_pool3d(x, 3, 2, 1),
                                       F.max_pool3d(x, (3, 2, 3), (2, 1, 2), (1, 1, 0), dilation=(1, 2, 1),
                                                    ceil_mode=True),
                                       F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                                       F.max_pool3d(x[0], 2)), lambda: torch.randn(2, 3, 6, 7, 8))
