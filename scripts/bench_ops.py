"""Operator benchmark on the GPU: hidet's generated kernels against torch eager, same inputs, median of
CUDA-event timings of back-to-back calls (GB/s counts each input read and each output written once).

    python scripts/bench_ops.py            # elementwise, reductions, copies at 4096 x 4096
    python scripts/bench_ops.py --norms    # one-kernel layer / RMS norm and softmax at transformer shapes: the
                                           # row held in registers, the plain row kernels, torch, inductor
    python scripts/bench_ops.py --attention  # the tensor-core attention kernel, each config and the default,
                                             # against torch's sdpa at the shapes of gpt2, bert, vit, llama
    python scripts/bench_ops.py --attention 'gpt2 b8 s512'  # those cases alone (names as the table prints them),
    # e.g. under Nsight Compute, one kernel of one case: ncu --clock-control none --set full
    #   -k regex:wg_r64_k64$ -c 1 python scripts/bench_ops.py --attention 'gpt2 b8 s512'
"""
import statistics

import torch
import torch.nn.functional as F

import hidet
from hidet import ops


def median_ms(fn, warmup: int = 10, repeat: int = 30, inner: int = 20) -> float:
    """Median over ``repeat`` samples of the time per call of ``inner`` back-to-back calls (so the GPU's
    queue stays full and the kernel's time, not the launch latency, is measured)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def kernel(op: hidet.graph.operator.Operator):
    """Launch ``op``'s compiled kernel on preallocated outputs: the kernel's time, not Python's."""
    from hidet.drivers import build_task

    module = build_task(op.task, 'cuda')['launch']
    outputs = [hidet.empty(t.shape, t.dtype, 'cuda') for t in op.outputs]
    return lambda: module(*op.inputs, *outputs)


def variance_rows(hx: hidet.Tensor) -> hidet.graph.operator.Operator:
    """var over the rows in one task, written as the mean of (x - mean(x))^2 (a nested reduction)."""
    from hidet.graph.operator import Operator
    from hidet.ir.compute import compute, reduce, tensor_input
    from hidet.ir.task import Task

    m, n = hx.shape
    x = tensor_input('x', hx.dtype, [m, n])

    def element(i):
        mean = reduce([n], lambda j: x[i, j], 'mean')
        return reduce([n], lambda k: (x[i, k] - mean) * (x[i, k] - mean), 'sum') / float(n - 1)

    class VarOp(Operator):
        def __init__(self, a):
            super().__init__([a], {}, Task('var_rows', [x], [compute('y', [m], element)]))

    return VarOp(hx)


def fused(build, shape, dtype=torch.float16):
    """The one fused operator ``hidet.graph.optimize`` makes of ``build(x)``, on a random input of ``shape``."""
    x = hidet.symbol(list(shape), str(dtype).split('.')[-1], 'cuda')
    graph = hidet.graph.optimize(hidet.trace_from(build(x), [x]))
    assert len(graph.nodes) == 1, [n for n in graph.nodes]
    node = graph.nodes[0]
    bound = hidet.from_torch(torch.randn(*shape, device='cuda', dtype=dtype))
    return type('Bound', (), {'task': node.task, 'inputs': [bound] + list(node.inputs[1:]), 'outputs': node.outputs})


def scheduled(op):
    """Launch the auto-scheduler's kernel of ``op`` as scheduled now (no template, no in-process memo)."""
    from hidet.backend.cache import build_library
    from hidet.backend.codegen import generate
    from hidet.ir.schedulers import schedule_task
    from hidet.runtime.compiled_module import CompiledModule

    module = CompiledModule(build_library(generate(schedule_task(op.task, 'cuda')), 'cuda', op.task.name))['launch']
    # torch tensors (sharing the memory): the launch goes to torch's current stream, which a CUDA graph captures
    args = [t.torch() for t in op.inputs] + [hidet.empty(t.shape, t.dtype, 'cuda').torch() for t in op.outputs]
    return lambda: module(*args)


