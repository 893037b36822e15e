"""Which kernel sources two hidet caches hold: the sources of one test-suite run against another's, to show that a
change (a refactoring, a move) generates the same kernels, or which ones it changed.

    HIDET_CACHE_DIR=/tmp/before bash .ci/run     # at the commit before
    HIDET_CACHE_DIR=/tmp/after bash .ci/run      # at the commit after
    python scripts/compare_kernel_caches.py /tmp/before /tmp/after

Prints how many sources (by sha256 of ``source.cu`` / ``source.cpp``) each holds and both hold, and the kernels of
each source that only one holds."""
from __future__ import annotations

import argparse
import hashlib
import os
import re
from typing import Dict


def sources(cache_dir: str) -> Dict[str, str]:
    """sha256 of each kernel source in ``cache_dir`` → its path."""
    found = {}
    for directory, _, files in os.walk(os.path.join(cache_dir, 'kernels')):
        for name in files:
            if name.startswith('source.'):
                path = os.path.join(directory, name)
                with open(path, 'rb') as f:
                    found[hashlib.sha256(f.read()).hexdigest()] = path
    return found


def kernels(path: str):
    with open(path, errors='replace') as f:
        return re.findall(r'HIDET_KERNEL_EXPORT int32_t (\w+)\(', f.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('before')
    parser.add_argument('after')
    parser.add_argument('--show', type=int, default=50, help='sources listed per side')
    args = parser.parse_args()
    a, b = sources(args.before), sources(args.after)
    print(f'{len(a)} sources in {args.before}, {len(b)} in {args.after}, {len(set(a) & set(b))} in both')
    for label, only, where in (('only before', set(a) - set(b), a), ('only after', set(b) - set(a), b)):
        print(f'{label}: {len(only)}')
        for digest in sorted(only, key=lambda d: where[d])[:args.show]:
            print(f'  {digest[:12]}  {", ".join(kernels(where[digest])[:3])}')


if __name__ == '__main__':
    main()
