#!/usr/bin/env bash
# On a GPU machine: build and install the package from this tree, then run the quick start, the
# `cuda`-marked tests and the benchmarks, writing logs to LOG_DIR (default $OUT, else ./gpu-logs).
# Each stage has a time limit (seconds, from the environment) so one call of a lent machine always
# comes back with logs.
#
#   bash scripts/gpu_check.sh [LOG_DIR] [STAGE...]
#   STAGE: core (cuda tests but the model suites; core-ops and core-rest: its two halves), select (the cuda tests
#          under $SELECT), models (torchvision / transformers / ONNX models),
#          bench (build times, ops, matmul), conv (resnet50's 3x3 convolutions at batch 32, channels-last, against
#          cuDNN; tuning level CONV_SPACE, default 0), tma (the TMA im2col copy, convolution and GEMM TMA configs
#          against torch, tuning with candidates compiled together, then levels 0 and 2 timed on resnet50's 3x3
#          convolutions at batch 32 and the matmuls of issue 7; TMA_BENCH_ARGS="--candidates --twins" times every
#          candidate and its cp.async / TMA twin), autotune (resnet50
#          through max-autotune in a fresh cache, then again: cold and warm compile times), report (the model
#          table, serving from C++ against Python, ONNX models against onnxruntime), suite (every model against
#          inductor reduce-overhead and eager, compiled cold: latency, compile time, accuracy; resumes from
#          $LOG_DIR/suite), resnet50 (its 22 convolutions at batch 32 against cuDNN, bare and with a residual
#          block's epilogue, then the model at batch 32 with its kernel table), tuned (hidet default and tuned
#          against inductor's reduce-overhead and max-autotune in one run, one model at a time: TUNED_MODELS,
#          TUNED_TIMEOUT each, at batch TUNED_BATCH (default 1), TUNED_BACKENDS (default all four: a model whose
#          four compiles outrun one call splits them over two); resumes from $LOG_DIR/tuned (tuned_b<N> with a
#          batch); and each model's tuned tasks, default config against the best found: tuning_<model>.log), ab
#          (AB_COMMAND run on this tree, then again with AB_PATCH applied and the package reinstalled: a branch
#          against main in one call; AB_TIMEOUT each).
#          Default: core bench.
#   TEST_TIMEOUT=360 MODELS_TIMEOUT=480 BENCH_TIMEOUT=120 REPORT_MODELS=resnet18,...
#
# pytest-xdist spreads the tests over the cores where installed; wheels under .whl/ (see the device
# tool's notes) are installed first, so it can be carried to a machine without a network.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LOG_DIR=$(realpath -m "${1:-${OUT:-gpu-logs}}")
shift || true
STAGES=${*:-core bench}
mkdir -p "$LOG_DIR"
export PYTHONUNBUFFERED=1
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$LOG_DIR/gpu.txt"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
t0=$(date +%s)
echo "== install"
python3 -m pip install --no-build-isolation --no-deps -q . > "$LOG_DIR/install.log" 2>&1 \
  || { tail -50 "$LOG_DIR/install.log"; exit 1; }
echo "installed in $(( $(date +%s) - t0 )) s"
echo "== quick start"
(cd /tmp && python3 -m hidet && python3 "$ROOT/examples/quickstart.py") 2>&1 | tee "$LOG_DIR/quickstart.log" | tail -20

PARALLEL=$(python3 -c 'import xdist' 2>/dev/null && echo "-n $(nproc) -p no:benchmark" || true)
MODEL_TESTS="tests/frontend/torch/test_gpu.py::test_torchvision tests/frontend/torch/test_gpu.py::test_transformers tests/frontend/onnx/test_gpu_models.py"
deselect=""; for t in $MODEL_TESTS; do deselect="$deselect --deselect $t"; done  # (the core stages: not these)
run_pytest() {  # name timeout args...
  local name=$1 limit=$2; shift 2
  local t=$(date +%s)
  (timeout -s INT -k 30 "$limit" python3 -m pytest "$@" -v --durations=15 -rfEs -p no:cacheprovider $PARALLEL \
     --junitxml="$LOG_DIR/$name.xml") > "$LOG_DIR/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc in $(( $(date +%s) - t )) s"; grep -E "passed|failed|^FAILED|^ERROR|^[0-9.]+s call" "$LOG_DIR/$name.log" | tail -40
  [ $rc -eq 0 ] || status=1
}

