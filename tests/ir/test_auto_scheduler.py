"""The auto-scheduler's choices (hidet/ir/schedulers): vectorized CUDA kernels for injective outputs, row
and column styles of reductions, the CPU loop nest, nested and repeated reductions computed once. Each
schedule's structure is checked on any machine; its results against torch on every device."""
import pytest
import torch

import hidet
from hidet import ops
from hidet.graph.operator import Operator
from hidet.graph.ops.pool import Pool2dOp
from hidet.ir.compute import compute, reduce, tensor_input
from hidet.ir.expr import call, cast, convert, maximum, select
from hidet.ir.schedulers import schedule_task
from hidet.ir.stmt import For, If, Seq, VectorCopy
from hidet.ir.task import Task


class TaskOp(Operator):
    def __init__(self, task: Task, *inputs):
        super().__init__(list(inputs), {}, task)


def run(task: Task, *tensors: torch.Tensor) -> torch.Tensor:
    return TaskOp(task, *[hidet.from_torch(t) for t in tensors]).get_output(0).torch()


def close(actual: torch.Tensor, expected: torch.Tensor, tol=1e-5):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def stmts(s):
    """Every statement under ``s`` (pre-order)."""
    yield s
    children = s.stmts if isinstance(s, Seq) else [s.body] if isinstance(s, For) else \
        [s.then] + ([s.otherwise] if s.otherwise is not None else []) if isinstance(s, If) else []
    for c in children:
        yield from stmts(c)


def calls(f):
    """The names of the builtins a kernel calls."""
    text = str(f)
    return {name for name in ('hidet_block_reduce', 'hidet_warp_reduce', 'hidet_column_reduce') if name in text}


def kernel(task: Task, target: str):
    module = schedule_task(task, target)
    assert len(module.functions) == 1
    return module.functions[0]


