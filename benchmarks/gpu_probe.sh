#!/usr/bin/env bash
# First look on a lent GPU: environment, GPU tests, the gpu verify profile, the benchmarks, and
# one seed of Figure 1 at the paper's sizes. Logs under $OUT (device tool) or ./gpu-out.
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 -c "import torch,sys;print(sys.version.split()[0],'torch',torch.__version__,torch.cuda.get_device_name())"
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
which qstr
echo "== pytest -m gpu"; timeout 120 python3 -m pytest -q -m gpu -x -p no:cacheprovider tests 2>&1 | tail -15
echo "== verify gpu"; timeout 200 qstr verify --profile gpu --device cuda --json "$OUT/verify-gpu.json" 2>&1 | tail -45
echo "== attention"; timeout 60 python3 benchmarks/attention_throughput.py --device cuda --N 4096 16384 65536 2>&1 | tail -8
echo "== rnn scan"; timeout 60 python3 benchmarks/rnn_scan.py 2>&1 | tail -15
echo "== figure1 1 seed"; timeout 170 python3 benchmarks/figure1_timing.py --device cuda --seeds 1 --out "$OUT/fig1" 2>&1 | tail -15
} 2>&1 | tee "$OUT/probe.log"
cp "$OUT"/fig1/figure1.jsonl "$OUT"/fig1-rows.jsonl 2>/dev/null; rm -rf "$OUT/fig1"
