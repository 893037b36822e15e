"""The hidet command line: paths, cache, and benchmarks (small, on the CPU)."""
import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

import hidet
from hidet.cli import main
from hidet.cli.bench import _exclusive_times, _kernel_label


def test_paths(capsys):
    main(['--include-dir'])
    assert capsys.readouterr().out.strip().endswith('include')
    main(['--cmake-dir'])
    assert capsys.readouterr().out.strip().endswith('cmake/hidet')
    out = subprocess.run([sys.executable, '-m', 'hidet'], capture_output=True, text=True, check=True).stdout
    assert f'hidet {hidet.__version__}' in out and 'cache:' in out


def test_cache_status(capsys):
    main(['cache', 'status'])
    assert 'kernels' in capsys.readouterr().out


def test_cache_tuning_shows_each_tuned_task_against_its_default(capsys, tmp_path):
    """A graph built at search level 1 tunes the CPU GEMM; the report lists the task with its default's and the
    best candidate's latencies, and a summary against the 1.15x bar."""
    from hidet import ops

    x = hidet.symbol([16, 32], 'float32', 'cpu')
    w = hidet.randn([24, 32], device='cpu')
    graph = hidet.trace_from(ops.matmul(x, ops.transpose(w, 0, 1)), [x])
    with hidet.option.context(cache_dir=str(tmp_path)):
        graph.build(space=1)
        main(['cache', 'tuning', '--level', '1'])
        listed = capsys.readouterr().out
        main(['cache', 'tuning', '--level', '2'])
        assert capsys.readouterr().out.startswith('no tuned tasks in the cache at level 2')
        main(['cache', 'tuning', '--since', '2999-01-01 00:00:00'])
        assert capsys.readouterr().out.startswith('no tuned tasks')
    assert 'default / best' in listed and re.search(r'1 tuned task\(s\): the default within 1.15x of the best on '
                                                    r'[01] \(\d+%\); geometric mean', listed), listed


def test_tuning_report_puts_the_worst_default_first():
    from hidet.cli.tuning import report

    def record(title, default, best, level=2, time='2026-11-27 10:00:00'):
        return {'title': title, 'level': level, 'time': time, 'latency_ms': best, 'config': {'bm': 64, 'tma': False},
                'candidates': [{'config': {'bm': 16}, 'latency_ms': default}, {'config': {}, 'latency_ms': best}]}

    records = [record('near', 0.0105, 0.01), record('far', 0.03, 0.01), record('broken default', None, 0.02),
               record('level 1', 0.05, 0.01, level=1), record('old', 0.05, 0.01, time='2026-11-26 10:00:00')]
    text = report(records, level=2, since='2026-11-27 00:00:00')
    lines = text.splitlines()
    assert [ln.split()[0] for ln in lines[2:5]] == ['broken', 'far', 'near']  # inf, 3.00x, 1.05x
    assert 'failed' in lines[2] and '3.00x' in lines[3] and 'bm=64' in lines[4] and 'tma' not in lines[4]
    assert lines[4].rstrip().endswith('bm=16') and 'default config' in lines[0]  # (what level 0 ran, beside the best)
    assert lines[-1].startswith('3 tuned task(s): the default within 1.15x of the best on 1 (33%); '
                                'geometric mean 1.775x; worst a default that failed to run (broken default)'), lines[-1]


def test_bench_matmul_and_conv_on_cpu(capsys):
    main(['bench', 'matmul', '16', '8', '4', '--device', 'cpu', '--dtype', 'f32', '--backends', 'hidet,eager',
          '--warmup', '1', '--repeat', '2'])
    out = capsys.readouterr().out
    assert 'matmul 16x8x4 f32 on cpu' in out and 'hidet' in out and 'eager' in out and 'x' in out
    main(['bench', 'conv2d', '1', '4', '6', '6', '8', '3', '3', '--padding', '1', '--device', 'cpu', '--dtype', 'f32',
          '--backends', 'hidet,eager', '--warmup', '1', '--repeat', '2'])
    assert 'conv2d' in capsys.readouterr().out


