#!/usr/bin/env bash
# The whole test suite: the C++ runtime's GoogleTests (ctest) and the Python tests (pytest).
# Run from the repository root after `pip install .`. Installs what it needs where missing:
# pytest, pytest-xdist and expecttest (pip) and GoogleTest (Debian's libgtest-dev). The tests run on every core
# (pytest -n auto).
#   bash scripts/test.sh [--quick] [pytest arguments...]
# --quick: the C++ tests and the Python tests of the lower layers (IR, schedulers, backend, runtime, graph
# passes, command line), without Hidet Script, the operator, frontend and model suites: under 4 minutes on 2
# cores with an empty kernel cache (3:54 measured with another test run on the same cores).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import pytest' 2>/dev/null; then python3 -m pip install -q pytest; fi
# (pytest-xdist: the suite on every core, as CI's two; most of its time is compiling kernels)
if ! python3 -c 'import xdist' 2>/dev/null; then python3 -m pip install -q pytest-xdist; fi
# (expecttest: torch's OpInfo database, which tests/frontend/torch/test_opinfo.py reads, imports it)
if ! python3 -c 'import expecttest' 2>/dev/null; then python3 -m pip install -q expecttest; fi
if [ ! -e /usr/include/gtest/gtest.h ] && [ ! -e /usr/local/include/gtest/gtest.h ]; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -q && $SUDO apt-get install -y -q libgtest-dev
fi

echo "== C++ runtime tests (ctest)"
cmake -S . -B build/cpp-tests -DHIDET_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build/cpp-tests -j "$(nproc)"
ctest --test-dir build/cpp-tests --output-on-failure

echo "== Python tests (pytest)"
if [ "${1:-}" = "--quick" ]; then
  shift
  python3 -m pytest tests/ir tests/backend tests/runtime tests/graph/transforms tests/utils tests/test_cli.py \
    tests/test_structure.py -q -n auto "$@"
else
  python3 -m pytest tests -q -n auto "$@"
fi