def elementwise(shapes, dtypes, fn, out_dtype=None):
    nodes = [tensor_input(f'x{i}', d, s) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    shape = shapes[0]

    def element(*idx):
        reads = []
        for n in nodes:
            offset = len(idx) - len(n.shape)
            reads.append(n[tuple(0 if e == 1 else idx[offset + k] for k, e in enumerate(n.shape))])
        return fn(*reads)

    return Task('ew', nodes, [compute('y', shape, element, dtype=out_dtype)])


# ---------------------------------------------------------------- CUDA: vectorized injective kernels
def test_vectorized_add_with_row_and_column_broadcast():
    task = elementwise([[64, 128], [128], [64, 1]], ['float16'] * 3, lambda a, b, c: a + b * c)
    f = kernel(task, 'cuda')
    assert f.fallback is not None and f.fallback.name == 'ew_k0_scalar'
    copies = [s for s in stmts(f.body) if isinstance(s, VectorCopy)]
    assert [c.count for c in copies] == [8, 8, 8]  # x0 and x1 loaded, y stored: 8 halves = 16 bytes
    assert f.aligned == ((0, 16), (1, 16), (3, 16))  # x2 (broadcast along the row) is read as a scalar
    assert f.grid == (64 * 128 // 8 // 256,)


def test_vector_width_follows_the_widest_element():
    task = elementwise([[32, 64]], ['float32'], lambda a: a, out_dtype='float16')
    f = kernel(task, 'cuda')
    assert [c.count for c in stmts(f.body) if isinstance(c, VectorCopy)] == [4, 4]  # 4 floats in, 4 halves out
    assert f.aligned == ((0, 16), (1, 8))


def test_no_vectors_where_the_width_does_not_allow():
    odd = elementwise([[10, 7]], ['float16'], lambda a: a * 2)
    f = kernel(odd, 'cuda')
    assert f.fallback is None and not any(isinstance(s, VectorCopy) for s in stmts(f.body))


def test_strided_reads_go_per_lane_under_a_vector_store():
    """A transpose, and an NCHW input made channels-last with its channels padded to 8 (a network's first
    layer): each lane reads its element, consecutive threads consecutive memory; the store is one vector."""
    x = tensor_input('x', 'float32', [64, 64])
    transposed = Task('t', [x], [compute('y', [64, 64], lambda i, j: x[j, i])])
    image = tensor_input('x', 'float16', [2, 3, 8, 8])
    nhwc = Task('p', [image], [compute('y', [2, 8, 8, 8], lambda n, h, w, c: select(c < 3, image[n, c, h, w],
                                                                                     convert(0.0, 'float16')))])
    for task, lanes in ((transposed, 4), (nhwc, 8)):
        f = kernel(task, 'cuda')
        assert [c.count for c in stmts(f.body) if isinstance(c, VectorCopy)] == [lanes]  # the store only
        assert f.aligned == ((1, 16),)


def test_unaligned_and_conditional_reads_go_per_element():
    x = tensor_input('x', 'float32', [16, 33])
    shifted = Task('s', [x], [compute('y', [16, 32], lambda i, j: x[i, j + 1])])
    padded = Task('p', [x], [compute('y', [16, 36], lambda i, j: select(j < 33, x[i, j], 0.0))])
    for task in (shifted, padded):
        f = kernel(task, 'cuda')
        assert [c.count for c in stmts(f.body) if isinstance(c, VectorCopy)] == [4]  # the store only
        assert f.aligned == ((1, 16),)


def test_vectorized_kernels_compute_like_torch(device):
    x, b = torch.randn(64, 128, device=device).half(), torch.randn(128, device=device).half()
    c = torch.randn(64, 1, device=device).half()
    task = elementwise([[64, 128], [128], [64, 1]], ['float16'] * 3, lambda p, q, r: p + q * r)
    close(run(task, x, b, c), x + b * c, 2e-3)
    f = torch.randn(32, 64, device=device)
    close(run(elementwise([[32, 64]], ['float32'], lambda a: a, out_dtype='float16'), f), f.half(), 1e-3)
    xs = torch.randn(16, 33, device=device)
    xt = tensor_input('x', 'float32', [16, 33])
    close(run(Task('s', [xt], [compute('y', [16, 32], lambda i, j: xt[i, j + 1])]), xs), xs[:, 1:])
    padded = Task('p', [xt], [compute('y', [16, 36], lambda i, j: select(j < 33, xt[i, j], 0.0))])
    close(run(padded, xs), torch.nn.functional.pad(xs, [0, 3]))
    xs = torch.randn(33, 16, device=device)
    xt = tensor_input('x', 'float32', [33, 16])
    close(run(Task('t', [xt], [compute('y', [16, 32], lambda i, j: xt[j + 1, i])]), xs), xs[1:].t())
    image = torch.randn(2, 3, 8, 8, device=device).half()
    it = tensor_input('x', 'float16', [2, 3, 8, 8])
    nhwc = Task('p', [it], [compute('y', [2, 8, 8, 8], lambda n, h, w, c: select(c < 3, it[n, c, h, w],
                                                                                 convert(0.0, 'float16')))])
    close(run(nhwc, image), torch.nn.functional.pad(image.permute(0, 2, 3, 1), [0, 5]), 0.0)


def test_unaligned_buffers_run_the_scalar_kernel(device):
    # a view at an odd offset: the launcher sees an unaligned pointer and runs the fallback
    base = torch.randn(64 * 128 + 1, device=device).half()
    x = base[1:].view(64, 128)
    b = torch.randn(128, device=device).half()
    task = elementwise([[64, 128], [128]], ['float16'] * 2, lambda p, q: p - q)
    close(run(task, x, b), x - b, 2e-3)


# ---------------------------------------------------------------- CUDA: row and column reductions
def reduction(shape, axis, kind='sum', dtype='float32'):
    x = tensor_input('x', dtype, shape)
    out_shape = [s for d, s in enumerate(shape) if d != axis]

    def element(*idx):
        def value(r):
            full = list(idx)
            full.insert(axis, r)
            return x[tuple(full)]

        return reduce([shape[axis]], value, kind)

    return Task(f'reduce_{kind}', [x], [compute('y', out_shape, element)])


@pytest.mark.parametrize('shape,axis,style', [
    ([4096, 4096], 1, {'hidet_block_reduce'}),  # innermost reduced: a block per row
    ([512, 60], 1, {'hidet_warp_reduce'}),  # short rows: a warp per row
    ([4096, 4096], 0, {'hidet_column_reduce'}),  # few columns, long: threads of a block column share one
    ([4, 70, 9], 1, {'hidet_column_reduce'}),
    ([64, 1 << 20], 0, set()),  # many columns: a thread per column
    ([65536, 9], 1, set()),  # short rows, many: a thread per row (a warp would idle 23 of its lanes)
], ids=str)
def test_reduction_style_follows_the_reduced_axis(shape, axis, style):
    f = kernel(reduction(shape, axis), 'cuda')
    assert calls(f) == style


@pytest.mark.parametrize('shape,axis', [([4096, 96], 0), ([3, 500, 40], 1), ([300, 8], 0), ([9, 70, 4], 0)],
                         ids=str)
@pytest.mark.parametrize('kind', ['sum', 'max', 'min', 'mean'])
def test_column_reductions_compute_like_torch(shape, axis, kind, device):
    x = torch.randn(shape, device=device)
    expected = {'sum': lambda: x.double().sum(axis).float(), 'mean': lambda: x.double().mean(axis).float(),
                'max': lambda: x.amax(axis), 'min': lambda: x.amin(axis)}[kind]()
    close(run(reduction(shape, axis, kind), x), expected, 1e-4)


def test_column_reductions_of_bools_and_halves(device):
    b = torch.rand(1000, 24, device=device) > 0.3
    close(run(reduction([1000, 24], 0, 'any', 'bool'), b), b.any(0))
    close(run(reduction([1000, 24], 0, 'all', 'bool'), b), b.all(0))
    h = torch.randn(2048, 48, device=device).half()
    close(run(reduction([2048, 48], 0, 'sum', 'float16'), h), h.float().sum(0).half(), 2e-2)


def test_small_reductions_over_many_outputs_compute_like_torch(device):
    """A thread per output element: a depthwise 3x3 convolution (9-element windows, padded) and a softmax
    over rows of 16 (two reductions per row)."""
    from hidet import ops

    x, w = torch.randn(2, 32, 40, 40, device=device), torch.randn(32, 1, 3, 3, device=device)
    y = ops.conv2d(hidet.from_torch(x), hidet.from_torch(w), padding=1, groups=32).torch()
    close(y, torch.nn.functional.conv2d(x, w, padding=1, groups=32), 1e-4)
    s = torch.randn(40000, 16, device=device)
    close(ops.softmax(hidet.from_torch(s), 1).torch(), torch.softmax(s, 1), 1e-5)


def _pool(x, kind, kernel=3, stride=2, padding=1, ceil_mode=False, count_include_pad=True):
    """The channels-last (NHWC) pooling of ``x`` (a hidet tensor or symbol)."""
    return Pool2dOp(x, kind, [kernel] * 2, [stride] * 2, [padding] * 2, [1, 1], ceil_mode, count_include_pad,
                    channels_last=True)


def test_channels_last_pooling_loads_a_window_position_in_one_vector():
    """A thread per 8 channels: each window position's 8 halves in one 16-byte load under the window's bounds,
    8 accumulators, one store; an NCHW pool (its window strides along the output's innermost index) keeps a
    thread per output."""
    f = kernel(_pool(hidet.symbol([8, 56, 56, 64], dtype='float16'), 'max').task, 'cuda')
    assert f.fallback is not None and f.fallback.name == 'max_pool2d_k0_scalar'
    assert [c.count for c in stmts(f.body) if isinstance(c, VectorCopy)] == [8, 8]
    guarded = [s for s in stmts(f.body) if isinstance(s, If) and isinstance(s.then, Seq)
               and all(isinstance(c, VectorCopy) for c in s.then.stmts)]
    assert len(guarded) == 1  # (in the window's unrolled loop)
    assert f.aligned == ((0, 16), (1, 16)) and f.grid == (8 * 28 * 28 * 64 // 8 // 256,)
    nchw = Pool2dOp(hidet.symbol([2, 64, 56, 56], dtype='float16'), 'max', [3, 3], [2, 2], [1, 1], [1, 1], False,
                    True)
    g = kernel(nchw.task, 'cuda')
    assert g.fallback is None and not any(isinstance(c, VectorCopy) for c in stmts(g.body))
    # fewer outputs: vectors of 4 keep 32768 threads or more (25088 vectors of 8 would not); 7 x 7 x 1152, not
    # even vectors of 2: a thread per output
    few = kernel(_pool(hidet.symbol([1, 112, 112, 64], dtype='float16'), 'max').task, 'cuda')
    assert [c.count for c in stmts(few.body) if isinstance(c, VectorCopy)] == [4, 4]
    fewer = kernel(_pool(hidet.symbol([1, 14, 14, 1152], dtype='float16'), 'max').task, 'cuda')
    assert fewer.fallback is None and not any(isinstance(c, VectorCopy) for c in stmts(fewer.body))


def test_a_read_under_a_condition_the_lanes_share_is_one_guarded_vector_load():
    """Padding an outer dimension: the condition does not depend on the vector's lanes, so the row's vector is
    loaded under it (padding along the lanes stays per element: test_unaligned_and_conditional_reads_...)."""
    x = tensor_input('x', 'float16', [16, 64])
    padded = Task('p', [x], [compute('y', [18, 64], lambda i, j: select((i >= 1) & (i < 17), x[i - 1, j],
                                                                        convert(0.0, 'float16')))])
    f = kernel(padded, 'cuda')
    (guard,) = [s for s in stmts(f.body) if isinstance(s, If)]
    assert [c.count for c in stmts(guard.then) if isinstance(c, VectorCopy)] == [8]
    assert f.aligned == ((0, 16), (1, 16))


def test_channels_last_depthwise_convolutions_in_vectors_compute_like_torch(device):
    """A mobile network's 3x3 depthwise convolutions (channels-last, float16): the input's channels in guarded
    vectors, the weight's in plain ones, 8 and 4 lanes."""
    from torch.nn import functional as F

    for shape, stride in (([2, 56, 56, 64], 1), ([1, 112, 112, 48], 2), ([1, 64, 64, 40], 1)):
        channels = shape[-1]
        x = torch.randn(*shape, device=device, dtype=torch.float16)
        w = (torch.randn(3, 3, channels, device=device) / 3).half()
        y = ops.depthwise_conv2d_channels_last(hidet.from_torch(x), hidet.from_torch(w), stride=stride, padding=1)
        task = ops.depthwise_conv2d_channels_last(hidet.symbol(shape, dtype='float16'),
                                                  hidet.symbol([3, 3, channels], dtype='float16'), stride=stride,
                                                  padding=1).trace[0].task
        assert any(isinstance(c, VectorCopy) for c in stmts(kernel(task, 'cuda').body))
        expected = F.conv2d(x.permute(0, 3, 1, 2).double().cpu(), w.permute(2, 0, 1).unsqueeze(1).double().cpu(),
                            stride=stride, padding=1, groups=channels)
        close(y.torch().cpu(), expected.permute(0, 2, 3, 1).half(), 2e-3)


@pytest.mark.parametrize('dtype', ['float16', 'float32'])
def test_channels_last_pooling_computes_like_torch(dtype, device):
    """Vectors of 8, 4 and 2 lanes and none (3 channels), padded and ceil-mode windows, averages with and
    without the padding counted, and a window of a computed value (a scale and a ReLU read in vectors too)."""
    from torch.nn import functional as F

    torch_dtype = getattr(torch, dtype)
    tol = 2e-3 if dtype == 'float16' else 1e-5
    for channels in (64, 24, 12, 3):
        x = torch.randn(8, 63, 64, channels, device=device, dtype=torch_dtype)
        nchw = x.permute(0, 3, 1, 2).float()
        h = hidet.from_torch(x)
        for kind, args, expected in (
                ('max', {}, F.max_pool2d(nchw, 3, 2, 1)),
                ('max', dict(kernel=2, padding=0, ceil_mode=True), F.max_pool2d(nchw, 2, ceil_mode=True)),
                ('avg', {}, F.avg_pool2d(nchw, 3, 2, 1)),
                ('avg', dict(ceil_mode=True, count_include_pad=False),
                 F.avg_pool2d(nchw, 3, 2, 1, ceil_mode=True, count_include_pad=False))):
            y = _pool(h, kind, **args).get_output(0).torch()
            close(y, expected.permute(0, 2, 3, 1).to(torch_dtype), tol)
    x, scale = torch.randn(8, 57, 57, 32, device=device), torch.randn(32, device=device)
    xt, st = tensor_input('x', 'float32', [8, 57, 57, 32]), tensor_input('s', 'float32', [32])
    task = Task('pool_of_relu', [xt, st], [compute('y', [8, 28, 28, 32], lambda n, i, j, c: reduce(
        [3, 3], lambda a, b: maximum(xt[n, 2 * i + a, 2 * j + b, c] * st[c], convert(0.0)),
        'max'))])
    assert [c.count for c in stmts(kernel(task, 'cuda').body) if isinstance(c, VectorCopy)] == [4, 4, 4]
    expected = F.max_pool2d(F.relu(x * scale).permute(0, 3, 1, 2), 3, 2).permute(0, 2, 3, 1)
    close(run(task, x, scale), expected.contiguous())


# ---------------------------------------------------------------- nested and repeated reductions
def variance_task(m, n):
    x = tensor_input('x', 'float32', [m, n])

    def element(i):
        mean = reduce([n], lambda j: x[i, j], 'mean')
        return reduce([n], lambda k: (x[i, k] - mean) * (x[i, k] - mean), 'sum') / float(n - 1)

    return Task('var', [x], [compute('y', [m], element)])


def loop_depths(f):
    """The nesting depth of every reduction loop (loops whose variable is a k…)."""
    depths = []

    def visit(s, depth):
        if isinstance(s, For):
            inner = depth + (1 if s.var.name.startswith('k') else 0)
            if s.var.name.startswith('k'):
                depths.append(inner)
            visit(s.body, inner)
        elif isinstance(s, Seq):
            for c in s.stmts:
                visit(c, depth)
        elif isinstance(s, If):
            visit(s.then, depth)

    visit(f.body, 0)
    return depths


@pytest.mark.parametrize('target', ['cpu', 'cuda'])
def test_inner_reduction_is_hoisted(target):
    # var as the mean of (x - mean(x))^2: the inner mean does not depend on the outer sum's axis, so it is
    # computed once per output, before the sum's loop, not once per element of the sum (n^2 reads)
    f = kernel(variance_task(8, 300), target)
    assert loop_depths(f) == [1, 1]


def test_hoisted_reduction_computes_like_torch(device):
    x = torch.randn(8, 300, device=device) + 3
    close(run(variance_task(8, 300), x), x.var(1), 1e-4)
    x2 = torch.randn(5, 40, device=device)  # warp mode on CUDA
    close(run(variance_task(5, 40), x2), x2.var(1), 1e-4)


def softmax_task(m, n):
    x = tensor_input('x', 'float32', [m, n])
    mx = compute('m', [m], lambda i: reduce([n], lambda k: x[i, k], 'max'))
    e = compute('e', [m, n], lambda i, j: call('exp', x[i, j] - mx[i]))
    s = compute('s', [m], lambda i: reduce([n], lambda k: e[i, k], 'sum'))
    return Task('softmax', [x], [compute('y', [m, n], lambda i, j: e[i, j] / s[i])])


@pytest.mark.parametrize('target', ['cpu', 'cuda'])
def test_repeated_reduction_is_computed_once(target):
    # the max appears in the output and inside the sum: one max loop, one sum loop
    assert loop_depths(kernel(softmax_task(6, 300), target)) == [1, 1]


def test_repeated_reduction_computes_like_torch(device):
    x = torch.randn(6, 300, device=device)
    close(run(softmax_task(6, 300), x), torch.softmax(x, 1))


def layer_norm_task(m, n, dtype='float32'):
    x = tensor_input('x', dtype, [m, n])

    def element(i, j):
        xf = lambda k: cast(x[i, k], 'float32')  # noqa: E731
        mean = reduce([n], lambda k: xf(k), 'mean')
        var = reduce([n], lambda k: (xf(k) - mean) * (xf(k) - mean), 'mean')
        return cast((xf(j) - mean) * call('rsqrt', var + 1e-5), dtype)

    return Task('layer_norm', [x], [compute('y', [m, n], element)])


@pytest.mark.parametrize('target', ['cpu', 'cuda'])
@pytest.mark.parametrize('n,mode', [(300, 'hidet_block_reduce'), (40, 'hidet_warp_reduce')])
def test_row_broadcast_reductions_run_once_per_row(target, n, mode):
    # layer norm's mean and variance are computed before the loop over the row's columns, not per element (on
    # CUDA: the plain kernel, the fallback of the one holding its row in registers, tested below)
    f = kernel(layer_norm_task(6, n), target)
    f = f.fallback or f
    rows = [s for s in stmts(f.body) if isinstance(s, For) and s.var.name == 'row']
    columns = [s for s in stmts(f.body) if isinstance(s, For) and s.var.name == 'j']
    assert len(rows) == 1 and len(columns) == 1
    assert not [s for s in stmts(columns[0].body) if isinstance(s, For)]  # no reduction inside the column loop
    assert loop_depths(f) == [1, 1]
    if target == 'cuda':
        assert calls(f) == {mode}
    else:
        assert rows[0].kind == 'parallel' and columns[0].kind == 'simd'


@pytest.mark.parametrize('m,n,dtype', [(6, 300, 'float32'), (33, 40, 'float16'), (3, 2000, 'float16'),
                                       (1100, 200, 'float16'), (128, 768, 'float16'), (5, 8192, 'float16'),
                                       (7, 13, 'float16')])
def test_row_broadcast_computes_like_torch(m, n, dtype, device):
    x = (torch.randn(m, n, device=device) * 3 + 1).to(getattr(torch, dtype))
    expected = torch.nn.functional.layer_norm(x.float(), [n]).to(x.dtype)
    close(run(layer_norm_task(m, n, dtype), x), expected, 1e-5 if dtype == 'float32' else 2e-3)


def held_reads(f):
    """(loops over a row's vectors, the vector loads of each) of a kernel holding its row in registers."""
    loops = [s for s in stmts(f.body) if isinstance(s, For) and s.var.name.startswith('i')]
    return loops, [[s for s in stmts(loop.body) if isinstance(s, VectorCopy) and s.src.name.startswith('in')]
                   for loop in loops]


@pytest.mark.parametrize('m,n,dtype,threads', [(6, 300, 'float32', 32), (128, 768, 'float16', 32),
                                               (4, 4096, 'float16', 128)])
def test_row_kernel_reads_its_row_once(m, n, dtype, threads):
    # layer norm's three loops (mean, variance, outputs) walk the row's vectors alike: the first loads each
    # vector of the row into registers with one 16-byte load, the others read the registers; outputs are stored
    # as vectors; a warp per row (a block where a lane would hold more than ROW_VECTORS_PER_THREAD vectors)
    f = kernel(layer_norm_task(m, n, dtype), 'cuda')
    loops, loads = held_reads(f)
    assert len(loops) == 3 and [len(x) for x in loads] == [1, 0, 0]
    assert loads[0][0].count * loads[0][0].dst.dtype.nbytes == 16
    stores = [s for s in stmts(f.body) if isinstance(s, VectorCopy) and s.dst.name == 'out0']
    assert len(stores) == 1 and stores[0].count * stores[0].src.dtype.nbytes == 16
    assert f.block == (threads,) or (threads == 32 and f.block[0] % 32 == 0)
    text = str(f.body)  # (str(f) has the fallback's too)
    assert ('hidet_warp_reduce' in text, 'hidet_block_reduce' in text) == (threads == 32, threads > 32)
    assert text.count('in0[') == 1  # the one vector load
    assert f.aligned == ((0, 16), (1, 16)) and f.fallback is not None


def test_row_kernel_keeps_the_plain_kernel_where_it_cannot_hold_the_row():
    # a read under a condition (it may leave the tensor), a reduction over other elements than the row's
    x = tensor_input('x', 'float32', [6, 300])
    s = compute('s', [6], lambda i: reduce([300], lambda k: select(x[i, k] > 0, x[i, k], 0.0), 'sum'))
    f = kernel(Task('masked', [x], [compute('y', [6, 300], lambda i, j: x[i, j] / s[i])]), 'cuda')
    assert f.fallback is None and not held_reads(f)[0]
    half = compute('h', [6], lambda i: reduce([150], lambda k: x[i, k], 'sum'))
    f = kernel(Task('half_row', [x], [compute('y', [6, 300], lambda i, j: x[i, j] - half[i])]), 'cuda')
    assert f.fallback is None and not held_reads(f)[0]
    # rows of fewer 16-byte vectors than a warp has lanes (convnext's layer norm over 96 channels: 12)
    f = kernel(layer_norm_task(3136, 96, 'float16'), 'cuda')
    assert f.fallback is None and not held_reads(f)[0]


def test_row_kernel_runs_the_plain_kernel_on_unaligned_buffers(device):
    x = (torch.randn(128 * 768 + 1, device=device) * 3 + 1).half()[1:].view(128, 768)  # 2 bytes off 16
    expected = torch.nn.functional.layer_norm(x.float(), [768]).half()
    close(run(layer_norm_task(128, 768, 'float16'), x), expected, 2e-3)


def test_softmax_held_in_registers_computes_like_torch(device):
    x = torch.randn(6, 300, device=device)
    close(run(softmax_task(6, 300), x), torch.softmax(x, 1))
    assert held_reads(kernel(softmax_task(6, 300), 'cuda'))[1][0]  # (the max's loop loads the row)


# ---------------------------------------------------------------- CPU loop nest
def test_cpu_inner_loop_is_contiguous_and_simd():
    task = elementwise([[64, 1000], [1000]], ['float16'] * 2, lambda a, b: a + b)
    f = kernel(task, 'cpu')
    assert isinstance(f.body, For) and f.body.kind == 'parallel'
    inner = [s for s in stmts(f.body) if isinstance(s, For) and s.kind == 'simd']
    assert len(inner) == 1
    body = str(inner[0].body)
    assert '/' not in body and '%' not in body, body  # indices linear in the inner variable: it vectorizes


def test_cpu_splits_a_long_innermost_dimension():
    f = kernel(elementwise([[1 << 20]], ['float32'], lambda a: a * 2), 'cpu')
    assert f.body.kind == 'parallel' and f.body.stop.value >= 64  # enough iterations for the threads


def test_cpu_loop_nest_computes_like_torch(device):
    for shape in ([1 << 16], [3, 5000], [7, 3], []):
        x = torch.randn(shape, device=device)
        close(run(elementwise([list(shape)], ['float32'], lambda a: a * 2 + 1), x), x * 2 + 1)
