#!/usr/bin/env bash
# What a lent GPU runs (device tool), one call: `bash benchmarks/gpu_run.sh [STAGE...]`
# (default: all stages, in this order; each under its own time limit, so the call ends in time):
#   capture      benchmarks/graph_capture.py: which training steps record as CUDA graphs, and why
#   capture-tests  the same for the float64 members of the graph-replay test
#   graph-test   the CUDA-graph replay test alone, with its short traceback
#   figure1      all of Figure 1 alone (gpu_report.py --skip-kernels --skip-gru), default allocator
#                (FIG1_ARGS=--check-breakdown: each test check synchronized and timed apart)
#   figure1-expandable  the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#   train-tests  the GPU tests of the GRU scan and the batched trainer (correctness first)
#   report       benchmarks/gpu_report.py: ceilings, the GRU step (before/after, profile),
#                Lemma 11, RNN states, all of Figure 1 at the paper's sizes (TF32), timed alone
#   parallel     at once: Figure 3 at the paper's sizes (TF32; FIGURE3=0 leaves it out), qstr
#                verify --profile gpu, and the other GPU-marked tests (Figure 3's wall time is
#                therefore shared, not a timing)
# Everything lands in $OUT (the device tool brings it back) or ./gpu-out, packed at the end
# into gpu-results.tgz beside the logs. Limits in seconds: LIMIT_TESTS, LIMIT_REPORT, and
# DEADLINE (seconds after the start by which the parallel stage is stopped, default 560).
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
R="$OUT/results"; mkdir -p "$R"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$R/install.log" 2>&1 \
  || tail -5 "$R/install.log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu,memory.used \
  --format=csv,noheader
python3 -c "import torch,sys;print(sys.version.split()[0],'torch',torch.__version__)"
stages=${*:-capture train-tests report parallel}
for stage in $stages; do
  echo "== $stage $(date +%T)"
  case $stage in
    capture)
      timeout "${LIMIT_CAPTURE:-60}" python3 benchmarks/graph_capture.py >"$R/capture.log" 2>&1
      echo "rc $?"; cut -c1-400 "$R/capture.log" | grep -v Warning | tail -14 ;;
    capture-tests)
      timeout "${LIMIT_CAPTURE:-60}" python3 benchmarks/graph_capture.py --tests \
        >"$R/capture-tests.log" 2>&1; echo "rc $?"
      grep -v Warning "$R/capture-tests.log" | tail -16 ;;
    graph-test)
      timeout "${LIMIT_TESTS:-90}" python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
        tests/verify/training/test_stack.py -k cuda_graph_replay >"$R/graph-test.log" 2>&1
      echo "rc $?"; grep -v "^\s*$" "$R/graph-test.log" | tail -30 | cut -c1-300 ;;
    figure1|figure1-expandable)
      conf=""; [ "$stage" = figure1-expandable ] && conf="expandable_segments:True"
      PYTORCH_CUDA_ALLOC_CONF="$conf" timeout "${LIMIT_FIGURE1:-170}" python3 \
        benchmarks/gpu_report.py --out "$R/$stage" --figure1-matmul tf32 --skip-kernels \
        --skip-gru ${FIG1_ARGS:-} >"$R/$stage.log" 2>&1; echo "rc $?"
      grep -v "^\s*$" "$R/$stage.log" | grep -v "^-\|^ *Name\|^ *Self" | tail -45 | cut -c1-240 ;;
    train-tests)
      timeout "${LIMIT_TESTS:-90}" python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/verify/training/test_gru_scan.py tests/verify/training/test_stack.py \
        tests/verify/training/test_families.py \
        >"$R/train-tests.log" 2>&1; echo "rc $?"; tail -4 "$R/train-tests.log" ;;
    report)
      timeout "${LIMIT_REPORT:-260}" python3 benchmarks/gpu_report.py --out "$R/report" \
        --figure1-matmul tf32 ${REPORT_ARGS:-} >"$R/report.log" 2>&1; echo "rc $?"
      grep -v "^\s*$" "$R/report.log" | grep -v "^-\|^ *Name\|^ *Self" | tail -22 ;;
    parallel)
      L=$(( ${DEADLINE:-560} - SECONDS )); [ "$L" -lt 60 ] && L=60; echo "limit $L s"
      [ "${FIGURE3:-1}" != 0 ] && timeout -s INT "$L" qstr reproduce figure3 --device cuda \
        --matmul tf32 --out "$R/figure3" >"$R/figure3.log" 2>&1 &
      timeout -s INT "$L" qstr verify --profile gpu --device cuda --json "$R/verify-gpu.json" \
        >"$R/verify.log" 2>&1 &
      # the per-claim GPU tests run run_claim(profile gpu, cuda) exactly as the verify run does
      # (the training tests ran in their own stage)
      timeout "$L" python3 -m pytest -q -m gpu -p no:cacheprovider tests \
        --ignore=tests/verify/training -k "not test_gpu_profile_claim_holds_on_cuda" \
        >"$R/tests.log" 2>&1 &
      wait
      echo "-- tests"; tail -6 "$R/tests.log"
      if [ "${FIGURE3:-1}" != 0 ]; then
        echo "-- figure3"; grep -i "figure3\|error\|Traceback" "$R/figure3.log" | tail -12
      fi
      echo "-- verify"; tail -c 2500 "$R/verify.log" ;;
  esac
done
echo "== end $(date +%T)"
(cd "$OUT" && tar czf gpu-results.tgz results \
  && cp results/report.log results/verify.log results/tests.log results/capture.log . 2>/dev/null)
rm -rf "$R"
