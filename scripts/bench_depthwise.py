"""Kernel-level timing of hidet's depthwise convolution template against torch (cuDNN) and against the
auto-scheduler's kernel it replaces, on the GPU, with CUDA-graph replays (bench_matmul.graph_time).

    python scripts/bench_depthwise.py 8x96x56x56:k3p1 8x144x56x56:k3s2p1 8x384x14x14:k7p3 --space 0 2 --dtype f16

A shape is NxCxHxW:k<kernel>[s<stride>][p<padding>][d<dilation>] (NCHW, weight [C, 1, k, k]).
``--candidates``: also every candidate of the level-2 space, each checked against torch (max error) and timed.
"""
from __future__ import annotations

import argparse
import re
import time

from bench_matmul import graph_time


def parse(shape: str):
    m = re.fullmatch(r'(\d+)x(\d+)x(\d+)x(\d+):k(\d+)(?:s(\d+))?(?:p(\d+))?(?:d(\d+))?', shape)
    if not m:
        raise SystemExit(f'bad shape {shape!r}: expected NxCxHxW:k<kernel>[s<stride>][p<padding>][d<dilation>]')
    n, c, h, w, k = (int(x) for x in m.groups()[:5])
    return n, c, h, w, k, int(m.group(6) or 1), int(m.group(7) or 0), int(m.group(8) or 1)


def case(shape: str, dtype: str):
    """(task, inputs, torch's output, bytes moved (input, weight and output), torch's call)."""
    import torch

    import hidet

    n, c, h, w, k, s, p, d = parse(shape)
    t = getattr(torch, dtype)
    x = torch.randn(n, c, h, w, device='cuda').to(t)
    wt = (torch.randn(c, 1, k, k, device='cuda') / k).to(t)
    xs, ws = hidet.symbol([n, c, h, w], dtype, 'cuda'), hidet.symbol([c, 1, k, k], dtype, 'cuda')
    task = hidet.ops.conv2d(xs, ws, stride=s, padding=p, dilation=d, groups=c).trace[0].task

    def call():
        return torch.nn.functional.conv2d(x, wt, stride=s, padding=p, dilation=d, groups=c)

    ref = call()
    return task, (x, wt), ref, (x.numel() + wt.numel() + ref.numel()) * x.element_size(), call


def gbps(nbytes: int, ms: float) -> str:
    """Bytes moved per second, in GB/s, of a kernel taking ``ms`` milliseconds (graph_time's unit)."""
    return f'{nbytes / (ms * 1e-3) / 1e9:.0f}'


def timed(launch, inputs, expected, args):
    import torch

    out = torch.full_like(expected, float('nan'))
    launch(*inputs, out)
    torch.cuda.synchronize()
    err = (out.float() - expected.float()).abs().max().item()
    return graph_time(lambda: launch(*inputs, out), args.calls, args.repeat), err


def main() -> None:
    import torch

    from hidet.backend.cache import build_libraries
    from hidet.backend.codegen import generate
    from hidet.drivers.build_task import build_task
    from hidet.kernels import find
    from hidet.drivers.tuning import choose_configs
    from hidet.ir.schedulers import schedule_task
    from hidet.runtime.compiled_module import CompiledModule

    parser = argparse.ArgumentParser()
    parser.add_argument('shapes', nargs='+', help='NxCxHxW:k<kernel>[s<stride>][p<padding>][d<dilation>]')
    parser.add_argument('--space', type=int, nargs='+', default=[0])
    parser.add_argument('--dtype', default='f16', choices=['f16', 'bf16', 'f32'])
    parser.add_argument('--calls', type=int, default=20)
    parser.add_argument('--repeat', type=int, default=10)
    parser.add_argument('--candidates', action='store_true', help='time every candidate of the level-2 space')
    parser.add_argument('--no-auto', action='store_true', help='skip the auto-scheduler\'s kernel')
    args = parser.parse_args()
    dtype = {'f16': 'float16', 'bf16': 'bfloat16', 'f32': 'float32'}[args.dtype]
    rows = []
    for shape in args.shapes:
        task, inputs, expected, nbytes, torch_fn = case(shape, dtype)
        t_torch = graph_time(torch_fn, args.calls, args.repeat)
        rows.append([shape, 'torch', f'{t_torch * 1e3:.1f}', gbps(nbytes, t_torch), '1.00', '', ''])
        if not args.no_auto:
            path = build_libraries([(generate(schedule_task(task, 'cuda')), 'cuda', 'auto')])[0]
            t, err = timed(CompiledModule(path)['launch'], inputs, expected, args)
            rows.append([shape, 'auto-scheduler', f'{t * 1e3:.1f}', gbps(nbytes, t), f'{t_torch / t:.2f}',
                         '', f'max err {err:.3g}'])
        template = find(task, 'cuda')
        if template is None:
            rows.append([shape, 'no template', '', '', '', '', ''])
            continue
        for space in args.space:
            t0 = time.perf_counter()
            launch = build_task(task, 'cuda', space)['launch']
            build_s = time.perf_counter() - t0
            t, err = timed(launch, inputs, expected, args)
            cfg = choose_configs([(task, 'cuda', template)], space)[0].name()
            rows.append([shape, f'hidet space {space}', f'{t * 1e3:.1f}', gbps(nbytes, t),
                         f'{t_torch / t:.2f}', cfg, f'{build_s:.1f} s, max err {err:.3g}'])
        if args.candidates:
            configs = template.space(2)
            paths = build_libraries([(template.source(c), 'cuda', 'candidate') for c in configs])
            for cfg, path in zip(configs, paths):
                t, err = timed(CompiledModule(path)['launch'], inputs, expected, args)
                rows.append([shape, 'candidate', f'{t * 1e3:.1f}', gbps(nbytes, t), f'{t_torch / t:.2f}',
                             cfg.name(), f'max err {err:.3g}'])
    from tabulate import tabulate

    print(f'{torch.cuda.get_device_name()} {dtype}: CUDA-graph kernel times '
          '(GB/s: input + weight + output bytes per second)')
    print(tabulate(rows, headers=['shape', 'kernel', 'us', 'GB/s', 'vs torch', 'config', 'notes']))


if __name__ == '__main__':
    main()