for stage in $STAGES; do
  case $stage in
    core)
      echo "== cuda tests (all but the model suites)"
      run_pytest pytest_core "${TEST_TIMEOUT:-360}" "$ROOT/tests" -m cuda $deselect ;;
    core-ops|core-rest)
      # the core stage in two halves, for two calls (all of it took ~9 minutes on 16 cores of an H100 machine):
      # the op tests and PyTorch's OpInfo samples, then everything else
      ops="$ROOT/tests/graph/ops $ROOT/tests/frontend/torch/test_opinfo.py"
      if [ "$stage" = core-ops ]; then
        echo "== cuda tests: ops and OpInfo"
        run_pytest pytest_core_ops "${TEST_TIMEOUT:-360}" $ops -m cuda
      else
        echo "== cuda tests: all but ops, OpInfo and the model suites"
        run_pytest pytest_core_rest "${TEST_TIMEOUT:-360}" "$ROOT/tests" -m cuda $deselect \
          $(for d in $ops; do echo "--ignore=$d"; done)
      fi ;;
    models)
      echo "== model suites"
      run_pytest pytest_models "${MODELS_TIMEOUT:-480}" $(for t in $MODEL_TESTS; do echo "$ROOT/$t"; done) ;;
    select)
      echo "== cuda tests under: $SELECT"
      run_pytest pytest_select "${TEST_TIMEOUT:-360}" $(for t in $SELECT; do echo "$ROOT/$t"; done) -m cuda ;;
    bench)
      echo "== benchmarks"
      (cd /tmp && timeout 40 python3 "$ROOT/scripts/bench_build.py") 2>&1 | tee "$LOG_DIR/bench_build.log"
      (cd /tmp && timeout "${BENCH_TIMEOUT:-120}" python3 "$ROOT/scripts/bench_matmul.py" \
         4096x4096x4096 1x4096x4096 128x4096x4096 --space 0) 2>&1 | tr "\r" "\n" | grep -v "it/s\]" | tee "$LOG_DIR/bench_matmul.log"
      (cd /tmp && timeout 45 python3 "$ROOT/scripts/bench_ops.py") 2>&1 | tee "$LOG_DIR/bench_ops.log" | tail -30 ;;
    conv)
      echo "== conv2d: resnet50's 3x3 layers, batch 32, float16, channels-last"
      for shape in "64 56 56 64" "128 28 28 128" "256 14 14 256" "512 7 7 512"; do
        set -- $shape
        (cd /tmp && timeout 120 python3 -m hidet bench conv2d 32 $1 $2 $3 $4 3 3 --padding 1 --channels-last \
           --backends hidet,eager --space "${CONV_SPACE:-0}" --repeat 30) 2>&1 | tr "\r" "\n" | grep -v "it/s\]" | tee -a "$LOG_DIR/bench_conv.log" | tail -4
      done ;;
    tma)
      echo "== TMA: im2col copies, convolution and warp-specialized configs"
      run_pytest pytest_tma "${TEST_TIMEOUT:-360}" \
        "$ROOT/tests/lang/test_script_cuda.py::test_tma_im2col_copies_windows" \
        "$ROOT/tests/graph/ops/test_matmul_template_gpu.py::test_im2col_tma_convolution_configs" \
        "$ROOT/tests/graph/ops/test_matmul_template_gpu.py::test_every_tile_shape_with_computed_and_transposed_operands" \
        "$ROOT/tests/graph/ops/test_matmul_template_gpu.py::test_tuning_runs_candidates_compiled_together"
      (cd /tmp && timeout "${BENCH_TIMEOUT:-300}" python3 "$ROOT/scripts/bench_matmul.py" conv:32x64x56x56x64x3x3p1 \
         conv:32x128x28x28x128x3x3p1 conv:32x256x14x14x256x3x3p1 conv:32x512x7x7x512x3x3p1 4096x4096x4096 \
         128x4096x4096 1x4096x4096 --space 0 2 ${TMA_BENCH_ARGS:-}) 2>&1 | tr "\r" "\n" | grep -v "it/s\]" | tee "$LOG_DIR/bench_tma.log" | tail -150 ;;
    autotune)
      echo "== resnet50 fp16 batch 1 through torch.compile max-autotune: cold (a fresh cache), then warm"
      rm -rf /tmp/autotune-cache
      for run in cold warm; do
        (cd /tmp && HIDET_CACHE_DIR=/tmp/autotune-cache timeout "${AUTOTUNE_TIMEOUT:-420}" python3 -m hidet bench model \
           resnet50 --batch 1 --dtype f16 --backends hidet --mode max-autotune) 2>&1 | tr "\r" "\n" | grep -v "it/s\]" \
           | tee "$LOG_DIR/autotune_$run.log" | grep -E "hidet:|resnet50|hidet |inductor" | tail -8
      done ;;
    report)
      echo "== report"
      (cd /tmp && timeout 120 python3 "$ROOT/scripts/bench_serving.py" --model resnet18 --dtype f16 --device cuda) 2>&1 \
        | grep -v "it/s\]" | grep -v "^  output" | tee "$LOG_DIR/bench_serving.log" | tail -8
      (cd /tmp && timeout 150 python3 "$ROOT/scripts/bench_onnx.py") 2>&1 | tr "\r" "\n" | grep -v "it/s\]" \
        | tee "$LOG_DIR/bench_onnx.log" | tail -8
      (cd /tmp && python3 -m hidet bench suite --timeout 240 --out "$LOG_DIR/suite" \
         ${REPORT_MODELS:+--models $REPORT_MODELS}) 2>&1 | tee "$LOG_DIR/bench_suite.log" ;;
    suite)
      echo "== model suite: hidet against inductor reduce-overhead and eager, cold compiles"
      (cd /tmp && python3 -m hidet bench suite --cold --backends hidet,inductor-ro,eager --repeat 50 \
         --timeout "${SUITE_TIMEOUT:-300}" --out "$LOG_DIR/suite" ${REPORT_MODELS:+--models $REPORT_MODELS}) 2>&1 \
         | tee "$LOG_DIR/bench_suite.log" | tail -16 ;;
    resnet50)
      echo "== resnet50 at batch 32: its convolutions against cuDNN, then the model"
      (cd /tmp && timeout "${BENCH_TIMEOUT:-240}" python3 "$ROOT/scripts/bench_matmul.py" --resnet50 32 --epilogue) 2>&1 \
         | tr "\r" "\n" | grep -v "it/s\]" | tee "$LOG_DIR/bench_resnet50_layers.log" | tail -70
      (cd /tmp && timeout "${MODELS_TIMEOUT:-300}" python3 -m hidet bench model resnet50 --batch 32 \
         --backends hidet,inductor-ro --repeat 50 --profile 15) 2>&1 | grep -v "it/s\]" \
         | tee "$LOG_DIR/bench_resnet50_b32.log" | tail -40 ;;
    tuned)
      echo "== max-autotune against inductor's, one model at a time"
      for model in ${TUNED_MODELS:-resnet50 gpt2 bert vit_b_16}; do
        since=$(date '+%Y-%m-%d %H:%M:%S')
        # hidet default and tuned (hidet-ma) against inductor's reduce-overhead and max-autotune, in one run
        backends=${TUNED_BACKENDS:-hidet,hidet-ma,inductor-ro,inductor-ma}
        (cd /tmp && python3 -m hidet bench suite --backends "$backends" --repeat 50 \
           --timeout "${TUNED_TIMEOUT:-540}" --models "$model" --batch "${TUNED_BATCH:-1}" \
           --out "$LOG_DIR/tuned${TUNED_BATCH:+_b$TUNED_BATCH}") 2>&1 \
           | tee -a "$LOG_DIR/bench_tuned.log" | tail -14
        # each tuned task's default config (level 0) against the best candidate tuning found
        log="$LOG_DIR/tuning_$model${TUNED_BATCH:+_b$TUNED_BATCH}.log"
        (cd /tmp && python3 -m hidet cache tuning --level 2 --since "$since") > "$log" 2>&1
        tail -1 "$log"
      done ;;
    ab)
      # the same command before and after a patch (a branch's diff: git diff main BRANCH > change.patch), in one
      # call, on one machine: timings compare only there
      [ -f "${AB_PATCH:-}" ] && [ -n "${AB_COMMAND:-}" ] || { echo "ab: set AB_PATCH (a file) and AB_COMMAND"; exit 2; }
      echo "== A (this tree): $AB_COMMAND"
      (cd /tmp && timeout "${AB_TIMEOUT:-240}" bash -c "$AB_COMMAND") 2>&1 | grep -v "it/s\]" | tee "$LOG_DIR/ab_a.log" | tail -30
      apply() { if command -v patch > /dev/null; then patch -p1 "$@"; else git apply "$@"; fi; }
      apply < "$AB_PATCH" > "$LOG_DIR/ab_patch.log" 2>&1 || { cat "$LOG_DIR/ab_patch.log"; exit 1; }
      python3 -m pip install --no-build-isolation --no-deps -q . >> "$LOG_DIR/install.log" 2>&1 || exit 1
      echo "== B (patched with $AB_PATCH): $AB_COMMAND"
      (cd /tmp && timeout "${AB_TIMEOUT:-240}" bash -c "$AB_COMMAND") 2>&1 | grep -v "it/s\]" | tee "$LOG_DIR/ab_b.log" | tail -30
      apply -R < "$AB_PATCH" > /dev/null 2>&1 ;;
    *) echo "unknown stage $stage"; status=1 ;;
  esac
done
exit "$status"
