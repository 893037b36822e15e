"""Check a change to the matmul template's default configs (the cost model, a rule) before it lands: list the level-0
pick of every GEMM and convolution of the benchmark models, on each side of the change, then time the two picks of
each shape where they differ, side by side on the GPU.

    python scripts/compare_picks.py picks old.json       # on the tree before the change (CPU only: no GPU needed)
    python scripts/compare_picks.py picks new.json       # and after it
    python scripts/compare_picks.py time old.json new.json   # on the GPU machine: each changed shape, both picks

The shapes: the linear layers of gpt2 / bert / vit_b_16 and the Llama-style decoder (n, k of their hidden and MLP
sizes) at 128 to 8192 rows, and the 1x1 convolutions of resnet50, mobilenet_v2, efficientnet_b0 and convnext_tiny at
batch 1, 8 and 32 (channels-last), as bench_matmul.py names them (``MxNxK``, ``conv:NxCxHxWxKxRxS``). The picks are
an H100's (sm_90, 132 SMs). ``time`` reads weights cold (a copy per launch, as a model reads them) and prints each
shape's torch time, the two picks' times and their ratio, and the geometric mean of the ratios.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

from hidet.backend.cache import build_libraries
from hidet.kernels import find
from hidet.kernels.matmul import find_matmul_template
from hidet.kernels.matmul.space import default_config
from hidet.runtime.compiled_module import CompiledModule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (bench_matmul.py beside this script: its cases)
import bench_matmul  # noqa: E402

SMS = 132  # an H100's SMs: the picks are for that GPU
ROWS = (128, 197, 256, 394, 512, 788, 1024, 1576, 2048, 3152, 4096, 8192)
# (n, k) of the models' linear layers: gpt2 / bert / vit (768, MLP 3072, QKV 2304), the Llama-style decoder
# (2048, QKV 3072, merged gate / up 11264, MLP 5632), and a 1024-wide model
LINEARS = ((2304, 768), (768, 768), (3072, 768), (768, 3072), (3072, 2048), (2048, 2048), (11264, 2048),
           (5632, 2048), (2048, 5632), (1024, 1024), (4096, 1024), (1024, 4096))
# (size, channels in, channels out) of the models' 1x1 convolutions
CONVS = ((56, 64, 64), (56, 64, 256), (56, 256, 64), (56, 256, 128), (28, 128, 512), (28, 512, 128), (28, 512, 256),
         (14, 256, 1024), (14, 1024, 256), (14, 1024, 512), (7, 512, 2048), (7, 2048, 512),
         (112, 16, 96), (56, 24, 144), (56, 144, 24), (28, 32, 192), (28, 192, 32), (14, 64, 384), (14, 384, 64),
         (14, 96, 576), (14, 576, 96), (7, 160, 960), (7, 960, 160), (7, 320, 1280), (14, 80, 480), (14, 480, 80),
         (14, 112, 672), (7, 192, 1152), (7, 1152, 320), (56, 96, 384), (56, 384, 96), (28, 192, 768),
         (28, 768, 192), (14, 384, 1536), (14, 1536, 384), (7, 768, 3072), (7, 3072, 768))


def shapes() -> list:
    """The shapes compared, in bench_matmul.py's names."""
    out = [f'{m}x{n}x{k}' for m in ROWS for n, k in LINEARS]
    out += [f'conv:{b}x{ci}x{hw}x{hw}x{co}x1x1' for b in (1, 8, 32) for hw, ci, co in CONVS]
    return out


def picks() -> dict:
    """shape → the name of its level-0 config on an H100 (or why the template does not take it)."""
    out = {}
    for shape in shapes():
        template = find_matmul_template(bench_matmul.gemm_task(shape, 'float16')[0], 'cuda', 'sm_90a')
        out[shape] = default_config(template.spec, SMS, wgmma=True).name() if template else 'no template'
    return out


def time_changed(old: dict, new: dict) -> None:
    """Each shape whose pick differs (both picks of the template's configs): torch's time and both picks', weights
    cold, and the geometric mean of new / old."""
    changed = [s for s in new if s in old and old[s] != new[s] and 'template' not in old[s] + new[s]]
    print(f'{len(changed)} of {len(new)} shapes changed their pick', flush=True)
    cases = []
    for shape in changed:
        case = bench_matmul.conv_case if shape.startswith('conv') else bench_matmul.matmul_case
        task, (a, b), c, _, torch_fn, _ = case(shape, 'float16')
        template = find(task, 'cuda')
        cases.append((shape, template, (a, b), c, torch_fn,
                      [bench_matmul.parse_config(template, name) for name in (old[shape], new[shape])]))
    paths = build_libraries([(t.candidates_source(cfgs), 'cuda', 'picks') for _, t, _, _, _, cfgs in cases])
    ratios = []
    print('shape  torch µs  old µs  new µs  new / old  old pick  new pick  max error', flush=True)
    for (shape, _, (a, b), c, torch_fn, cfgs), path in zip(cases, paths):
        torch_fn(b)
        copies = bench_matmul.weight_copies(b, True)
        t_torch = bench_matmul.graph_time(bench_matmul.rotating(torch_fn, copies), len(copies), 10)
        times, errors = [], []
        for i in range(2):
            launch = CompiledModule(path)[f'launch_{i}']
            out = torch.full(c.shape, float('nan'), dtype=c.dtype, device='cuda')
            launch(a, b, out)
            torch.cuda.synchronize()
            errors.append((out.float() - c.float()).abs().max().item())
            times.append(bench_matmul.graph_time(bench_matmul.rotating(lambda b_: launch(a, b_, out), copies),
                                                 len(copies), 10))
        ratios.append(times[1] / times[0])
        print(f'{shape}  {t_torch * 1e3:.1f}  {times[0] * 1e3:.1f}  {times[1] * 1e3:.1f}  {ratios[-1]:.3f}  '
              f'{cfgs[0].name()}  {cfgs[1].name()}  {max(errors):.3g}', flush=True)
    if ratios:
        mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f'new / old: geometric mean {mean:.3f} over {len(ratios)} shapes, worst {max(ratios):.3f}, '
              f'best {min(ratios):.3f}; {sum(r > 1.05 for r in ratios)} over 1.05')


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    p = sub.add_parser('picks', help='write the level-0 pick of every shape (no GPU needed)')
    p.add_argument('out')
    t = sub.add_parser('time', help='on the GPU: time both picks of each shape whose pick differs')
    t.add_argument('old')
    t.add_argument('new')
    args = parser.parse_args(argv)
    if args.command == 'picks':
        with open(args.out, 'w') as f:
            json.dump(picks(), f, indent=0)
        print(f'wrote {args.out}')
    else:
        with open(args.old) as f, open(args.new) as g:
            time_changed(json.load(f), json.load(g))


if __name__ == '__main__':
    main()
