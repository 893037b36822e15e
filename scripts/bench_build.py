"""Build-time benchmark: a cold build of a simple elementwise kernel and a cache hit, on the CPU and
(where a GPU is present) CUDA, each in a fresh cache directory.

    python scripts/bench_build.py
"""
import statistics
import tempfile
import time

import hidet
from hidet.backend.cache import build_library
from hidet.backend.codegen import generate
from hidet.ir.compute import compute, tensor_input
from hidet.ir.schedulers import schedule_task
from hidet.ir.task import Task


def elementwise_source(target: str) -> str:
    a, b = tensor_input('a', 'float32', [1 << 20]), tensor_input('b', 'float32', [1 << 20])
    c = compute('c', [1 << 20], lambda i: a[i] + b[i])
    return generate(schedule_task(Task('add', [a, b], [c]), target))


def measure(target: str) -> None:
    source = elementwise_source(target)
    colds, hits = [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as cache, hidet.option.context(cache_dir=cache):
            start = time.perf_counter()
            build_library(source, target, 'add')
            colds.append(time.perf_counter() - start)
            for _ in range(20):
                start = time.perf_counter()
                build_library(source, target, 'add')
                hits.append(time.perf_counter() - start)
    print(f'{target}: cold build median {statistics.median(colds) * 1e3:.0f} ms (runs: '
          f'{", ".join(f"{c * 1e3:.0f}" for c in colds)}), cache hit median {statistics.median(hits) * 1e3:.3f} ms, '
          f'worst {max(hits) * 1e3:.3f} ms')


if __name__ == '__main__':
    measure('cpu')
    if hidet.cuda.available():
        measure('cuda')
