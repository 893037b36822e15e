"""The IR printer: scheduled kernels print as readable pseudo-code; task text (the cache key) keeps its form."""
from hidet.ir.compute import compute, reduce, tensor_input
from hidet.ir.dtypes import float32, int64
from hidet.ir.expr import BufferLoad, Var, call
from hidet.ir.schedulers import schedule_task
from hidet.ir.stmt import (Assign, Break, Declare, Evaluate, For, Function, If, IRModule, Return, Seq, Store,
                           While)
from hidet.ir.task import Task


def add_task():
    a, b = tensor_input('a', 'float32', [64, 128]), tensor_input('b', 'float32', [128])
    return Task('add', [a, b], [compute('c', [64, 128], lambda i, j: a[i, j] + b[j])])


def test_print_cpu_module():
    text = str(schedule_task(add_task(), 'cpu'))
    assert text.splitlines()[0] == 'module add (cpu): inputs 2, outputs 1'
    assert 'cpu kernel add_k0(in0: f32*, in1: f32*, out0: f32*)' in text
    assert 'parallel for t in range(64):' in text
    assert 'simd for j in range(128):' in text
    assert 'out0[((t * 128) + j)] = (in0[((t * 128) + j)] + in1[j])' in text


def test_print_cuda_module_with_its_fallback():
    text = str(schedule_task(add_task(), 'cuda'))
    lines = [line.strip() for line in text.splitlines()]
    assert 'cuda kernel add_k0_scalar(in0: f32*, in1: f32*, out0: f32*)  grid=(32,) block=(256,)' in lines
    assert '# add_k0 runs when its buffers are aligned (in0: 16, in1: 16, out0: 16 bytes), else add_k0_scalar' in lines
    assert 'for q in range(hidet_global_thread_idx(), 2048, hidet_global_threads()):' in lines
    assert 'x0_vec[0 : +4] = in0[((i0 * 128) + w0) : +4]  # one 16-byte vector' in lines
    assert 'unroll for j in range(4):' in lines
    assert 'out0[n0 : +4] = y_vec[0 : +4]  # one 16-byte vector' in lines


def test_print_reduction_kernel():
    x = tensor_input('x', 'float16', [8, 300])
    task = Task('rsum', [x], [compute('y', [8], lambda i: reduce([300], lambda k: x[i, k], 'sum'))])
    text = str(schedule_task(task, 'cuda').functions[0])
    assert 'acc1: f32 = 0.0' in text
    assert 'for k2 in range(hidet_thread_idx(), 300, 256):' in text
    assert 'acc1 = (acc1 + f32(in0[((n * 300) + k2)]))' in text
    assert 'acc1 = hidet_block_reduce_sum(acc1)' in text
    assert 'if (hidet_thread_idx() == 0):' in text
    assert 'out0[n] = f16(acc1)' in text


def test_print_statements_and_names():
    n, x, buf = Var('n', int64), Var('x', float32), Var('buf', float32, pointer=True)
    other_n = Var('n', int64)
    body = Seq([
        Declare(x, BufferLoad(buf, n, float32)),
        While(x < 10.0, Seq([Assign(x, x * 2.0), If(x > 5.0, Break())])),
        For(other_n, 1, 9, 2, Store(buf, other_n, x)),
        Evaluate(call('hidet_sync', dtype=int64)),
        Return(),
    ])
    f = Function('kern', [buf, n], body, 'cpu')
    assert str(f).splitlines() == [
        'cpu kernel kern(buf: f32*, n: i64)',
        '  x: f32 = buf[n]',
        '  while (x < 10.0):',
        '    x = (x * 2.0)',
        '    if (x > 5.0):',
        '      break',
        '  for n_1 in range(1, 9, 2):',
        '    buf[n_1] = x',
        '  hidet_sync()',
        '  return',
    ]
    assert str(IRModule('m', 'cpu', [f], 1, 0)).startswith('module m (cpu): inputs 1, outputs 0\n\ncpu kernel kern(')


def test_task_text_keeps_typed_constants():
    # the task's canonical text (its cache key) is unchanged by the pseudo-code printer
    assert '[64, 128] = [v0, v1] (a[v0, v1] + b[v1])' in add_task().text()
    x = tensor_input('x', 'float32', [4])
    assert '2.0:f32' in Task('t', [x], [compute('y', [4], lambda i: x[i] * 2.0)]).text()

