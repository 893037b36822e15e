#!/usr/bin/env bash
# The whole test suite: the C++ runtime's GoogleTests (ctest) and the Python tests (pytest).
# Run from the repository root after `pip install .`. Installs what it needs where missing:
# pytest (pip) and GoogleTest (Debian's libgtest-dev).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import pytest' 2>/dev/null; then python3 -m pip install -q pytest; fi
if [ ! -e /usr/include/gtest/gtest.h ] && [ ! -e /usr/local/include/gtest/gtest.h ]; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -q && $SUDO apt-get install -y -q libgtest-dev
fi

echo "== C++ runtime tests (ctest)"
cmake -S . -B build/cpp-tests -DHIDET_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build/cpp-tests -j "$(nproc)"
ctest --test-dir build/cpp-tests --output-on-failure

echo "== Python tests (pytest)"
python3 -m pytest tests -q "$@"
