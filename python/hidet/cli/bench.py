"""``hidet bench``: latency of hidet against torch eager and inductor, measured in one run.

Latency is the median over repeats, timed with CUDA events on torch's current stream (on the CPU: wall clock), the
repeats of the backends interleaved in rounds (_interleaved_medians). Compile time is the first call's (hidet:
optimize + build; inductor: the first torch.compile call). Ratios > 1 mean hidet is faster. Baselines: ``eager``;
``inductor`` (torch.compile's default mode, no CUDA graphs), ``inductor-ro`` (reduce-overhead: CUDA graphs, the
baseline of hidet's default, which replays CUDA graphs too) and ``inductor-ma`` (max-autotune, the baseline of a
tuned hidet). ``hidet-ma`` is hidet tuned (max-autotune: search space 2, CUDA graphs) beside ``hidet`` (its
``--mode``, default search space 0) in the same run: ``inductor-ma`` is then compared with it, and the ``hidet-ma``
row shows whether tuning gained in the model. ``--profile`` prints each backend's kernels of one call from
torch.profiler (time per call, launches, share; on the GPU also how much of the latency lies outside them: the
host's work and the GPU idle between launches). Each backend's first result is checked against float32
(``hidet.cli.accuracy``): a hidet result less accurate than eager's beyond the dtype's tolerance fails the command
(exit 1, the reason on stderr) after printing the table.
``hidet bench suite`` (suite.py) runs ``bench model`` over a list of models.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

import hidet
from hidet.cli import accuracy, models, suite

BACKENDS = ('hidet', 'hidet-ma', 'eager', 'inductor', 'inductor-ro', 'inductor-ma')
# torch.compile's mode of each inductor baseline
_INDUCTOR_MODES = {'inductor': None, 'inductor-ro': 'reduce-overhead', 'inductor-ma': 'max-autotune'}
_DTYPES = {'f16': 'float16', 'float16': 'float16', 'bf16': 'bfloat16', 'bfloat16': 'bfloat16', 'f32': 'float32',
           'float32': 'float32'}


def add_parser(sub) -> None:
    bench = sub.add_parser('bench', help='benchmark an operator or a model against torch')
    kinds = bench.add_subparsers(dest='kind', required=True)

    def common(p):
        p.add_argument('--dtype', default='f16', choices=sorted(_DTYPES))
        p.add_argument('--device', default=None, choices=['cuda', 'cpu'],
                       help='default: cuda where a GPU is available, else cpu')
        p.add_argument('--backends', default=None,
                       help=f'comma-separated, of {",".join(BACKENDS)}; default: hidet,eager,inductor-ro on cuda, '
                            'hidet,eager,inductor on cpu (the baseline with the same kind of launch as hidet\'s)')
        p.add_argument('--profile', nargs='?', const=15, type=int, metavar='ROWS',
                       help="print each backend's kernels of one call (torch.profiler): time, launches, share; "
                            'the ROWS longest (15), the rest summed')
        p.add_argument('--space', type=int, default=None, choices=[0, 1, 2],
                       help="hidet's search space (tuning level); default 0, for a model the --mode's "
                            '(max-autotune: 2)')
        p.add_argument('--warmup', type=int, default=5)
        p.add_argument('--repeat', type=int, default=20)
        p.add_argument('--json', action='store_true',
                       help="also print the results as one line 'JSON {...}' (models: after a line 'COMPILED "
                            "{backend, compile_s}' as each backend compiles)")
        p.add_argument('--tf32', action='store_true',
                       help='float32 on TF32 tensor cores: hidet with use_tensor_core, torch with allow_tf32')
        p.add_argument('--cold', action='store_true',
                       help="compile from empty caches: hidet's kernel cache (its precompiled header too), "
                            "inductor's and Triton's, each in a fresh temporary directory (cold against cold)")
        p.set_defaults(func=run)

    p = kinds.add_parser('matmul', help='C[M, N] = A[M, K] @ B[K, N]',
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('m', type=int)
    p.add_argument('n', type=int)
    p.add_argument('k', type=int)
    common(p)
    p = kinds.add_parser('conv2d', help='conv2d of x[N, C, H, W] with w[K, C/groups, R, S]',
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    for name in ('n', 'c', 'h', 'w', 'k', 'r', 's'):
        p.add_argument(name, type=int)
    p.add_argument('--stride', type=int, default=1)
    p.add_argument('--padding', type=int, default=0)
    p.add_argument('--dilation', type=int, default=1)
    p.add_argument('--groups', type=int, default=1)
    p.add_argument('--channels-last', action='store_true',
                   help='channels-last tensors: torch in its channels_last memory format, hidet its '
                        'conv2d_channels_last on the same memory (no layout conversion timed on either side)')
    common(p)
    p = kinds.add_parser('model', help='a torchvision or transformers model with random weights',
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('name', help='resnet18, resnet50, mobilenet_v2, efficientnet_b0, vit_b_16, convnext_tiny, bert, gpt2, '
                   'llama')
    p.add_argument('--batch', type=int, default=1)
    p.add_argument('--seq', type=int, default=128, help='sequence length of language models')
    p.add_argument('--mode', default=None, help="torch.compile mode for hidet (e.g. max-autotune: search space 2); "
                   'the inductor baselines keep their own modes')
    common(p)
    suite.add_parser(kinds)


ROUNDS = 5  # the repeats of each backend are taken in this many rounds, the backends in turn within a round


def _samples_ms(fn: Callable[[], object], device: str, repeat: int) -> List[float]:
    """Milliseconds of each of ``repeat`` calls of ``fn``, one at a time (on the GPU: CUDA events around the call,
    the GPU idle before it)."""
    import torch

    times = []
    if device == 'cuda':
        torch.cuda.synchronize()
        for _ in range(repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def _interleaved_medians(calls: Dict[str, Callable[[], object]], device: str, warmup: int,
                         repeat: int) -> Dict[str, float]:
    """The median ms per call of each backend, its ``repeat`` calls taken in ROUNDS rounds with the backends in
    turn within each: a drift of the machine during the run (clocks, a compile's worker processes winding down)
    meets every backend alike, not the one whose block it fell in."""
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    rounds = max(1, min(ROUNDS, repeat))
    samples: Dict[str, List[float]] = {name: [] for name in calls}
    for r in range(rounds):
        for name, fn in calls.items():
            samples[name] += _samples_ms(fn, device, repeat // rounds + (1 if r < repeat % rounds else 0))
    return {name: statistics.median(times) for name, times in samples.items()}


def _op_case(args) -> Tuple[Callable, List, Callable[[int], Callable], Callable, float, str]:
    """(torch function, inputs, hidet builder, hidet's output list → torch's output, flop count, title) of a
    single-op benchmark."""
    import torch
    import torch.nn.functional as F

    dtype = getattr(torch, _DTYPES[args.dtype])
    if args.kind == 'matmul':
        inputs = [torch.randn(args.m, args.k, dtype=dtype, device=args.device),
                  torch.randn(args.k, args.n, dtype=dtype, device=args.device)]
        flops = 2.0 * args.m * args.n * args.k
        title = f'matmul {args.m}x{args.n}x{args.k} {args.dtype}'
        fn = torch.matmul

        def hidet_graph(syms):
            return hidet.ops.matmul(*syms)
    else:
        inputs = [torch.randn(args.n, args.c, args.h, args.w, dtype=dtype, device=args.device),
                  torch.randn(args.k, args.c // args.groups, args.r, args.s, dtype=dtype, device=args.device)]
        conv = dict(stride=args.stride, padding=args.padding, dilation=args.dilation, groups=args.groups)
        out = F.conv2d(inputs[0], inputs[1], **conv)
        flops = 2.0 * out.numel() * (args.c // args.groups) * args.r * args.s
        title = f'conv2d x{list(inputs[0].shape)} w{list(inputs[1].shape)} {conv} {args.dtype}'

        def fn(x, w):
            return F.conv2d(x, w, **conv)

        hidet_conv, hidet_kwargs = hidet.ops.conv2d, conv
        if args.channels_last:
            if args.groups != 1:
                raise SystemExit('hidet bench conv2d --channels-last: groups must be 1')
            title += ' channels-last'
            inputs = [t.to(memory_format=torch.channels_last) for t in inputs]
            hidet_conv = hidet.ops.conv2d_channels_last
            hidet_kwargs = {k: v for k, v in conv.items() if k != 'groups'}

        def hidet_graph(syms):
            return hidet_conv(*syms, **hidet_kwargs)

    # hidet reads the same memory as torch; channels-last tensors as [n, h, w, c] and [k, r, s, c]
    hidet_inputs = [t.permute(0, 2, 3, 1) for t in inputs] if getattr(args, 'channels_last', False) else inputs

    def build_hidet(space: int):
        syms = [hidet.symbol(list(t.shape), _DTYPES[args.dtype], args.device) for t in hidet_inputs]
        with hidet.graph.PassContext() as ctx:
            ctx.set_use_tensor_core(args.tf32)
            graph = hidet.graph.optimize(hidet.trace_from(hidet_graph(syms), syms))
        compiled = graph.build(space=space)
        return lambda: compiled.run(hidet_inputs)

    def hidet_result(outputs: list):  # channels-last: hidet's [n, oh, ow, k] seen as torch's [n, k, oh, ow]
        return outputs[0].permute(0, 3, 1, 2) if getattr(args, 'channels_last', False) else outputs[0]

    return fn, inputs, build_hidet, hidet_result, flops, title


def _model_case(args):
    import torch

    model, inputs = models.make_model(args.name, args.batch, args.seq, args.device, getattr(torch, _DTYPES[args.dtype]))
    return model, inputs, f'{args.name} batch {args.batch} {args.dtype}'


def _reference(fn: Callable, inputs: List):
    """``fn`` on ``inputs`` in float32 with TF32 off: what every backend's result is checked against."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        return fn(*[t.float() if t.is_floating_point() else t for t in inputs])
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _exclusive_times(events) -> List[Tuple[str, float]]:
    """(name, µs) of GPU events, overlaps counted once: an event's time runs from its start or, where it started
    before the events before it ended, from their end. With programmatic dependent launch a kernel's blocks start
    (and wait) while the one before drains; its own duration would count that wait twice."""
    covered = float('-inf')
    out = []
    for e in sorted(events, key=lambda e: e.time_range.start):
        start, end = e.time_range.start, e.time_range.end
        out.append((e.name, max(0.0, end - max(start, covered))))
        covered = max(covered, end)
    return out


def _profile(call: Callable, device: str, calls: int = 10, top: int = 15) -> Tuple[str, float, float]:
    """The kernels of one call of ``call`` (averaged over ``calls``) from torch.profiler: (a table of them, their µs
    per call, launches per call). On the GPU a kernel's time excludes its overlap with the ones before it
    (_exclusive_times): the total is the time the GPU was busy."""
    import torch
    from tabulate import tabulate
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == 'cuda' else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            call()
        if device == 'cuda':
            torch.cuda.synchronize()
    kernels: Dict[str, List[float]] = {}  # name → [total µs, launches]
    if device == 'cuda':
        timed = _exclusive_times([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA])
    else:  # (the CPU: top-level operators only)
        timed = [(e.name, e.cpu_time) for e in prof.events() if e.cpu_parent is None]
    for name, us in timed:
        entry = kernels.setdefault(name, [0.0, 0])
        entry[0] += us
        entry[1] += 1
    total = sum(us for us, _ in kernels.values()) or 1.0
    rows = sorted(kernels.items(), key=lambda kv: -kv[1][0])
    table = [[_kernel_label(name)[:90], f'{us / calls:.1f}', f'{n / calls:g}', f'{100 * us / total:.1f}%']
             for name, (us, n) in rows[:top]]
    if len(rows) > top:
        rest = rows[top:]
        table.append([f'({len(rest)} more)', f'{sum(r[1][0] for r in rest) / calls:.1f}',
                      f'{sum(r[1][1] for r in rest) / calls:g}', f'{100 * sum(r[1][0] for r in rest) / total:.1f}%'])
    launches = sum(n for _, n in kernels.values()) / calls
    return tabulate(table, headers=['kernel', 'µs / call', 'launches / call', 'share']), total / calls, launches


def _kernel_label(name: str) -> str:
    """A kernel's profiler name without what every row repeats: a C++ name's ``void`` and parameter list, and hidet's
    ``hidet_script::`` namespace (hidet_script::mma_..._64x128x64_w64x128_p3_wg_tma(__half*, ...) → mma_..._wg_tma),
    so the table's 90 characters hold the name itself."""
    if name.startswith('void '):
        name = name[len('void '):]
    if name.endswith(')'):  # the parameter list: from the '(' that closes the name's last one
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {')': 1, '(': -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i] if i > 0 and not name[i - 1].isspace() else name  # (not "Memcpy DtoD (...)")
                break
    return name[len('hidet_script::'):] if name.startswith('hidet_script::') else name


def _backends(args) -> List[str]:
    chosen = args.backends or ('hidet,eager,inductor-ro' if args.device == 'cuda' else 'hidet,eager,inductor')
    backends = [b.strip() for b in chosen.split(',') if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        raise SystemExit(f'hidet bench: unknown backend(s) {unknown}; choose from {", ".join(BACKENDS)}')
    if 'hidet-ma' in backends and (args.space is not None or getattr(args, 'mode', None)):
        raise SystemExit('hidet bench: hidet-ma is hidet tuned (max-autotune); --space and --mode set the hidet '
                         'backend and would apply to both (drop them, or hidet-ma)')
    return backends


def run(args) -> int:
    if not getattr(args, 'cold', False):
        return _run(args)
    with tempfile.TemporaryDirectory(prefix='hidet-bench-cold-') as root, _cold_caches(root):
        return _run(args)


@contextlib.contextmanager
def _cold_caches(root: str):
    """Every compiler's on-disk cache in a fresh directory under ``root`` while the block runs: hidet's kernels
    (the options' cache_dir), inductor's (TORCHINDUCTOR_CACHE_DIR) and Triton's (TRITON_CACHE_DIR); restored
    after. In-process memos start empty too, a ``hidet bench`` being its own process; two inductor baselines of
    one run share torch's in-process caches, so only the first of them compiles cold."""
    saved = {name: os.environ.get(name) for name in _COLD_ENV}
    for name, sub in _COLD_ENV.items():
        os.environ[name] = os.path.join(root, sub)
    try:
        with hidet.option.context(cache_dir=os.path.join(root, 'hidet')):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_COLD_ENV = {'TORCHINDUCTOR_CACHE_DIR': 'inductor', 'TRITON_CACHE_DIR': 'triton'}


def _run(args) -> int:
    import torch
    from tabulate import tabulate

    if args.device is None:
        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    backends = _backends(args)
    if args.device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit('hidet bench: no CUDA device is available; pass --device cpu to benchmark on the CPU')
    results: Dict[str, Tuple[float, float]] = {}  # backend → (latency ms, compile s)
    errors: Dict[str, Optional[float]] = {}  # backend → largest error of its first result against float32
    rms: Dict[str, Optional[float]] = {}  # backend → the RMS of those errors
    profiles: Dict[str, str] = {}
    # torch's float32 GEMMs: exact unless --tf32 (as hidet's), whatever the process default
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = bool(args.tf32)
    flops = None
    with torch.inference_mode():
        if args.kind in ('matmul', 'conv2d'):
            fn, inputs, build_hidet, hidet_result, flops, title = _op_case(args)
            title += ' tf32' if args.tf32 else ''
            runners = {'eager': lambda: (lambda: fn(*inputs)),
                       'hidet': lambda: build_hidet(args.space or 0), 'hidet-ma': lambda: build_hidet(2)}
            for name, mode in _INDUCTOR_MODES.items():
                runners[name] = lambda mode=mode: (lambda f=torch.compile(fn, mode=mode): f(*inputs))
            results_as_torch = {'hidet': hidet_result, 'hidet-ma': hidet_result}
            reference = _reference(fn, inputs)
        else:
            model, inputs, title = _model_case(args)

            def compiled(backend, mode):
                import hidet.torch  # noqa: F401  (configures dynamo_config)

                if backend == 'hidet' and args.space is not None:  # (else the mode's, as torch.compile's own)
                    hidet.torch.dynamo_config.search_space(args.space)
                f = torch.compile(model, backend=backend, mode=mode)
                return lambda: f(*inputs)

            runners = {'eager': lambda: (lambda: model(*inputs)), 'hidet': lambda: compiled('hidet', args.mode),
                       'hidet-ma': lambda: compiled('hidet', 'max-autotune')}
            for name, mode in _INDUCTOR_MODES.items():
                runners[name] = lambda mode=mode: compiled('inductor', mode)
            results_as_torch = {}
            reference = _reference(copy.deepcopy(model).float(), inputs)
        ref_scale = accuracy.scale(reference)
        if 'eager' not in backends:  # (eager's own error is the measure of what the dtype allows)
            eager_out = runners['eager']()()
            errors['eager'] = accuracy.max_error(eager_out, reference)
            rms['eager'] = accuracy.rms_error(eager_out, reference)
        calls: Dict[str, Callable[[], object]] = {}
        compile_times: Dict[str, float] = {}
        for backend in backends:
            t0 = time.perf_counter()
            call = runners[backend]()
            out = call()  # the first call compiles (inductor, hidet's torch.compile)
            if args.device == 'cuda':
                torch.cuda.synchronize()
            compile_times[backend] = time.perf_counter() - t0
            if args.json:  # (so that a suite whose time limit stops this process still learns what compiled)
                print('COMPILED ' + json.dumps({'backend': backend, 'compile_s': compile_times[backend]}), flush=True)
            # checked now: a CUDA-graph replay may overwrite the outputs of an earlier call (inductor's)
            as_torch = results_as_torch.get(backend, lambda o: o)(out)
            errors[backend] = accuracy.max_error(as_torch, reference)
            rms[backend] = accuracy.rms_error(as_torch, reference)
            calls[backend] = call
        medians = _interleaved_medians(calls, args.device, args.warmup, args.repeat)
        for backend, call in calls.items():
            results[backend] = (medians[backend], compile_times[backend])
            if args.profile is not None:
                profiles[backend] = _profile(call, args.device, top=args.profile)
    rows = []
    for backend, (ms, compile_s) in results.items():
        row = [backend, f'{ms:.4f}']
        if flops is not None:
            row.append(f'{flops / ms / 1e9:.3g}')
        ours = results.get(suite.paired_hidet(backend, results), (None,))[0]
        row.append(f'{ms / ours:.2f}x' if ours and backend != 'hidet' else '')
        row.append(f'{compile_s:.1f}')
        row.append('?' if errors[backend] is None else f'{errors[backend]:.3g}')
        row.append('?' if rms.get(backend) is None else f'{rms[backend]:.3g}')
        rows.append(row)
    headers = ['backend', 'latency (ms)'] + (['TFLOP/s'] if flops is not None else []) + \
        ['hidet speed-up over it', 'compile (s)', 'max error vs fp32', 'rms error']
    print(f'{title} on {args.device} (outputs as large as {ref_scale:.3g})')
    print(tabulate(rows, headers=headers))
    for backend, (table, kernel_us, launches) in profiles.items():
        # on the GPU, the rest of a call's latency: the host's work, and the GPU idle between launches (on the CPU
        # the "kernels" are the top-level operators, host time themselves)
        outside = results[backend][0] * 1e3 - kernel_us
        rest = f'; {outside:.1f} µs of the latency outside them' if args.device == 'cuda' else ''
        print(f'\n{backend}: {kernel_us:.1f} µs of kernels per call in {launches:g} launches{rest}\n{table}')
    if args.json:
        print('JSON ' + json.dumps({'case': title, 'device': args.device, 'mode': getattr(args, 'mode', None),
                                    'space': args.space, 'tflop': flops / 1e12 if flops else None,
                                    'output_scale': ref_scale,
                                    'results': {b: {'ms': ms, 'compile_s': c, 'max_error': errors[b],
                                                    'rms_error': rms.get(b)}
                                                for b, (ms, c) in results.items()},
                                    'profiles': {b: {'table': t, 'kernel_us': us, 'launches': n}
                                                 for b, (t, us, n) in profiles.items()}}))
    tol = accuracy.TOLERANCE['tf32' if args.tf32 else _DTYPES[args.dtype]]
    problem = accuracy.verdict(errors, ref_scale, tol)
    if problem:
        print(f'hidet bench: {problem}', file=sys.stderr)
        return 1
    return 0
