"""The hidet command line: paths, cache, and benchmarks (small, on the CPU)."""
import subprocess
import sys

import hidet
from hidet.cli import main


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


def test_bench_matmul_and_conv_on_cpu(capsys):
    main(['bench', 'matmul', '16', '8', '4', '--device', 'cpu', '--dtype', 'f32', '--backends', 'hidet,eager',
          '--warmup', '1', '--repeat', '2'])
    out = capsys.readouterr().out
    assert 'matmul 16x8x4 f32 on cpu' in out and 'hidet' in out and 'eager' in out and 'x' in out
    main(['bench', 'conv2d', '1', '4', '6', '6', '8', '3', '3', '--padding', '1', '--device', 'cpu', '--dtype', 'f32',
          '--backends', 'hidet,eager', '--warmup', '1', '--repeat', '2'])
    assert 'conv2d' in capsys.readouterr().out
