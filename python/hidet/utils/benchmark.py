"""benchmark_func: median latency of a callable, timed with CUDA events when a GPU is present."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Optional


def benchmark_func(run_func: Callable[[], object], warmup: int = 1, number: int = 5, repeat: int = 5,
                   median: bool = True, device: Optional[str] = None):
    """Run ``run_func`` ``warmup`` times, then ``repeat`` rounds of ``number`` calls; returns the median
    (or, with ``median=False``, the list) of the per-call latency of each round, in milliseconds.
    On a CUDA machine the rounds are timed with events on hidet's current stream and the device is
    synchronized, so asynchronous kernels are counted; ``device='cpu'`` times with the wall clock there too
    (for functions that run on the CPU)."""
    from hidet import cuda

    if number < 1 or repeat < 1:
        raise ValueError(f'number and repeat must be at least 1, got {number} and {repeat}')
    use_cuda = cuda.available() and device != 'cpu'
    for _ in range(warmup):
        run_func()
    if use_cuda:
        cuda.synchronize()
    results = []
    for _ in range(repeat):
        if use_cuda:
            start, end = cuda.Event(), cuda.Event()
            start.record()
            for _ in range(number):
                run_func()
            end.record()
            end.synchronize()
            cuda.synchronize()
            results.append(start.elapsed_time(end) / number)
        else:
            t0 = time.perf_counter()
            for _ in range(number):
                run_func()
            results.append((time.perf_counter() - t0) * 1000 / number)
    return statistics.median(results) if median else results
