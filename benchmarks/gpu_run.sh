#!/usr/bin/env bash
# What a lent GPU runs (device tool), one call: `bash benchmarks/gpu_run.sh [STAGE...]`
# (default: all stages, in this order; each under its own time limit, so the call ends in time):
#   capture      benchmarks/graph_capture.py: which training steps record as CUDA graphs, and why
#   capture-tests  the same for the float64 members of the graph-replay test
#   graph-test   the CUDA-graph replay test alone, with its short traceback
#   figure1      all of Figure 1 alone (gpu_report.py --skip-kernels --skip-gru), default allocator
#                (FIG1_ARGS=--check-breakdown: each test check synchronized and timed apart)
#   figure1-expandable  the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#   gru-variants benchmarks/gru_step.py --variants: the GRU step of each scan variant (the
#                version of 2026-11-27, the current one, groups in blocks), alternated twice
#   train-tests  the GPU tests of the GRU scan and the batched trainer (correctness first)
#   report       benchmarks/gpu_report.py: ceilings, the GRU step (before/after, profile),
#                Lemma 11, RNN states, all of Figure 1 at the paper's sizes (TF32), timed alone
#   steps        benchmarks/stack_step.py --layouts --profile: the FFN step with einsum against
#                stacked_linear layers, both stacks' replayed steps and kernel tables
#   checks       at once: `qstr verify --profile gpu --device cuda` in five shards (balanced by
#                the claims' earlier CUDA times; CLAIMS="ID ...": those claims as one shard),
#                every other GPU-marked test, and (WD=W) all of Figure 1 at weight decay W
#                (TF32); shared wall time, so no timing
#   figure1-jobs all of Figure 1 (TF32) as `qstr reproduce --jobs J` for each J in JOBS (default
#                2: worker processes time-sharing the device), timed; each skipped when under
#                JOBS_NEEDS s are left. Needs Dask: carry its wheels (.whl, DEVELOPERS.md)
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
# the lent machines' Python has no Dask (2026-11-27): the experiments import it at module level,
# so stand in an empty module for the one-process runs here (--jobs 2 needs the real one: carry
# its wheels, /work/.library/device/README.md)
if ! python3 -c "import distributed" 2>/dev/null; then
  for m in distributed dask; do
    mkdir -p "/tmp/qstr-stub/$m" && printf 'def __getattr__(name):\n    return None\n' \
      >"/tmp/qstr-stub/$m/__init__.py"
  done
  export PYTHONPATH="/tmp/qstr-stub${PYTHONPATH:+:$PYTHONPATH}"
  echo "no Dask here: stubbed (one-process runs only; the Dask tests and --jobs 2 cannot run)"
  NO_DASK_TESTS="and not scheduler and not cluster and not dask"
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu,memory.used \
  --format=csv,noheader
