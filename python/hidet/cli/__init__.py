"""The ``hidet`` command line (also ``python -m hidet``).

    hidet bench matmul 4096 4096 4096 --dtype f16      # latency, TFLOP/s, ratios against torch
    hidet bench conv2d 32 64 56 56 64 3 3 --padding 1
    hidet bench model resnet50 --batch 1 --dtype f16 --backends hidet,eager,inductor-ro --profile
    hidet bench suite --models resnet18,bert --out bench-dir   # a table, a chart and JSON over models (resumable)
    hidet cache status | hidet cache clear
    hidet cache tuning --level 2                         # each tuned task's default config against the best
    hidet --include-dir | --lib-dir | --cmake-dir        # where the runtime's files are installed
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

import hidet
from hidet.backend import cache
from hidet.backend.compiler import include_dir, lib_dir
from hidet.cli import bench, tuning


def _paths_and_info(args) -> None:
    if args.cmake_dir:
        print(os.path.join(lib_dir(), 'cmake', 'hidet'))
    elif args.include_dir:
        print(include_dir())
    elif args.lib_dir:
        print(lib_dir())
    else:
        print(f'hidet {hidet.__version__} at {os.path.dirname(os.path.abspath(hidet.__file__))}')
        cuda = (f'available, {hidet.cuda.device_count()} device(s)' if hidet.cuda.available()
                else hidet.cuda.unavailable_reason())
        print(f'cuda: {cuda}')
        print(f'cache: {hidet.option.current().cache_dir}')


def _cache(args) -> None:
    from tabulate import tabulate

    if args.action == 'clear':
        cache.clear('all')
        print('cache cleared')
    elif args.action == 'tuning':
        print(tuning.report(cache.tuning_records(), level=args.level, since=args.since))
    else:
        rows = []
        for kind in cache.KINDS:
            s = cache.status(kind)
            rows.append([kind, s['entries'], f"{s['bytes'] / 2 ** 20:.1f} MiB", s['path']])
        print(tabulate(rows, headers=['kind', 'entries', 'size', 'path']))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='hidet', description='hidet: a deep-learning inference compiler.')
    parser.add_argument('--include-dir', action='store_true', help='print the directory holding hidet/runtime.h')
    parser.add_argument('--lib-dir', action='store_true', help='print the directory holding libhidet_runtime.so')
    parser.add_argument('--cmake-dir', action='store_true',
                        help='print the directory holding hidetConfig.cmake (for -Dhidet_DIR=...)')
    sub = parser.add_subparsers(dest='command')
    bench.add_parser(sub)
    cache_parser = sub.add_parser('cache', help='inspect or clear the on-disk cache')
    cache_parser.add_argument('action', choices=['status', 'clear', 'tuning'],
                              help='tuning: each tuned task\'s default config against the best one found')
    cache_parser.add_argument('--level', type=int, default=None, help='tuning: only this search level')
    cache_parser.add_argument('--since', default=None,
                              help="tuning: only tasks tuned at or after this time ('YYYY-MM-DD HH:MM:SS')")
    cache_parser.set_defaults(func=_cache)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, 'func', None) is None:
        _paths_and_info(args)
        return 0
    return args.func(args) or 0


if __name__ == '__main__':
    sys.exit(main())
