#!/usr/bin/env bash
# What a lent GPU runs (device tool): `bash benchmarks/gpu_run.sh STAGE...` with stages
#   train-tests  the GPU tests of the batched trainer and the attention fast path
#   report       benchmarks/gpu_report.py (ceilings, Lemma 11, RNN states, Figure 1 x5 seeds)
#   tests        every GPU-marked test
#   verify       qstr verify --profile gpu --device cuda (JSON record kept)
# Logs and results go under $OUT (the device tool brings them back) or ./gpu-out.
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv,noheader
for stage in "$@"; do
  echo "== $stage $(date +%T)"
  case $stage in
    train-tests) timeout 70 python3 -m pytest -q -m gpu -p no:cacheprovider tests/verify/training/test_stack.py tests/constructions/test_attention.py tests/constructions/test_codes.py 2>&1 | tail -25 ;;
    report) timeout 300 python3 benchmarks/gpu_report.py --out "$OUT/report" ${FIGURE1_MATMUL:+--figure1-matmul $FIGURE1_MATMUL} ${PROFILE_RNN:+--profile-rnn} 2>&1 | tee "$OUT/report.log" | grep -v "^\s*$" | tail -30 ;;
    tests) timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tail -25 ;;
    verify) timeout ${VERIFY_LIMIT:-400} qstr verify --profile gpu --device cuda --json "$OUT/verify-gpu.json" > "$OUT/verify.log" 2>&1; echo "rc $?"; tail -c 3000 "$OUT/verify.log" ;;
  esac
done
# bring back at most 8 files: fold the Figure 1 rows into one file per matmul mode
for d in "$OUT"/report/figure1-*; do [ -d "$d" ] && cp "$d/figure1.jsonl" "$OUT/$(basename "$d").jsonl" && cp "$d"/figure1-paper.png "$OUT/$(basename "$d").png"; done
[ -f "$OUT/report/report.json" ] && cp "$OUT/report/report.json" "$OUT/report.json"
rm -rf "$OUT/report"
