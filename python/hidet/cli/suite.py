"""``hidet bench suite``: ``hidet bench model`` over a list of models and backends, each model in its own process
with a time limit, writing into one directory:

- ``results.json``: the raw numbers per model (latency, compile time and error per backend), written after each
  model, so a run that crashed or was stopped resumes where it left off (``--fresh`` starts over);
- ``table.md``: one row per model: each backend's latency and compile time, hidet's speed-up over each baseline,
  hidet's RMS error against float32 over eager's (where eager ran), and their geometric means;
- ``chart.png`` (with matplotlib, the ``charts`` extra): hidet's speed-up over each baseline and the compile times.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional

MODELS = ('resnet18', 'resnet50', 'mobilenet_v2', 'efficientnet_b0', 'vit_b_16', 'convnext_tiny', 'bert', 'gpt2',
          'llama')


# the hidet backend each baseline is compared with where both ran (the same kind of launch; else 'hidet')
PAIRED = {'inductor-ma': 'hidet-ma'}


def paired_hidet(baseline: str, present) -> str:
    """The hidet backend that ``baseline``'s speed-up is measured against (PAIRED where it ran, else hidet)."""
    return PAIRED[baseline] if PAIRED.get(baseline) in present else 'hidet'


def add_parser(kinds) -> None:
    p = kinds.add_parser('suite', help='hidet bench model over a list of models: a Markdown table, a chart, JSON',
                         description=__doc__)
    p.add_argument('--models', default=','.join(MODELS), help=f'comma-separated (default: {",".join(MODELS)})')
    p.add_argument('--backends', default=None,
                   help='comma-separated, as hidet bench model (default: hidet,eager,inductor-ro on cuda, '
                        'hidet,eager,inductor on cpu)')
    p.add_argument('--dtype', default='f16', help='default: f16')
    p.add_argument('--batch', type=int, default=1, help='default: 1')
    p.add_argument('--seq', type=int, default=None,
                   help="sequence length of the language models, as hidet bench model's --seq (default: its 128)")
    p.add_argument('--device', default=None, choices=['cuda', 'cpu'], help='default: cuda where a GPU is available')
    p.add_argument('--repeat', type=int, default=50, help='timed calls per backend (default: 50)')
    p.add_argument('--timeout', type=int, default=600, help='seconds per model, all backends (default: 600)')
    p.add_argument('--out', default=None, help='the directory to write (default: hidet-bench-<date>)')
    p.add_argument('--fresh', action='store_true', help='measure every model again instead of resuming')
    p.add_argument('--mode', default=None,
                   help="torch.compile mode for hidet, as hidet bench model (max-autotune: search space 2; pair it "
                        "with --backends hidet,inductor-ma for the tuned comparison)")
    p.add_argument('--cold', action='store_true',
                   help='each model compiles from empty caches, as hidet bench model --cold (cold against cold)')
    p.set_defaults(func=run)


def _bench(name: str, args) -> dict:
    """One model's ``hidet bench model --json`` results, or {'error': ...}."""
    cmd = [sys.executable, '-m', 'hidet', 'bench', 'model', name, '--dtype', args.dtype, '--batch', str(args.batch),
           '--device', args.device, '--json', '--repeat', str(args.repeat)]
    if getattr(args, 'seq', None):
        cmd += ['--seq', str(args.seq)]
    if args.backends:
        cmd += ['--backends', args.backends]
    if getattr(args, 'mode', None):
        cmd += ['--mode', args.mode]
    if getattr(args, 'cold', False):
        cmd += ['--cold']
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as stopped:
        return _stopped(stopped.stdout, args.timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith('JSON ')]
    if not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ['?']
        return {'error': f'exit {done.returncode}: {tail[0][:200]}'}
    record = json.loads(lines[-1][len('JSON '):])
    record['wall_s'] = time.perf_counter() - t0
    if done.returncode != 0:  # (measured, but hidet's result was less accurate than the dtype allows)
        record['accuracy_problem'] = (done.stderr.strip().splitlines() or ['?'])[-1][:300]
    return record


