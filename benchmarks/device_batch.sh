#!/usr/bin/env bash
# One GPU session's measurements in three calls, each under the 10-minute cap; results land in $OUT.
#   bash benchmarks/device_batch.sh A|B|C
# A: verify --preset full (issue 3) while 8 candidates are built the plain load_inline way (their build
#    cost), then the throughput batch (issue 9: 108 distinct CUDA candidates, cold), then the evaluator
#    steps (issue 4). The throughput batch fills /tmp/kb-cache with the 36 CUDA solutions' builds.
# B: (same machine, warm) GPU fixtures + every solution as an honest control (issues 5, 10), the prompt
#    examples' GPU test (issue 6), timing fidelity (issue 11).
# C: (2-GPU machine) the main job on both GPUs (issue 9).
set -u
source benchmarks/device_setup.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
CACHE=/tmp/kb-cache
python3 -m kbench env --format json > "$OUT/env.json"
case "${1:-A}" in
A)
  timeout 120 python3 benchmarks/verify_full.py > "$OUT/verify_full.log" 2>&1 &
  VERIFY=$!
  timeout 120 python3 benchmarks/throughput.py --out "$OUT/throughput" --variants 1 --limit 8 \
    --standard-sample 8 --standard-only > /tmp/plain.log 2>&1
  wait $VERIFY; cp benchmarks/results/verify_full.md "$OUT/" 2>/dev/null
  timeout 400 python3 benchmarks/throughput.py --out "$OUT/throughput" --cache-dir $CACHE --max-seconds 250 \
    --warm 24 2>&1 | tail -30
  grep -o '"seconds": [0-9.]*' "$OUT/throughput/plain_builds.json" | tr '\n' ' '; echo "(plain builds)"
  timeout 100 python3 benchmarks/evaluator_gpu.py --out "$OUT/evaluator_gpu" 2>&1 | tail -12
  ;;
B)
  timeout 400 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" --solutions cuda --cache-dir $CACHE \
    --max-seconds 360 2>&1 | grep -v "^pass " | tail -25
  timeout 150 python3 benchmarks/evaluator_gpu.py --out "$OUT/evaluator_gpu" 2>&1 | tail -12
  ;;
C)
  KBENCH_BASELINES=eager timeout 400 python3 -m kbench run --solutions reference --backend triton --device cuda \
    --store /tmp/c.db 2>&1 | tail -25
  python3 - <<'PY' > "$OUT/two_gpus.txt"
import sqlite3, collections
rows = sqlite3.connect("/tmp/c.db").execute("select verdict from verdicts").fetchall()
import json; devs = collections.Counter(json.loads(r[0]).get("device") for r in rows)
print("verdicts per device:", dict(devs))
PY
  cat "$OUT/two_gpus.txt"
  ;;
esac
ls -R "$OUT" | head -40