def norms() -> None:
    """Row-broadcast kernels (lowering.row_split) at transformer shapes against torch eager and inductor: the
    auto-scheduler's kernel (``held``: the row held in registers, rows.py), and the plain kernel it falls back to
    (a block per row, its threads for 4 or 16 of a row's elements each, or a warp per row); kernel times from
    CUDA-graph replays (bench_matmul.graph_time), so host launches are not what is timed."""
    from bench_matmul import graph_time

    from hidet.ir.schedulers import auto

    w = hidet.from_torch(torch.rand(768, device='cuda', dtype=torch.float16) + 0.5)
    w96 = hidet.from_torch(torch.rand(96, device='cuda', dtype=torch.float16) + 0.5)
    w2k = hidet.from_torch(torch.rand(2048, device='cuda', dtype=torch.float16) + 0.5)
    cases = [('layer_norm 128x768', lambda x: ops.layer_norm(x, 768, w, w), (128, 768),
              lambda t: F.layer_norm(t, [768], w.torch(), w.torch())),
             ('layer_norm 197x768', lambda x: ops.layer_norm(x, 768, w, w), (197, 768),
              lambda t: F.layer_norm(t, [768], w.torch(), w.torch())),
             ('layer_norm 4096x768', lambda x: ops.layer_norm(x, 768, w, w), (4096, 768),
              lambda t: F.layer_norm(t, [768], w.torch(), w.torch())),
             ('layer_norm 3136x96', lambda x: ops.layer_norm(x, 96, w96, w96), (3136, 96),
              lambda t: F.layer_norm(t, [96], w96.torch(), w96.torch())),
             ('rms_norm 128x2048', lambda x: ops.rms_norm(x, 2048, w2k), (128, 2048),
              lambda t: F.rms_norm(t, [2048], w2k.torch())),
             ('softmax 1536x128', lambda x: ops.softmax(x, -1), (1536, 128), lambda t: torch.softmax(t, -1))]

    def plain(op, per_thread=None, warp=False):
        saved = (auto._cuda_row_in_registers, auto.ROW_ELEMENTS_PER_THREAD, auto.WARP_ROWS_MIN,
                 auto.BLOCK_REDUCE_MIN_EXTENT)
        auto._cuda_row_in_registers = lambda *args: None
        if per_thread is not None:
            auto.ROW_ELEMENTS_PER_THREAD, auto.WARP_ROWS_MIN = per_thread, 1 << 30
        if warp:
            auto.BLOCK_REDUCE_MIN_EXTENT, auto.WARP_ROWS_MIN = 1 << 30, 0
        try:
            return graph_time(scheduled(op), 20, 10)
        finally:
            (auto._cuda_row_in_registers, auto.ROW_ELEMENTS_PER_THREAD, auto.WARP_ROWS_MIN,
             auto.BLOCK_REDUCE_MIN_EXTENT) = saved

    columns = ['held µs', 'plain µs', '4/thread', '16/thread', 'warp', 'torch µs', 'inductor µs']
    print(f'{"case":24s} ' + ' '.join(f'{c:>11s}' for c in columns))
    for name, build, shape, reference in cases:
        op = fused(build, shape)
        t = op.inputs[0].torch()
        times = [graph_time(scheduled(op), 20, 10), plain(op), plain(op, 4), plain(op, 16), plain(op, warp=True),
                 graph_time(lambda: reference(t), 20, 10)]
        compiled = torch.compile(reference)
        compiled(t)
        times.append(graph_time(lambda: compiled(t), 20, 10))
        print(f'{name:24s} ' + ' '.join(f'{v * 1e3:11.2f}' for v in times), flush=True)