def _stopped(stdout, timeout: int) -> dict:
    """The record of a model stopped at its time limit: the error, naming the backends that had compiled by then
    (hidet bench model's COMPILED lines) and how long each took, so a limit too short shows where it went."""
    text = stdout.decode(errors='replace') if isinstance(stdout, bytes) else (stdout or '')
    compiled = {}
    for line in text.splitlines():
        if line.startswith('COMPILED '):
            entry = json.loads(line[len('COMPILED '):])
            compiled[entry['backend']] = entry['compile_s']
    done = ', '.join(f'{b} {s:.1f} s' for b, s in compiled.items())
    return {'error': f'over {timeout} s' + (f', after compiling {done}' if done else ', before any backend compiled'),
            'compiled': compiled}


def _geomean(values: List[float]) -> Optional[float]:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(name: str, record: dict) -> str:
    """One line of a model's record as it is measured: each backend's latency and compile time and, for each baseline,
    hidet's speed-up over it (or the error)."""
    if 'error' in record:
        return f'{name}: {record["error"]}'
    res = record['results']
    parts = []
    for b, r in res.items():
        ours = paired_hidet(b, res)
        ratio = f', {ours} {r["ms"] / res[ours]["ms"]:.2f}x faster' if b != ours and ours in res else ''
        parts.append(f'{b} {r["ms"]:.3f} ms (compiled in {r["compile_s"]:.1f} s{ratio})')
    return f'{name}: ' + '; '.join(parts)


def table(results: Dict[str, dict], title: str) -> str:
    """The Markdown table of ``results`` (model → record)."""
    backends: List[str] = []
    for record in results.values():
        for b in record.get('results', {}):
            if b not in backends:
                backends.append(b)
    baselines = [b for b in backends if b != 'hidet']
    # hidet's RMS error against float32 over eager's, where eager ran (the issues' bar: no less accurate)
    accuracy = 'eager' in backends and 'hidet' in backends
    head = ['model'] + [f'{b} ms' for b in backends] + [f'{b} compile s' for b in backends] + \
        [f'{paired_hidet(b, backends)} speed-up over {b}' for b in baselines] + \
        (['hidet RMS error / eager\'s'] if accuracy else [])
    lines = [title, '', '| ' + ' | '.join(head) + ' |', '|' + ' --- |' * len(head)]
    ratios: Dict[str, List[float]] = {b: [] for b in baselines}
    errors: List[float] = []
    for name, record in results.items():
        if 'error' in record:
            lines.append(f'| {name} | {record["error"]} |' + ' |' * (len(head) - 2))
            continue
        res = record['results']
        row = [name] + [f'{res[b]["ms"]:.3f}' if b in res else '' for b in backends] + \
            [f'{res[b]["compile_s"]:.1f}' if b in res else '' for b in backends]
        for b in baselines:
            ours = paired_hidet(b, res)  # (inductor-ma against hidet-ma where both ran)
            if b in res and ours in res:
                ratio = res[b]['ms'] / res[ours]['ms']
                ratios[b].append(ratio)
                row.append(f'{ratio:.2f}x')
            else:
                row.append('')
        if accuracy:
            ours, eager = (res.get(b, {}).get('rms_error') for b in ('hidet', 'eager'))
            if ours is not None and eager:
                errors.append(ours / eager)
                row.append(f'{ours / eager:.2f}')
            else:
                row.append('')
        if 'accuracy_problem' in record:
            row[0] += ' (accuracy!)'
        lines.append('| ' + ' | '.join(row) + ' |')
    means = [_geomean(ratios[b]) for b in baselines]
    error_mean = _geomean([e for e in errors if e > 0]) if accuracy else None
    lines.append('| geometric mean |' + ' |' * (2 * len(backends)) +
                 ''.join(f' {m:.2f}x |' if m else ' |' for m in means) +
                 ((f' {error_mean:.2f} |' if error_mean else ' |') if accuracy else ''))
    notes = [f'- {name}: {r["accuracy_problem"]}' for name, r in results.items() if 'accuracy_problem' in r]
    return '\n'.join(lines + ([''] + notes if notes else [])) + '\n'