def test_bench_checks_results_against_float32(capsys):
    main(['bench', 'matmul', '16', '8', '4', '--device', 'cpu', '--dtype', 'f32', '--backends', 'hidet,eager',
          '--warmup', '1', '--repeat', '2', '--json'])
    out = capsys.readouterr().out
    assert 'max error vs fp32' in out and 'rms error' in out
    results = json.loads(out.split('JSON ', 1)[1])['results']
    assert 0 <= results['hidet']['max_error'] < 1e-4 and results['eager']['max_error'] == 0
    assert 0 <= results['hidet']['rms_error'] <= results['hidet']['max_error'] and results['eager']['rms_error'] == 0


def test_bench_fails_on_a_wrong_result(monkeypatch, capsys):
    matmul = hidet.ops.matmul
    monkeypatch.setattr(hidet.ops, 'matmul', lambda a, b: matmul(a, b) + 0.5)  # a kernel that computes C + 0.5
    rc = main(['bench', 'matmul', '16', '8', '4', '--device', 'cpu', '--dtype', 'f32', '--backends', 'hidet',
               '--warmup', '1', '--repeat', '2'])
    captured = capsys.readouterr()
    assert rc == 1 and "hidet's result is off" in captured.err and '0.5' in captured.err
    assert 'hidet' in captured.out  # the table is still printed


def test_accuracy_verdict():
    import torch

    from hidet.cli import accuracy

    ref = (torch.tensor([1.0, -4.0]), {'cache': object()})  # only float tensors are compared
    assert accuracy.scale(ref) == 4.0
    assert accuracy.max_error([torch.tensor([1.5, -4.0])], ref) == 0.5
    assert accuracy.max_error([torch.tensor([float('nan'), -4.0])], ref) == float('inf')
    assert accuracy.max_error([torch.zeros(3)], ref) is None  # another shape
    assert accuracy.rms_error([torch.tensor([1.5, -4.0])], ref) == pytest.approx((0.25 / 2) ** 0.5)
    assert accuracy.rms_error([torch.tensor([float('nan'), -4.0])], ref) == float('inf')
    assert accuracy.rms_error([torch.zeros(3)], ref) is None
    assert accuracy.verdict({'hidet': 0.05, 'eager': 0.01}, 4.0, 2e-2) is None  # 0.05 <= 0.01 + 0.08
    assert 'off' in accuracy.verdict({'hidet': 0.1, 'eager': 0.01}, 4.0, 2e-2)
    assert 'in number or shape' in accuracy.verdict({'hidet': None, 'eager': 0.0}, 4.0, 2e-2)
    assert accuracy.verdict({'eager': 1.0}, 4.0, 2e-2) is None  # hidet not benchmarked


def _bench_an_mlp(monkeypatch, hidden: int, activation: str, outputs: int):
    """hidet bench model's model, whatever its name: an MLP of 8 inputs (each test its own shapes: a kernel another
    test's build expects to compile is then not loaded in the process already)."""
    import torch

    from hidet.cli import models

    def small_model(name, batch, seq, device, dtype):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, hidden), getattr(torch.nn, activation)(),
                                    torch.nn.Linear(hidden, outputs))
        return model.eval().to(device=device, dtype=dtype), [torch.randn(batch, 8, dtype=dtype, device=device)]

    monkeypatch.setattr(models, 'make_model', small_model)


def test_bench_model_checks_each_backend(monkeypatch, capsys):
    _bench_an_mlp(monkeypatch, 16, 'GELU', 4)
    rc = main(['bench', 'model', 'mlp', '--batch', '3', '--device', 'cpu', '--dtype', 'f32', '--backends', 'hidet',
               '--warmup', '1', '--repeat', '2', '--json'])
    out = capsys.readouterr().out
    results = json.loads(out.split('JSON ', 1)[1])['results']
    assert rc == 0 and 0 <= results['hidet']['max_error'] < 1e-4


def test_bench_model_times_hidet_default_and_tuned_in_one_run(monkeypatch, capsys):
    """hidet-ma (hidet tuned, max-autotune) beside hidet in one run: both results checked against float32, and
    --space / --mode, which would set both, refused with it."""
    _bench_an_mlp(monkeypatch, 24, 'ReLU', 6)
    args = ['bench', 'model', 'mlp', '--batch', '5', '--device', 'cpu', '--dtype', 'f32', '--warmup', '1',
            '--repeat', '2']
    rc = main(args + ['--backends', 'hidet,hidet-ma', '--json'])
    out = capsys.readouterr().out
    results = json.loads(out.split('JSON ', 1)[1])['results']
    assert rc == 0 and set(results) == {'hidet', 'hidet-ma'}
    assert all(0 <= r['max_error'] < 1e-4 for r in results.values())
    with pytest.raises(SystemExit, match='hidet-ma is hidet tuned'):
        main(args + ['--backends', 'hidet,hidet-ma', '--space', '2'])


