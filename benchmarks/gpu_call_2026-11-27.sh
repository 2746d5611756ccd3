python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export PYTHONUNBUFFERED=1
timeout 140 qstr verify --profile gpu --device cuda --only lemma-11 prop-8 thm-9 thm-7 --json $OUT/verify-rest.json > $OUT/verify-rest.log 2>&1; echo "verify rc $?"; grep -v "^│\|^┃\|^┏\|^┡\|^└\|^├\|^┗" $OUT/verify-rest.log | tail -8; grep "^│ [a-z]" $OUT/verify-rest.log | cut -c1-40,100-250
timeout 45 python3 benchmarks/stack_step.py --json $OUT/stack_step.json 2>&1 | tail -4
timeout 65 python3 benchmarks/gpu_report.py --out $OUT/kernels --skip-figure1 --skip-gru > $OUT/kernels.log 2>&1; echo "kernels rc $?"; grep -v "^\s*$" $OUT/kernels.log | tail -14
