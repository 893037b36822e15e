#!/usr/bin/env bash
# On a GPU machine: install, run the matmul-template tests, and time the matmul kernels against torch.
#   bash scripts/gpu_matmul.sh [LOG_DIR] [SPACES...]     (default: $OUT, spaces "0 2")
# env: TEST_TIMEOUT, BENCH_TIMEOUT (seconds), BENCH_ARGS (more bench_matmul.py flags, e.g. --candidates),
# TESTS (pytest selection; default the matmul-template tests), SHAPES (bench_matmul.py shapes)
set -uo pipefail
cd "$(dirname "$0")/.."
LOG_DIR=${1:-${OUT:-gpu-logs}}
shift || true
SPACES=${*:-0 2}
mkdir -p "$LOG_DIR"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -q . > "$LOG_DIR/install.log" 2>&1 \
  || { tail -50 "$LOG_DIR/install.log"; exit 1; }
echo "== installed in $(( $(date +%s) - t0 )) s"
if ls .whl/*.whl > /dev/null 2>&1; then  # pytest-xdist (see gpu_check.sh)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
DEFAULT_TESTS="tests/graph/ops/test_matmul_template.py tests/graph/ops/test_matmul_template_gpu.py"
TESTS=$(for t in ${TESTS:-$DEFAULT_TESTS}; do echo "$PWD/$t"; done)  # (run from /tmp)
cd /tmp
t0=$(date +%s)
timeout ${TEST_TIMEOUT:-150} python3 -m pytest $TESTS -q -rs -n 4 \
  -p no:benchmark -p no:cacheprovider 2>&1 | tee "$LOG_DIR/pytest.log" | tail -40
echo "== tests in $(( $(date +%s) - t0 )) s"
timeout ${BENCH_TIMEOUT:-150} python3 "$OLDPWD/scripts/bench_matmul.py" ${SHAPES:-4096x4096x4096 1x4096x4096 128x4096x4096} \
  --space $SPACES ${BENCH_ARGS:-} 2>&1 | tee "$LOG_DIR/bench_matmul.log" | grep -v "it/s\]"