def test_suite_compares_inductor_max_autotune_with_tuned_hidet():
    from hidet.cli.suite import summary, table

    def result(ms):
        return {'ms': ms, 'compile_s': 1.0}

    results = {'bert': {'results': {'hidet': result(0.6), 'hidet-ma': result(0.5), 'inductor-ro': result(0.9),
                                    'inductor-ma': result(0.8)}}}
    lines = table(results, 'title').splitlines()
    head, row = ([cell.strip() for cell in line.strip('|').split('|')] for line in (lines[2], lines[4]))
    ratios = dict(zip(head[-3:], row[-3:]))
    assert ratios == {'hidet speed-up over hidet-ma': '0.83x', 'hidet speed-up over inductor-ro': '1.50x',
                      'hidet-ma speed-up over inductor-ma': '1.60x'}, ratios
    line = summary('bert', results['bert'])  # (the line printed as the model is measured: the same pairs)
    assert 'inductor-ma 0.800 ms (compiled in 1.0 s, hidet-ma 1.60x faster)' in line
    assert 'inductor-ro 0.900 ms (compiled in 1.0 s, hidet 1.50x faster)' in line


def test_bench_profile_and_default_backends(capsys):
    # on a CPU-only machine: the device defaults to the CPU and the baselines to eager and inductor's default mode
    rc = main(['bench', 'matmul', '16', '8', '4', '--dtype', 'f32', '--warmup', '1', '--repeat', '2', '--profile',
               '--backends', 'hidet,eager'])
    out = capsys.readouterr().out
    assert rc == 0 and 'on cpu' in out
    assert out.count('per call in') == 2  # a kernel table per backend
    assert 'hidet speed-up over it' in out
    # --profile ROWS: the ROWS longest kernels, the rest summed in one row
    rc = main(['bench', 'matmul', '16', '8', '4', '--dtype', 'f32', '--warmup', '1', '--repeat', '2', '--profile', '0',
               '--backends', 'hidet'])
    out = capsys.readouterr().out
    assert rc == 0 and re.search(r'\(\d+ more\)', out), out


def test_profile_labels_keep_the_kernels_name_alone():
    # a C++ kernel's void and parameter list and hidet's namespace go, so 90 characters hold the name
    hidet_kernel = 'mma_fused_conv2d_channels_last_cast_f32_mult_32x56x56x64x256_64x128x64_w64x128_p3_wg_tma'
    assert _kernel_label(f'hidet_script::{hidet_kernel}(__half*, __half*, float*, int)') == hidet_kernel
    assert _kernel_label('void cutlass::Kernel<gemm<64, (int)2>>(Params)') == 'cutlass::Kernel<gemm<64, (int)2>>'
    for name in ('triton_poi_fused_add_mul_pow_tanh_view_5', 'Memcpy DtoD (Device -> Device)', 'Memset (Unknown)'):
        assert _kernel_label(name) == name


def test_kernel_times_count_overlaps_once():
    # programmatic dependent launch: a kernel's blocks start (and wait) before the one before it ends; its time
    # then runs from that end, and the total is the time the GPU was busy
    def event(name, start, end):
        return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end))

    events = [event('b', 8.0, 15.0), event('a', 0.0, 10.0), event('c', 20.0, 21.0), event('d', 20.5, 20.8)]
    assert _exclusive_times(events) == [('a', 10.0), ('b', 5.0), ('c', 1.0), ('d', 0.0)]