def chart(results: Dict[str, dict], path: str, title: str) -> Optional[str]:
    """A PNG of hidet's speed-up over each baseline and of the compile times, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ok = {n: r['results'] for n, r in results.items() if 'results' in r and 'hidet' in r['results']}
    if not ok:
        return None
    names = list(ok)
    baselines = sorted({b for res in ok.values() for b in res if b != 'hidet'})
    # (hidet alone: the compile times alone, no speed-up panel without a baseline to be faster than)
    fig, axes = plt.subplots(2 if baselines else 1, 1, figsize=(max(6, 1.2 * len(names)), 8 if baselines else 4),
                             squeeze=False)

    def bars(ax, series, value):
        width = 0.8 / max(len(series), 1)
        for i, (label, b) in enumerate(series):
            ax.bar([x + i * width for x in range(len(names))], [value(ok[n], b) for n in names], width, label=label)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))])
        ax.set_xticklabels(names, rotation=30, ha='right')
        ax.legend()

    if baselines:
        ax1 = axes[0][0]
        bars(ax1, [(f'over {b}', b) for b in baselines], lambda r, b: r[b]['ms'] / r['hidet']['ms'] if b in r else 0)
        ax1.axhline(1.0, color='black', linewidth=0.8)
        ax1.set_ylabel('hidet speed-up (x)')
    axes[0][0].set_title(title)
    ax2 = axes[-1][0]
    bars(ax2, [(b, b) for b in ['hidet'] + baselines], lambda r, b: r[b]['compile_s'] if b in r else 0)
    ax2.set_ylabel('compile time (s)')
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run(args) -> int:
    import torch

    if args.device is None:
        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    out = args.out or f'hidet-bench-{datetime.date.today().isoformat()}'
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, 'results.json')
    saved = {}
    if os.path.exists(path) and not args.fresh:
        with open(path) as f:
            saved = json.load(f)
        if saved.get('setup') != _setup(args):
            raise SystemExit(f'hidet bench suite: {path} holds results of another setup ({saved.get("setup")}); '
                             f'pass --fresh to start over or --out for another directory')
    results: Dict[str, dict] = saved.get('models', {})
    names = [m.strip() for m in args.models.split(',') if m.strip()]
    for name in names:
        if name in results and 'error' not in results[name]:
            print(f'{name}: measured before (resuming {path})', flush=True)
            continue
        print(f'{name}: measuring ...', flush=True)
        results[name] = _bench(name, args)
        print(summary(name, results[name]), flush=True)  # (a run stopped later still shows what it measured)
        with open(path + '.tmp', 'w') as f:
            json.dump({'setup': _setup(args), 'models': results}, f, indent=2)
        os.replace(path + '.tmp', path)
    seq = f', {args.seq} tokens' if getattr(args, 'seq', None) else ''
    title = (f'{args.dtype}, batch {args.batch}{seq}, {args.device} ({_machine(args.device)}), '
             f'{datetime.date.today().isoformat()}')
    text = table({n: results[n] for n in names if n in results}, title)
    with open(os.path.join(out, 'table.md'), 'w') as f:
        f.write(text)
    print(text)
    png = chart({n: results[n] for n in names if n in results}, os.path.join(out, 'chart.png'), title)
    print(f'wrote {path}, {os.path.join(out, "table.md")}' +
          (f', {png}' if png else ' (no chart: install matplotlib, the "charts" extra)'))
    return 0


def _setup(args) -> dict:
    setup = {'dtype': args.dtype, 'batch': args.batch, 'device': args.device, 'backends': args.backends,
             'repeat': args.repeat}
    # (only when set: a directory of a run without them resumes as before)
    if getattr(args, 'mode', None):
        setup['mode'] = args.mode
    if getattr(args, 'cold', False):
        setup['cold'] = True
    if getattr(args, 'seq', None):
        setup['seq'] = args.seq
    return setup


def _machine(device: str) -> str:
    if device == 'cuda':
        import torch

        return torch.cuda.get_device_name()
    import platform

    return platform.processor() or platform.machine()
