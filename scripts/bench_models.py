"""The model table of the torch.compile frontend: per model, hidet's compile time and latency (default
mode: CUDA graphs) against eager and inductor's reduce-overhead mode, all measured in one run, each model in its own
process (``hidet bench model ... --json``) with a time limit, so one slow or failing model costs only
its own row.

    python scripts/bench_models.py [--models resnet18,bert] [--dtype f16] [--batch 1] [--timeout 300]
                                   [--device cuda] [--markdown FILE]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

MODELS = 'resnet18,resnet50,mobilenet_v2,efficientnet_b0,vit_b_16,convnext_tiny,bert,gpt2,llama'


def bench(name: str, args, mode: str, backends: str) -> dict:
    cmd = [sys.executable, '-m', 'hidet', 'bench', 'model', name, '--dtype', args.dtype, '--batch', str(args.batch),
           '--device', args.device, '--backends', backends, '--json', '--repeat', str(args.repeat)]
    if mode != 'default':
        cmd += ['--mode', mode]
    t0 = time.perf_counter()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {'error': f'over {args.timeout} s'}
    lines = [line for line in run.stdout.splitlines() if line.startswith('JSON ')]
    if run.returncode != 0 or not lines:
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ['?']
        return {'error': f'exit {run.returncode}: {tail[0][:120]}'}
    out = json.loads(lines[-1][len('JSON '):])['results']
    out['wall_s'] = time.perf_counter() - t0
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--models', default=MODELS)
    parser.add_argument('--dtype', default='f16')
    parser.add_argument('--batch', type=int, default=1)
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--repeat', type=int, default=50)
    parser.add_argument('--timeout', type=int, default=300)
    parser.add_argument('--markdown', help='also write the table to this file')
    args = parser.parse_args()

    header = ('| model | hidet compile s | hidet ms | inductor-ro ms | eager ms | inductor-ro compile s | '
              'hidet vs inductor-ro | hidet vs eager |')
    lines = [f'{args.dtype}, batch {args.batch}, {args.device}: hidet (CUDA graphs) against inductor reduce-overhead',
             '', header, '|' + ' --- |' * 8]
    print('\n'.join(lines), flush=True)
    for name in [m.strip() for m in args.models.split(',') if m.strip()]:
        res = bench(name, args, 'default', 'hidet,eager,inductor-ro')
        if 'error' in res:
            row = f'| {name} | {res["error"]} |' + ' |' * 6
        else:
            h, e, i = res['hidet'], res['eager'], res['inductor-ro']
            row = (f'| {name} | {h["compile_s"]:.1f} | {h["ms"]:.3f} | {i["ms"]:.3f} | {e["ms"]:.3f} | '
                   f'{i["compile_s"]:.1f} | {i["ms"] / h["ms"]:.2f}x | {e["ms"] / h["ms"]:.2f}x |')
        lines.append(row)
        print(row, flush=True)
    if args.markdown:
        with open(args.markdown, 'w') as f:
            f.write('\n'.join(lines) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
