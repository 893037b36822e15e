#!/usr/bin/env bash
# On a GPU machine: build and install the package from this tree, then run the quick start and the
# test suite (the `cuda`-marked tests included), writing logs to the directory given (default
# $OUT, else ./gpu-logs). Later issues add their benchmarks here.
#
#   bash scripts/gpu_check.sh [LOG_DIR] [extra pytest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
LOG_DIR=${1:-${OUT:-gpu-logs}}
shift || true
mkdir -p "$LOG_DIR"
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$LOG_DIR/gpu.txt"
echo "== install"
python3 -m pip install --no-build-isolation --no-deps -q . > "$LOG_DIR/install.log" 2>&1 \
  || { tail -50 "$LOG_DIR/install.log"; exit 1; }
echo "== quick start"
(cd /tmp && python3 -m hidet && python3 "$OLDPWD/examples/quickstart.py") 2>&1 | tee "$LOG_DIR/quickstart.log"
echo "== C++ tests"
if [ -e /usr/include/gtest/gtest.h ]; then
  (cmake -S . -B build/gpu-cpp-tests -DHIDET_BUILD_TESTS=ON > /dev/null && cmake --build build/gpu-cpp-tests -j 16 > /dev/null \
    && ctest --test-dir build/gpu-cpp-tests --output-on-failure) 2>&1 | tee "$LOG_DIR/ctest.log"
else
  echo "GoogleTest is not installed here: C++ tests not run" | tee "$LOG_DIR/ctest.log"
fi
echo "== Python tests"
# Kernels compile on first use; spread the tests over the cores where pytest-xdist is installed.
PARALLEL=$(python3 -c 'import xdist' 2>/dev/null && echo "-n $(nproc) -p no:benchmark" || true)
python3 -m pytest tests -q -rs $PARALLEL --junitxml="$LOG_DIR/pytest.xml" "$@" 2>&1 | tee "$LOG_DIR/pytest.log"
status=${PIPESTATUS[0]}
echo "== benchmarks"
(cd /tmp && python3 "$OLDPWD/scripts/bench_build.py") 2>&1 | tee "$LOG_DIR/bench_build.log"
(cd /tmp && python3 "$OLDPWD/scripts/bench_ops.py") 2>&1 | tee "$LOG_DIR/bench_ops.log"
exit "$status"
