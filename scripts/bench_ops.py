"""Operator benchmark on the GPU: hidet's generated kernels against torch eager, same inputs, median of
CUDA-event timings (GB/s counts each input read and each output written once).

    python scripts/bench_ops.py
"""
import statistics

import torch
import torch.nn.functional as F

import hidet
from hidet import ops


def median_ms(fn, warmup: int = 10, repeat: int = 50) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def kernel(op: hidet.graph.operator.Operator):
    """Launch ``op``'s compiled kernel on preallocated outputs: the kernel's time, not Python's."""
    from hidet.drivers import build_task

    module = build_task(op.task, 'cuda')['launch']
    outputs = [hidet.empty(t.shape, t.dtype, 'cuda') for t in op.outputs]
    return lambda: module(*op.inputs, *outputs)


def main() -> None:
    from hidet.graph.ops.arithmetic import UnaryElementwiseOp, BinaryElementwiseOp
    from hidet.graph.ops.reduce import ReduceOp
    from hidet.ir.expr import call

    x = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)
    y = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)
    r = torch.randn(4096, device='cuda', dtype=torch.float16)
    hx, hy, hr = hidet.from_torch(x), hidet.from_torch(y), hidet.from_torch(r)
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
    ]
    print(f'{"case":28s} {"hidet ms":>9s} {"torch ms":>9s} {"hidet/torch":>11s} {"hidet GB/s":>10s}')
    for name, h, t, nbytes in cases:
        h_ms, t_ms = median_ms(h), median_ms(t)
        print(f'{name:28s} {h_ms:9.3f} {t_ms:9.3f} {h_ms / t_ms:11.2f} {nbytes / h_ms / 1e6:10.0f}')


if __name__ == '__main__':
    main()
