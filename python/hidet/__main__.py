"""``python -m hidet``: print where the package keeps its headers and libraries."""
import argparse
import os

import hidet
from hidet.backend.compiler import include_dir, lib_dir


def main() -> None:
    root = os.path.dirname(os.path.abspath(hidet.__file__))
    parser = argparse.ArgumentParser(prog='python -m hidet', description=__doc__)
    parser.add_argument('--include-dir', action='store_true', help='the directory holding hidet/runtime.h')
    parser.add_argument('--lib-dir', action='store_true', help='the directory holding libhidet_runtime.so')
    parser.add_argument('--cmake-dir', action='store_true',
                        help='the directory holding hidetConfig.cmake (for -Dhidet_DIR=...)')
    args = parser.parse_args()
    if args.cmake_dir:
        print(os.path.join(lib_dir(), 'cmake', 'hidet'))
    elif args.include_dir:
        print(include_dir())
    elif args.lib_dir:
        print(lib_dir())
    else:
        print(f'hidet {hidet.__version__} at {root}')
        print(f'cuda: {"available, %d device(s)" % hidet.cuda.device_count() if hidet.cuda.available() else hidet.cuda.unavailable_reason()}')


if __name__ == '__main__':
    main()