def attention(only=()) -> None:
    """The attention template's tensor-core configs (level 2's space) and its default at the models' shapes
    against torch's scaled_dot_product_attention (flash / cuDNN), kernel times from CUDA-graph replays; the
    cases named in ``only`` alone, where it names any."""
    from bench_matmul import graph_time

    from hidet.backend.cache import build_libraries
    from hidet.graph.ops.attention import AttentionOp
    from hidet.kernels.attention import find_attention_template
    from hidet.runtime.compiled_module import CompiledModule

    # (name, batch x heads, query rows, keys, head size, mask: none / add / causal)
    cases = [('gpt2 b1', 12, 128, 128, 64, 'causal'), ('bert b1', 12, 128, 128, 64, 'add'),
             ('vit b1', 12, 197, 197, 64, 'none'), ('llama b1', 32, 128, 128, 64, 'causal'),
             ('gpt2 b8 s512', 96, 512, 512, 64, 'causal'), ('bert b8 s512', 96, 512, 512, 64, 'add'),
             ('d128 b1 s1024', 32, 1024, 1024, 128, 'causal'), ('d80 b2 s300', 24, 300, 300, 80, 'none')]
    unknown = sorted(set(only) - {c[0] for c in cases})
    if unknown:
        raise SystemExit(f'bench_ops --attention: unknown case(s) {unknown}; the cases: {[c[0] for c in cases]}')
    prepared = []
    for name, bh, sq, sk, d, kind in cases:
        if only and name not in only:
            continue
        g = torch.Generator(device='cuda').manual_seed(0)
        q, k, v = (torch.randn(bh, n, d, device='cuda', dtype=torch.float16, generator=g) for n in (sq, sk, sk))
        mask = torch.randn(1, sq, sk, device='cuda', dtype=torch.float16, generator=g) if kind == 'add' else None
        args = [hidet.from_torch(t) for t in (q, k, v) + ((mask,) if mask is not None else ())]
        op = AttentionOp(*[hidet.symbol_like(a) for a in args[:3]],
                         hidet.symbol_like(args[3]) if mask is not None else None, d ** -0.5, kind == 'causal')
        template = find_attention_template(op.task, 'cuda')  # (this GPU's: on sm_90 the wgmma configs too)
        prepared.append((name, (q, k, v, mask, kind), template, template.space(2)))
    sources = [(t.source(c), 'cuda', 'attention') for _, _, t, configs in prepared for c in configs]
    paths = iter(build_libraries(sources))  # in parallel
    print(f'{"case":16s} {"default":>16s} {"µs":>7s} {"best":>16s} {"µs":>7s} {"torch µs":>9s} '
          f'{"default/torch":>13s}')
    for name, (q, k, v, mask, kind), template, configs in prepared:
        out = torch.empty(*q.shape[:-1], v.shape[-1], device='cuda', dtype=torch.float16)
        torch_args = [x for x in (q, k, v, mask) if x is not None] + [out]
        times = {}
        for cfg in configs:
            launch = CompiledModule(next(paths))['launch']
            times[cfg.name()] = graph_time(lambda: launch(*torch_args), 20, 10) * 1e3
        default = template.space(0)[0].name()
        best = min(times, key=times.get)
        q4, k4, v4 = (x.unsqueeze(0) for x in (q, k, v))  # [1, heads, s, d]: torch's flash / cuDNN kernels
        m4 = mask.unsqueeze(0) if mask is not None else None
        ref = graph_time(lambda: F.scaled_dot_product_attention(q4, k4, v4, attn_mask=m4, is_causal=kind == 'causal'),
                         20, 10) * 1e3
        print(f'{name:16s} {default:>16s} {times[default]:7.2f} {best:>16s} {times[best]:7.2f} {ref:9.2f} '
              f'{times[default] / ref:13.2f}')
        print('    ' + ', '.join(f'{c} {t:.2f}' for c, t in sorted(times.items(), key=lambda x: x[1])))


