"""``python -m hidet``: the ``hidet`` command line (hidet/cli)."""
import sys

from hidet.cli import main

if __name__ == '__main__':
    sys.exit(main())
