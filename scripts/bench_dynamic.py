"""Dynamic shapes through torch.compile(backend='hidet'): a model compiled once with dynamic batch and sequence
length, run at every (batch, seq) point without recompiling, against the same model compiled for each point's
static shape — latency ratio per point (must be within 1.25x) and the outputs against eager.

    python scripts/bench_dynamic.py [--models bert,gpt2] [--batches 1,4,16] [--seqs 32,128,384] [--dtype f16]
                                    [--static] [--markdown FILE] [--profile BATCHxSEQ,...]

``--profile 16x384`` also lists, per model, the GPU time of the kernels of the dynamic and the static compile at
that point (torch.profiler, CUDA graphs off): where a gap between the two comes from.

Each model runs in this process; dynamo's compiles are counted by wrapping hidet's backend.
"""
from __future__ import annotations

import argparse
import time


def main() -> int:
    import torch
    import torch.fx.experimental._config as fx_config

    from hidet.cli.models import make_model
    from hidet.torch import dynamic_tracing, hidet_backend
    from hidet.utils.benchmark import benchmark_func

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--models', default='bert,gpt2')
    parser.add_argument('--batches', default='1,4,16')
    parser.add_argument('--seqs', default='32,128,384')
    parser.add_argument('--dtype', default='f16')
    parser.add_argument('--space', type=int, default=0)
    parser.add_argument('--static', action='store_true', help='also compile each point statically and compare')
    parser.add_argument('--markdown')
    parser.add_argument('--profile', help='BATCHxSEQ[,...]: kernel times of the dynamic and static compiles there')
    args = parser.parse_args()
    dtype = {'f16': torch.float16, 'f32': torch.float32, 'bf16': torch.bfloat16}[args.dtype]
    points = [(b, s) for b in map(int, args.batches.split(',')) for s in map(int, args.seqs.split(','))]

    if args.markdown:
        open(args.markdown, 'w').close()

    def emit(line=''):  # (the markdown file grows as rows come: a run cut short keeps what it measured)
        print(line, flush=True)
        if args.markdown:
            with open(args.markdown, 'a') as f:
                f.write(line + '\n')

    for name in args.models.split(','):
        model, _ = make_model(name, 1, 8, 'cuda', dtype)
        vocab = model.config.vocab_size
        compiles = []

        def backend(gm, example_inputs):
            compiles.append(time.perf_counter())
            return hidet_backend(gm, example_inputs, options={'search_space': args.space})

        emit(f'## {name} ({args.dtype}), compiled once with dynamic batch and sequence length')
        emit()
        emit('| batch | seq | dynamic ms | static ms | dynamic / static | eager ms | dynamic vs eager | max error '
             'vs eager | first call s |')
        emit('|' + ' --- |' * 9)
        torch._dynamo.reset()
        with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
            dynamic = torch.compile(lambda ids: model(ids)[0], backend=backend, dynamic=True)
            rows = []
            for b, s in points:
                ids = torch.randint(0, vocab, (b, s), device='cuda')
                t0 = time.perf_counter()
                with dynamic_tracing():  # where dynamo may trace: no guard batch != 1 from SDPA's kernel choice
                    out = dynamic(ids)
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
                ref = model(ids)[0]
                err = (out.float() - ref.float()).abs().max().item()
                dyn_ms = benchmark_func(lambda: dynamic(ids), warmup=3, number=10, repeat=5)
                eager_ms = benchmark_func(lambda: model(ids), warmup=3, number=10, repeat=5)
                rows.append((b, s, dyn_ms, eager_ms, err, first))
            n_dynamic = len(compiles)
        static_ms = {}
        if args.static:
            for b, s, *_ in rows:
                torch._dynamo.reset()
                ids = torch.randint(0, vocab, (b, s), device='cuda')
                with torch.no_grad():
                    static = torch.compile(lambda x: model(x)[0], backend=backend, dynamic=False)
                    static(ids)
                    static_ms[(b, s)] = benchmark_func(lambda: static(ids), warmup=3, number=10, repeat=5)
        for b, s, dyn_ms, eager_ms, err, first in rows:
            st = static_ms.get((b, s))
            ratio = f'{dyn_ms / st:.2f}x' if st else '-'
            emit(f'| {b} | {s} | {dyn_ms:.3f} | {f"{st:.3f}" if st else "-"} | {ratio} | {eager_ms:.3f} | '
                 f'{eager_ms / dyn_ms:.2f}x | {err:.2e} | {first:.1f} |')
        emit()
        emit(f'{name}: dynamo compiled the dynamic model {n_dynamic} time(s) for {len(points)} shapes')
        emit()
        for point in args.profile.split(',') if args.profile else []:
            b, s = map(int, point.split('x'))
            for dynamic_shapes in (True, False):
                emit(f'### {name} {b}x{s}: kernels of the {"dynamic" if dynamic_shapes else "static"} compile')
                emit('```')
                emit(_kernel_profile(model, vocab, b, s, dynamic_shapes))
                emit('```')
    return 0


def _kernel_profile(model, vocab: int, batch: int, seq: int, dynamic: bool, runs: int = 10) -> str:
    """GPU time per kernel (ms per run, largest first) of the model compiled by hidet, without CUDA graphs."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from hidet.torch import dynamic_tracing, hidet_backend

    torch._dynamo.reset()
    ids = torch.randint(0, vocab, (batch, seq), device='cuda')
    with dynamic_tracing(), torch.no_grad():
        fn = torch.compile(lambda x: model(x)[0], dynamic=dynamic,
                           backend=lambda gm, inputs: hidet_backend(gm, inputs, options={'use_cuda_graph': False}))
        for _ in range(3):
            fn(ids)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(runs):
                fn(ids)
            torch.cuda.synchronize()
    totals = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            calls, us = totals.get(e.name, (0, 0.0))
            totals[e.name] = (calls + 1, us + e.device_time)
    rows = sorted(totals.items(), key=lambda kv: -kv[1][1])
    total = sum(us for _, us in totals.values()) / runs / 1e3
    lines = [f'total {total:.3f} ms per run']
    for name, (calls, us) in rows[:20]:
        lines.append(f'{us / runs / 1e3:8.3f} ms  {calls // runs:3d}x  {name[:110]}')
    return '\n'.join(lines)


if __name__ == '__main__':
    raise SystemExit(main())