python3 -c "import torch,sys;print(sys.version.split()[0],'torch',torch.__version__)"
stages=${*:-capture train-tests report parallel}
# the verify shards of the checks stage (the first four about 85 s each alone on an H100,
# 2026-11-27; the fifth: thm-6, 156 s on an H200, and three claims of a few seconds)
SHARDS=(
  "prop-8 lemma-24 lemma-22 data-model assumption-2 rs-hadamard-codes lemma-38 experiment-models"
  "lemma-42 prop-3 lemma-39 assumption-3 experimental-encoding assumption-1 lemma-15 lemma-13 lemma-20"
  "cor-27 prop-21 figure-2 sparse-average-single-head lemma-41 thm-9 lemma-40 lemma-37 lemma-12 lemma-29"
  "prop-26 prop-28 lemma-11 thm-4 lemma-36 export-roundtrip thm-7 lemma-30"
  "thm-6 lemma-23 lemma-25 lemma-34 lemma-14 lemma-16"
)
[ -n "${CLAIMS:-}" ] && SHARDS=("$CLAIMS")
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
    gru-variants)
      timeout "${LIMIT_GRU:-110}" python3 benchmarks/gru_step.py --variants \
        >"$R/gru-variants.log" 2>&1; echo "rc $?"
      grep -v "^\s*$" "$R/gru-variants.log" | grep -v "^-" | cut -c1-200 | tail -32 ;;
    train-tests)
      timeout "${LIMIT_TESTS:-90}" python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/verify/training/test_gru_scan.py tests/verify/training/test_stack.py \
        tests/verify/training/test_families.py \
        >"$R/train-tests.log" 2>&1; echo "rc $?"; tail -4 "$R/train-tests.log" ;;
    report)
      timeout "${LIMIT_REPORT:-260}" python3 benchmarks/gpu_report.py --out "$R/report" \
        --figure1-matmul tf32 ${REPORT_ARGS:-} >"$R/report.log" 2>&1; echo "rc $?"
      grep -v "^\s*$" "$R/report.log" | grep -v "^-\|^ *Name\|^ *Self" | tail -22 ;;
    steps)
      timeout "${LIMIT_STEPS:-120}" python3 benchmarks/stack_step.py --layouts --profile \
        --json "$R/stack_step.json" >"$R/steps.log" 2>&1; echo "rc $?"
      grep -v "^\s*$" "$R/steps.log" | grep -v "^-" | cut -c1-200 | tail -40 ;;
    checks)
      L=$(( ${DEADLINE:-560} - SECONDS )); [ "$L" -lt 60 ] && L=60; echo "limit $L s"
      i=0
      for ids in "${SHARDS[@]}"; do
        i=$((i + 1))
        timeout -s INT "$L" qstr verify --profile gpu --device cuda --only $ids \
          --json "$R/verify-$i.json" >"$R/verify-$i.log" 2>&1 &
      done
      timeout "$L" python3 -m pytest -q -m gpu -p no:cacheprovider tests \
        -k "not test_gpu_profile_claim_holds_on_cuda ${NO_DASK_TESTS:-}" >"$R/tests.log" 2>&1 &
      if [ -n "${WD:-}" ]; then
        timeout -s INT "$L" qstr reproduce figure1 --device cuda --matmul tf32 \
          --weight-decay "$WD" --out "$R/figure1-wd$WD" >"$R/figure1-wd.log" 2>&1 &
      fi
      wait
      echo "-- tests"; tail -6 "$R/tests.log" | cut -c1-300
      [ -n "${WD:-}" ] && { echo "-- figure1 wd $WD"; tail -25 "$R/figure1-wd.log" | cut -c1-200; }
      for i in $(seq ${#SHARDS[@]}); do echo "-- verify $i"; grep -v "^│\|^┃\|^┏\|^┡\|^└\|^├\|^┗" \
        "$R/verify-$i.log" | tail -4 | cut -c1-300; done
      python3 - "$R" <<'PY'
import glob, json, sys
recs = [r for f in sorted(glob.glob(sys.argv[1] + "/verify-*.json")) for r in json.load(open(f))]
bad = [r["id"] for r in recs if not r.get("holds")]
print(f"verify gpu: {len(recs)} claims ran, {len(recs) - len(bad)} held; not held: {bad}")
PY
      ;;
    figure1-jobs)
      for j in ${JOBS:-2}; do
        left=$(( ${DEADLINE:-560} + 25 - SECONDS ))
        if [ "$left" -lt "${JOBS_NEEDS:-100}" ]; then echo "jobs $j skipped: $left s left"; continue; fi
        s0=$SECONDS
        timeout -s INT "$left" qstr reproduce figure1 --device cuda --matmul tf32 --jobs "$j" \
          --out "$R/figure1-jobs$j" >"$R/figure1-jobs$j.log" 2>&1
        echo "jobs $j: rc $? wall $((SECONDS - s0)) s (with the workers' start)"
        tail -4 "$R/figure1-jobs$j.log" | cut -c1-200
      done ;;
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
  && cp results/report.log results/verify.log results/tests.log results/capture.log \
    results/steps.log results/figure1.log results/gru-variants.log . 2>/dev/null)
rm -rf "$R"