def test_bench_cold_compiles_from_empty_caches(monkeypatch, tmp_path, capsys):
    # --cold: hidet's kernels build into a fresh cache (the process's own gets nothing), inductor and Triton get
    # fresh directories too, and everything is as it was afterwards
    import os

    from hidet.cli import bench

    seen = []
    original = bench._run

    def spy(args):
        seen.append((hidet.option.get_cache_dir(), os.environ.get('TORCHINDUCTOR_CACHE_DIR'),
                     os.environ.get('TRITON_CACHE_DIR')))
        return original(args)

    monkeypatch.setattr(bench, '_run', spy)
    monkeypatch.delenv('TRITON_CACHE_DIR', raising=False)
    with hidet.option.context(cache_dir=str(tmp_path)):
        before = os.environ.get('TORCHINDUCTOR_CACHE_DIR')
        rc = main(['bench', 'matmul', '12', '8', '4', '--device', 'cpu', '--dtype', 'f32', '--backends', 'hidet',
                   '--warmup', '1', '--repeat', '2', '--cold'])
        assert hidet.option.get_cache_dir() == str(tmp_path) and os.environ.get('TORCHINDUCTOR_CACHE_DIR') == before
    assert rc == 0 and len(seen) == 1
    cache, inductor, triton = seen[0]
    assert 'hidet-bench-cold-' in cache and not os.path.exists(cache)  # (a temporary directory, removed after)
    assert 'hidet-bench-cold-' in inductor and 'hidet-bench-cold-' in triton
    assert not (tmp_path / 'kernels').exists() and 'TRITON_CACHE_DIR' not in os.environ


def test_bench_interleaves_the_backends_in_rounds():
    # each backend's repeats come in rounds, the backends in turn, so a drift during the run meets them alike
    from hidet.cli import bench

    order = []
    calls = {name: (lambda name=name: order.append(name)) for name in ('hidet', 'inductor-ro')}
    medians = bench._interleaved_medians(calls, 'cpu', warmup=1, repeat=12)
    assert set(medians) == {'hidet', 'inductor-ro'} and all(m >= 0 for m in medians.values())
    timed = order[2:]  # (after one warmup call each)
    assert order[:2] == ['hidet', 'inductor-ro'] and len(timed) == 24
    blocks = [timed[i] for i in range(len(timed)) if i == 0 or timed[i] != timed[i - 1]]
    assert blocks == ['hidet', 'inductor-ro'] * bench.ROUNDS  # 12 repeats in 5 rounds: 3, 3, 2, 2, 2


def test_bench_suite_passes_mode_and_cold_to_each_model(monkeypatch, tmp_path):
    # the tuned comparison (--mode max-autotune against inductor-ma) and cold compiles, model by model
    import subprocess as sp

    from hidet.cli import suite

    commands = []

    def fake_run(cmd, **kwargs):
        commands.append(cmd)
        return sp.CompletedProcess(cmd, 0, stdout='JSON {"results": {}}\n', stderr='')

    monkeypatch.setattr(suite.subprocess, 'run', fake_run)
    assert main(['bench', 'suite', '--models', 'resnet18', '--device', 'cpu', '--backends', 'hidet,inductor-ma',
                 '--mode', 'max-autotune', '--cold', '--out', str(tmp_path / 's')]) == 0
    (cmd,) = [c for c in commands if 'bench' in c]
    assert cmd[cmd.index('--mode') + 1] == 'max-autotune' and '--cold' in cmd and 'resnet18' in cmd


def test_bench_help_shows_the_baselines(capsys):
    with pytest.raises(SystemExit):
        main(['bench', 'model', '--help'])
    out = capsys.readouterr().out
    for name in ('inductor-ro', 'inductor-ma', '--profile', '--device'):
        assert name in out