def main(slow=()) -> None:
    """``slow``: names of cases timed with few calls (kernels of other schedulers that take long)."""
    from hidet.graph.ops.arithmetic import UnaryElementwiseOp, BinaryElementwiseOp
    from hidet.graph.ops.reduce import ReduceOp
    from hidet.graph.ops.indexing import TakeOp
    from hidet.graph.ops.pool import Pool2dOp
    from hidet.graph.ops.transform import PermuteOp
    from hidet.ir.expr import call, cast

    x = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)
    y = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)
    r = torch.randn(4096, device='cuda', dtype=torch.float16)
    hx, hy, hr = hidet.from_torch(x), hidet.from_torch(y), hidet.from_torch(r)
    c = torch.randn(4096, 1, device='cuda', dtype=torch.float16)
    x32 = torch.randn(4096, 4096, device='cuda')
    wide = torch.randn(64, 1 << 18, device='cuda', dtype=torch.float16)
    table = torch.randn(32000, 4096, device='cuda', dtype=torch.float16)
    tokens = torch.randint(0, 32000, [8192], device='cuda')
    hc, hx32, hwide = hidet.from_torch(c), hidet.from_torch(x32), hidet.from_torch(wide)
    htable, htokens = hidet.from_torch(table), hidet.from_torch(tokens)
    gelu = lambda a: 0.5 * a * (1.0 + call('erf', a * 0.7071067811865476))  # noqa: E731
    cases = [
        ('add 4096x4096 f16', kernel(BinaryElementwiseOp(hx, hy, lambda a, b: a + b, 'add')), lambda: x + y,
         3 * x.numel() * 2),
        ('add row bias f16', kernel(BinaryElementwiseOp(hx, hr, lambda a, b: a + b, 'add')), lambda: x + r,
         2 * x.numel() * 2),
        ('gelu 4096x4096 f16', kernel(UnaryElementwiseOp(hx, gelu, 'gelu')), lambda: F.gelu(x), 2 * x.numel() * 2),
        ('sum rows 4096x4096 f16', kernel(ReduceOp(hx, 1, False, 'sum')), lambda: x.sum(1), x.numel() * 2),
        ('max cols 4096x4096 f16', kernel(ReduceOp(hx, 0, False, 'max')), lambda: x.amax(0), x.numel() * 2),
        ('softmax (4 ops, imperative)', lambda: ops.softmax(hx, -1), lambda: torch.softmax(x, -1), 2 * x.numel() * 2),
        ('mul column bias f16', kernel(BinaryElementwiseOp(hx, hc, lambda a, b: a * b, 'mul')), lambda: x * c,
         2 * x.numel() * 2),
        ('cast f32->f16 4096x4096', kernel(UnaryElementwiseOp(hx32, lambda a: cast(a, 'float16'), 'cast')),
         lambda: x32.half(), x.numel() * 6),
        ('embedding 8192x4096 f16', kernel(TakeOp(htable, 0, htokens, 'embedding')),
         lambda: F.embedding(tokens, table), 8192 * 4096 * 2 * 2),
        ('transpose 4096x4096 f16', kernel(PermuteOp(hx, [1, 0])), lambda: x.t().contiguous(), 2 * x.numel() * 2),
        ('sum cols 4096x4096 f32', kernel(ReduceOp(hx32, 0, False, 'sum')), lambda: x32.sum(0), x32.numel() * 4),
        ('max cols 64x262144 f16', kernel(ReduceOp(hwide, 0, False, 'max')), lambda: wide.amax(0), wide.numel() * 2),
        ('var rows 4096x4096 f32 (nested)', kernel(variance_rows(hx32)), lambda: x32.var(1), x32.numel() * 4),
    ]
    # resnet50's max-pool at batch 32 and an average pool, channels-last (NHWC) as the network runs them
    image = torch.randn(32, 112, 112, 64, device='cuda', dtype=torch.float16)
    nchw_view = image.permute(0, 3, 1, 2)  # (torch's channels-last memory format)
    himage = hidet.from_torch(image)
    pooled = 32 * 56 * 56 * 64 * 2
    cases += [
        ('max-pool 3x3 s2 32x112x112x64 NHWC', kernel(Pool2dOp(himage, 'max', [3, 3], [2, 2], [1, 1], [1, 1], False,
                                                            True, channels_last=True)),
         lambda: F.max_pool2d(nchw_view, 3, 2, 1), image.numel() * 2 + pooled),
        ('avg-pool 2x2 32x112x112x64 NHWC', kernel(Pool2dOp(himage, 'avg', [2, 2], [2, 2], [0, 0], [1, 1], False,
                                                         True, channels_last=True)),
         lambda: F.avg_pool2d(nchw_view, 2), image.numel() * 2 + pooled),
    ]
    print(f'{"case":32s} {"hidet ms":>9s} {"torch ms":>9s} {"hidet/torch":>11s} {"hidet GB/s":>10s}')
    for name, h, t, nbytes in cases:
        h_ms = median_ms(h, warmup=1, repeat=3, inner=1) if name in slow else median_ms(h)
        t_ms = median_ms(t)
        print(f'{name:32s} {h_ms:9.3f} {t_ms:9.3f} {h_ms / t_ms:11.2f} {nbytes / h_ms / 1e6:10.0f}')


if __name__ == '__main__':
    import sys

    if '--attention' in sys.argv:
        attention(sys.argv[sys.argv.index('--attention') + 1:])
    else:
        norms() if '--norms' in sys.argv else main()
