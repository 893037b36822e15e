"""Whether the CPU kernels of simple elementwise operators vectorize: builds each kernel's source with the
CPU toolchain's flags plus ``-fopt-info-vec-optimized`` (g++) and reports, per kernel, whether its inner
(``#pragma omp simd``) loop was vectorized and with which vector width.

    python scripts/check_cpu_vectorization.py
"""
import os
import re
import subprocess
import tempfile

import hidet
from hidet.backend.codegen import generate
from hidet.backend.compiler import toolchain
from hidet.graph.ops.arithmetic import BinaryElementwiseOp, UnaryElementwiseOp
from hidet.ir.expr import cast, maximum
from hidet.ir.schedulers import schedule_task


def cases():
    for dtype in ('float32', 'float16', 'bfloat16', 'int32'):
        x = hidet.randn([64, 1000]).to(dtype)
        bias = hidet.randn([1000]).to(dtype)
        col = hidet.randn([64, 1]).to(dtype)
        yield f'add {dtype} same shape', BinaryElementwiseOp(x, x, lambda a, b: a + b, 'add')
        yield f'add {dtype} row bias', BinaryElementwiseOp(x, bias, lambda a, b: a + b, 'add')
        yield f'mul {dtype} column', BinaryElementwiseOp(x, col, lambda a, b: a * b, 'mul')
        yield f'relu {dtype}', UnaryElementwiseOp(x, lambda a: maximum(a, 0), 'relu')
    x = hidet.randn([64, 1000])
    yield 'cast float32 -> float16', UnaryElementwiseOp(x, lambda a: cast(a, 'float16'), 'cast')
    yield 'cast float16 -> float32', UnaryElementwiseOp(x.to('float16'), lambda a: cast(a, 'float32'), 'cast')


def main() -> None:
    tc = toolchain('cpu')
    with tempfile.TemporaryDirectory() as tmp:
        for name, op in cases():
            source = generate(schedule_task(op.task, 'cpu'))
            path = os.path.join(tmp, 'kernel.cpp')
            with open(path, 'w') as f:
                f.write(source)
            simd_line = next(i + 1 for i, line in enumerate(source.splitlines()) if 'omp simd' in line) + 1
            cmd = tc.command(path, os.path.join(tmp, 'kernel.so')) + ['-fopt-info-vec-optimized']
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
            found = re.findall(r'kernel\.cpp:(\d+):\d+: optimized: loop vectorized using (\d+) byte vectors', out)
            hits = [w for line, w in found if simd_line <= int(line) <= simd_line + 2]  # the loop or its body
            verdict = f'vectorized ({max(map(int, hits))}-byte vectors)' if hits else 'NOT vectorized'
            print(f'{name:32s} {verdict}')


if __name__ == '__main__':
    main()