def test_bench_suite_table_resume_and_errors(tmp_path, monkeypatch, capsys):
    from hidet.cli import suite

    calls = []

    def fake_bench(name, args):
        calls.append(name)
        if name == 'broken':
            return {'error': 'exit 1: RuntimeError: boom'}
        ms = {'a': 2.0, 'b': 1.0}[name]
        return {'results': {'hidet': {'ms': ms, 'compile_s': 3.0, 'max_error': 0.0, 'rms_error': ms * 1e-3},
                            'eager': {'ms': 4.0, 'compile_s': 0.1, 'max_error': 0.0, 'rms_error': 4e-3}}}

    monkeypatch.setattr(suite, '_bench', fake_bench)
    out = str(tmp_path / 'suite')
    args = ['bench', 'suite', '--models', 'a,broken', '--device', 'cpu', '--backends', 'hidet,eager', '--out', out]
    assert main(args) == 0
    printed = capsys.readouterr().out  # each model's line as it is measured, before the table
    assert 'a: hidet 2.000 ms (compiled in 3.0 s); eager 4.000 ms (compiled in 0.1 s, hidet 2.00x faster)' in printed
    assert 'broken: exit 1: RuntimeError: boom' in printed
    assert printed.index('a: hidet 2.000 ms') < printed.index('| model |')
    text = open(os.path.join(out, 'table.md')).read()
    assert '| a | 2.000 | 4.000 | 3.0 | 0.1 | 2.00x | 0.50 |' in text
    assert '| broken | exit 1: RuntimeError: boom |' in text
    assert "hidet RMS error / eager's" in text
    # resumed: a measured model is not measured again, a failed one is, a new one is added
    calls.clear()
    assert main(['bench', 'suite', '--models', 'a,broken,b', '--device', 'cpu', '--backends', 'hidet,eager',
                 '--out', out]) == 0
    assert calls == ['broken', 'b']
    text = open(os.path.join(out, 'table.md')).read()
    assert '| geometric mean |' in text and '2.83x' in text and ' 0.35 |' in text  # sqrt(2 * 4), sqrt(0.5 * 0.25)
    saved = json.load(open(os.path.join(out, 'results.json')))
    assert set(saved['models']) == {'a', 'broken', 'b'}
    # another setup in the same directory is refused rather than mixed in (a tuned or cold run too)
    with pytest.raises(SystemExit, match='another setup'):
        main(['bench', 'suite', '--models', 'a', '--device', 'cpu', '--batch', '8', '--out', out])
    with pytest.raises(SystemExit, match='another setup'):
        main(['bench', 'suite', '--models', 'a', '--device', 'cpu', '--backends', 'hidet,eager', '--out', out,
              '--mode', 'max-autotune'])
    png = os.path.join(out, 'chart.png')
    try:
        import matplotlib  # noqa: F401
        assert os.path.getsize(png) > 0
    except ImportError:
        assert not os.path.exists(png) and 'install matplotlib' in capsys.readouterr().out


def test_suite_chart_of_hidet_alone_has_the_compile_panel_only(tmp_path):
    """A suite of hidet alone (an A/B of two trees) charts its compile times, with no empty speed-up panel (whose
    legend matplotlib warned about)."""
    import warnings

    pytest.importorskip('matplotlib')
    from hidet.cli.suite import chart

    results = {'resnet18': {'results': {'hidet': {'ms': 0.2, 'compile_s': 9.9}}}}
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        path = chart(results, str(tmp_path / 'chart.png'), 'hidet alone')
    assert path and os.path.getsize(path) > 0


def test_bench_suite_names_what_compiled_before_a_time_limit(monkeypatch):
    """A model stopped at the suite's time limit keeps the compile times hidet bench model reported before it
    (its COMPILED lines, flushed as each backend compiles): the limit's error names where the time went."""
    import subprocess
    from types import SimpleNamespace

    from hidet.cli import suite

    def stopped(cmd, **kwargs):
        assert '--json' in cmd and kwargs['timeout'] == 540
        out = (b'COMPILED {"backend": "hidet", "compile_s": 12.14}\n'
               b'COMPILED {"backend": "hidet-ma", "compile_s": 201.3}\n')
        raise subprocess.TimeoutExpired(cmd, kwargs['timeout'], output=out)

    monkeypatch.setattr(suite.subprocess, 'run', stopped)
    args = SimpleNamespace(dtype='f16', batch=1, device='cuda', repeat=50, backends='hidet,hidet-ma,inductor-ma',
                           timeout=540)
    record = suite._bench('efficientnet_b0', args)
    assert record == {'error': 'over 540 s, after compiling hidet 12.1 s, hidet-ma 201.3 s',
                      'compiled': {'hidet': 12.14, 'hidet-ma': 201.3}}
    assert '| efficientnet_b0 | over 540 s, after compiling hidet 12.1 s, hidet-ma 201.3 s |' in \
        suite.table({'efficientnet_b0': record}, 'title')
    assert suite._stopped(None, 60)['error'] == 'over 60 s, before any backend compiled'
