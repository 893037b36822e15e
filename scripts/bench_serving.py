"""Serving latency: one artifact (``hidet.torch.compile_to_file``) run from the C++ example
(examples/cpp/run_model) and from Python (``hidet.load_compiled_graph``), with CUDA-graph replay on a
GPU, timed the same way (wall clock of one run plus a stream synchronize, median of ``--repeat``), and
the C++ run's outputs checked against torch's.

    python scripts/bench_serving.py [--model resnet18] [--dtype f16] [--device cuda] [--repeat 200] [--dir DIR]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_example(build_dir: str) -> str:
    cmake_dir = subprocess.run([sys.executable, '-m', 'hidet', '--cmake-dir'], capture_output=True, text=True,
                               check=True).stdout.strip()
    subprocess.run(['cmake', '-S', os.path.join(ROOT, 'examples', 'cpp'), '-B', build_dir, f'-Dhidet_DIR={cmake_dir}',
                    '-DCMAKE_BUILD_TYPE=Release'], check=True, capture_output=True)
    subprocess.run(['cmake', '--build', build_dir, '--target', 'run_model'], check=True, capture_output=True)
    return os.path.join(build_dir, 'run_model')


def python_ms(path: str, inputs, cuda_graph: bool, warmup: int, repeat: int) -> float:
    import torch

    import hidet

    graph = hidet.load_compiled_graph(path)
    runner = graph.cuda_graph() if cuda_graph else graph
    sync = torch.cuda.synchronize if inputs[0].is_cuda else (lambda: None)
    for _ in range(warmup):
        runner.run(inputs)
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        runner.run(inputs)
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--model', default='resnet18')
    parser.add_argument('--dtype', default='f16')
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--batch', type=int, default=1)
    parser.add_argument('--repeat', type=int, default=200)
    parser.add_argument('--warmup', type=int, default=20)
    parser.add_argument('--dir', default=None, help='where to keep the artifact and the build (default: a temp dir)')
    args = parser.parse_args()

    import torch

    import hidet.torch
    from hidet.cli.bench import _DTYPES
    from hidet.cli.models import make_model

    work = args.dir or tempfile.mkdtemp(prefix='hidet-serving-')
    os.makedirs(work, exist_ok=True)
    model, inputs = make_model(args.model, args.batch, 128, args.device, getattr(torch, _DTYPES[args.dtype]))
    path = os.path.join(work, f'{args.model}.hidet')
    t0 = time.perf_counter()
    hidet.torch.compile_to_file(model, inputs, path)
    print(f'{args.model} {args.dtype} batch {args.batch}: artifact {os.path.getsize(path) / 2 ** 20:.1f} MiB '
          f'in {time.perf_counter() - t0:.1f} s')
    exe = build_example(os.path.join(work, 'build'))
    cuda_graph = args.device == 'cuda'
    flags = ['--repeat', str(args.repeat), '--warmup', str(args.warmup)] + (['--cuda-graph'] if cuda_graph else [])
    run = subprocess.run([exe, path] + flags, capture_output=True, text=True)
    print(run.stdout + run.stderr)
    if run.returncode != 0:
        print('the C++ run failed or its outputs differ from torch')
        return 1
    cpp = float(re.search(r'latency: median ([0-9.]+) ms', run.stdout).group(1))
    py = python_ms(path, inputs, cuda_graph, args.warmup, args.repeat)
    replay = ' with CUDA-graph replay' if cuda_graph else ''
    print(f'C++ (run_model){replay}: {cpp:.4f} ms; Python (CompiledGraph{".cuda_graph()" if cuda_graph else ""}): '
          f'{py:.4f} ms; C++ / Python = {cpp / py:.3f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
