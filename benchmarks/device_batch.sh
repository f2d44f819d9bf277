#!/usr/bin/env bash
# One GPU session's measurements, in the order that matters most, each capped so later ones still run.
#   bash benchmarks/device_batch.sh A|B   (results land in $OUT)
# A: evaluator on the GPU (issue 4), anti-cheat fixtures on the GPU (issue 5); meanwhile the solutions'
#    CUDA builds and torch.compile warm-ups fill their caches in a detached process (8 of the 16 cores).
# B: the solutions table (issue 10) from warm caches, then verify --preset full on the whole suite.
set -u
source benchmarks/device_setup.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m kbench env --format json > "$OUT/env.json"
case "${1:-A}" in
A)
  setsid nohup python3 benchmarks/solutions.py --out /tmp/solutions --warm-only --jobs 8 \
    > /tmp/solutions-warm.log 2>&1 < /dev/null &
  timeout 230 python3 benchmarks/evaluator_gpu.py --out "$OUT/evaluator_gpu" 2>&1 | tail -40
  # one line per fixture as it finishes, so a timeout keeps what was done
  timeout 330 python3 - "$OUT/selftest_gpu.jsonl" <<'PY' 2> "$OUT/selftest_gpu.log"
import json, sys
from kbench.selftest import discover, run_fixture
fixtures = discover(backends=["cuda", "triton"], gpu=True)
ok = 0
with open(sys.argv[1], "w") as fh:
    for f in fixtures:
        o = run_fixture(f, True, None)
        ok += o.passed
        row = {"fixture": f.id, "expected": f.expected, "got": o.got, "passed": o.passed,
               "seconds": round(o.seconds, 1), "message": o.message[:300]}
        fh.write(json.dumps(row) + "\n"); fh.flush()
        print(("pass " if o.passed else "FAIL ") + f"{f.id}: expected {f.expected}, got {o.got} ({o.seconds:.0f} s)", flush=True)
print(f"selftest gpu: {ok}/{len(fixtures)} fixtures got their expected verdict")
PY
  tail -3 /tmp/solutions-warm.log
  ;;
B)
  timeout 420 python3 benchmarks/solutions.py --out "$OUT/solutions" --jobs 16 2>&1 | tail -25
  cp -r "$OUT"/solutions/logs /dev/null 2>&1; rm -rf "$OUT/solutions/logs"
  timeout 150 python3 benchmarks/verify_full.py > "$OUT/verify_full.log" 2>&1; tail -3 "$OUT/verify_full.log"
  cp benchmarks/results/verify_full.md "$OUT/" 2>/dev/null
  ;;
esac
ls -R "$OUT" | head -40
