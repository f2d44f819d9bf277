#!/usr/bin/env bash
# One GPU session's measurements in a few calls, each under the 10-minute cap; results land in $OUT.
#   bash benchmarks/device_batch.sh 1|2|3
# Made for a 2-GPU host (32 cores): work that times things gets a GPU and cores of its own (taskset), so
# the GPUs run two streams at once. With one GPU, GPU1 falls back to GPU0 and the streams share it.
# 1: GPU0: verify --preset full (issue 3), then the evaluator steps (issue 4); GPU1: inspect --all
#    --level 2 in shards (issue 8); other cores: prebuild the CUDA solutions into $CACHE.
# 2: GPU0: GPU fixtures + every solution as an honest control (issues 5, 10); GPU1: timing fidelity
#    (issue 11), both reusing $CACHE's builds.
# 3: (fresh machine) verify and inspect again after fixes, then the remaining solutions on both GPUs.
# 4: leftovers of 3. 5: throughput (issue 9). 6: timing fidelity alone on a GPU (issue 11). 7: the solutions
#    not yet run as controls (issues 5, 10). 8-10: the fourth set (results/device-2026-11-30d).
# 11, then 12 at once (same machine, builds reused): every fixture and solution through the evaluator on
#    two GPUs; then timing fidelity alone on GPU0 beside the throughput batch on GPU1.
# 13: the controls 11 did not reach, beside timing fidelity (results/device-2026-11-30e).
# 14, 15, then 16 at once: timing fidelity over 30 problems on both GPUs; the throughput batch beside
#    the fixtures and the remaining controls; the controls still left (SKIP= selftest_gpu.jsonl files).
# 17: the throughput batch again after the lane changes, beside fidelity for the problems 14 missed.
# 18: the throughput batch after the output-handling changes, beside the upstream flow on the same files.
# 19: the GPU test of the streamed writer, output_handling.py, then the fixtures and controls again.
# 20: timing fidelity again (step 14 as it was), now that timed calls are sampled over the whole loop.
set -u
source benchmarks/device_setup.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CACHE=/tmp/kb-cache
NGPU=$(nvidia-smi -L | wc -l)
G1=$(( NGPU > 1 ? 1 : 0 ))
NCPU=$(nproc)
python3 -m kbench env --format json > "$OUT/env.json"
nvidia-smi -L > "$OUT/gpus.txt"
case "${1:-1}" in
1)
  CUDA_VISIBLE_DEVICES=$G1 OMP_NUM_THREADS=2 TORCHINDUCTOR_COMPILE_THREADS=2 taskset -c $((NCPU-12))-$((NCPU-1)) \
    timeout 560 python3 benchmarks/inspect_gpu.py --out "$OUT/inspect" --shards 4 > "$OUT/inspect.log" 2>&1 &
  INSPECT=$!
  taskset -c 0-$((NCPU-15)) timeout 400 python3 benchmarks/timing_fidelity.py --out /tmp/prebuild \
    --cache-dir $CACHE --build-only --problems 36 --jobs $(( (NCPU-14) / 2 )) > "$OUT/prebuild.log" 2>&1 &
  BUILD=$!
  CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=2 taskset -c $((NCPU-14)),$((NCPU-13)) \
    timeout 330 python3 benchmarks/verify_full.py "$OUT/verify_full.md" > "$OUT/verify_full.log" 2>&1
  echo "verify exit $?"; tail -3 "$OUT/verify_full.log"
  CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=2 taskset -c $((NCPU-14)),$((NCPU-13)) \
    timeout 200 python3 benchmarks/evaluator_gpu.py --out "$OUT/evaluator_gpu" 2>&1 | tail -8
  wait $BUILD; echo "prebuild exit $?"; tail -3 "$OUT/prebuild.log"
  wait $INSPECT; echo "inspect exit $?"; tail -12 "$OUT/inspect.log"
  ;;
2)
  CUDA_VISIBLE_DEVICES=$G1 taskset -c $((NCPU-10))-$((NCPU-1)) timeout 575 python3 benchmarks/timing_fidelity.py \
    --out "$OUT/fidelity" --cache-dir $CACHE --problems 30 --jobs 4 --ncu --max-seconds 540 \
    > "$OUT/fidelity.log" 2>&1 &
  FID=$!
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-$((NCPU-11)) timeout 560 python3 benchmarks/selftest_gpu.py \
    --out "$OUT/selftest" --solutions cuda,triton --cache-dir $CACHE --max-seconds 520 2>&1 \
    | grep -v "^pass " | tail -25
  wait $FID; echo "fidelity exit $?"; tail -15 "$OUT/fidelity.log"
  ;;
3)
  # a fresh machine: warm the CUDA solution builds on 18 cores while GPU1 re-verifies the suite (the 30
  # resized or fixed problems among them) and GPU0 re-runs inspect; then the solutions not yet run as
  # controls go through the local executor on both GPUs
  taskset -c 0-17 timeout 300 python3 benchmarks/timing_fidelity.py --out /tmp/prebuild --cache-dir $CACHE \
    --build-only --problems 36 --jobs 9 > "$OUT/prebuild.log" 2>&1 &
  BUILD=$!
  CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=2 TORCHINDUCTOR_COMPILE_THREADS=2 taskset -c 20-31 \
    timeout 220 python3 benchmarks/inspect_gpu.py --out "$OUT/inspect" --shards 4 > "$OUT/inspect.log" 2>&1 &
  INSPECT=$!
  CUDA_VISIBLE_DEVICES=$G1 OMP_NUM_THREADS=2 taskset -c 18,19 \
    timeout 220 python3 benchmarks/verify_full.py "$OUT/verify_full.md" > "$OUT/verify_full.log" 2>&1
  echo "verify exit $?"; tail -2 "$OUT/verify_full.log"
  wait $INSPECT; echo "inspect exit $?"; tail -4 "$OUT/inspect.log"
  wait $BUILD; echo "prebuild exit $?"; tail -2 "$OUT/prebuild.log"
  timeout 300 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" --solutions cuda,triton --cache-dir $CACHE \
    --max-seconds 280 --slots 5 --skip-passed benchmarks/results/device-2026-11-30c/selftest_gpu.jsonl 2>&1 \
    | grep -v "^pass " | tail -20
  ;;
4)
  # leftovers of 3: the two problems resized after it, and the solutions not yet run as controls
  CUDA_VISIBLE_DEVICES=$G1 OMP_NUM_THREADS=2 timeout 60 python3 benchmarks/verify_full.py "$OUT/verify_resized.md" \
    1/49 2/41 2>&1 | tail -3
  timeout 250 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" --solutions cuda,triton --cache-dir $CACHE \
    --max-seconds 225 --slots 3 --skip-passed benchmarks/results/device-2026-11-30c/selftest_gpu.jsonl 2>&1 \
    | grep -v "^pass " | tail -12
  ;;
5)
  # (one H200, nothing else running) the throughput batch (issue 9), cold caches: 108 distinct CUDA
  # candidates through the pool, the warm starter and GPU-made inputs
  timeout 580 python3 benchmarks/throughput.py --out "$OUT/throughput" --max-seconds 480 --warm 24 2>&1 | tail -25
  ;;
6)
  # (one H200, nothing else running) timing fidelity (issue 11) over 30 problems, then the solutions not
  # yet run as controls (issues 5, 10) with whatever time is left in a second call of this step
  CUDA_VISIBLE_DEVICES=0 timeout 585 python3 benchmarks/timing_fidelity.py --out "$OUT/fidelity" \
    --cache-dir $CACHE --problems 30 --ncu --max-seconds 560 > "$OUT/fidelity.log" 2>&1
  echo "fidelity exit $?"; tail -15 "$OUT/fidelity.log"
  ;;
7)
  timeout 580 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" --solutions cuda,triton --cache-dir $CACHE \
    --max-seconds 540 --slots 3 --skip-passed benchmarks/results/device-2026-11-30c/selftest_gpu.jsonl 2>&1 \
    | grep -v "^pass " | tail -12
  ;;
8)
  # (2-GPU host) GPU tests of the launch spin, NVML clocks and the warm starter; then GPU0 + cores 0-15:
  # the throughput batch, cold (issue 9); GPU1 + cores 16-31: timing fidelity over 30 problems (issue 11)
  CUDA_VISIBLE_DEVICES=0 timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_timing.py \
    tests/sandbox/test_sandbox_host.py > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests exit $?"; tail -4 "$OUT/gpu_tests.log"
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 540 python3 benchmarks/throughput.py --out "$OUT/throughput" \
    --max-seconds 450 --warm 24 > "$OUT/throughput.log" 2>&1 &
  TP=$!
  CUDA_VISIBLE_DEVICES=$G1 taskset -c 16-$((NCPU-1)) timeout 540 python3 benchmarks/timing_fidelity.py \
    --out "$OUT/fidelity" --cache-dir $CACHE --problems 30 --jobs 8 --ncu --max-seconds 510 > "$OUT/fidelity.log" 2>&1
  echo "fidelity exit $?"; tail -14 "$OUT/fidelity.log"
  wait $TP; echo "throughput exit $?"; tail -22 "$OUT/throughput.log"
  ;;
9)
  # (one H200, nothing else running) GPU tests of the launch spin, NVML clocks and the warm starter, then
  # timing fidelity over 30 problems (issue 11)
  timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_timing.py \
    tests/sandbox/test_sandbox_host.py > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests exit $?"; tail -4 "$OUT/gpu_tests.log"
  timeout 470 python3 benchmarks/timing_fidelity.py --out "$OUT/fidelity" --cache-dir $CACHE --problems 30 \
    --ncu --max-seconds 450 > "$OUT/fidelity.log" 2>&1
  echo "fidelity exit $?"; tail -14 "$OUT/fidelity.log"
  ;;
10)
  # (2-GPU host) GPU1 + cores 16-31: the solutions table (issue 10). GPU0 + cores 0-15: GPU tests, the CUDA
  # solutions prebuilt, then side by side (their GPU phases take turns on the lease): the GPU selftest,
  # fixtures and the solutions not yet run as controls with this code (issues 5, 10; ${SKIP:-} lists the
  # rest), and timing fidelity over 30 problems (issue 11)
  CUDA_VISIBLE_DEVICES=$G1 taskset -c 16-$((NCPU-1)) timeout 560 python3 benchmarks/solutions.py \
    --out "$OUT/solutions" --jobs 16 > "$OUT/solutions.log" 2>&1 &
  SOL=$!
  CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_timing.py \
    tests/sandbox/test_sandbox_host.py > "$OUT/gpu_tests.log" 2>&1 &
  TESTS=$!
  taskset -c 0-15 timeout 140 python3 benchmarks/timing_fidelity.py --out /tmp/prebuild --cache-dir $CACHE \
    --build-only --problems 36 --jobs 16 > "$OUT/prebuild.log" 2>&1
  echo "prebuild exit $?"; tail -1 "$OUT/prebuild.log"
  wait $TESTS; echo "gpu tests exit $?"; tail -3 "$OUT/gpu_tests.log"
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 390 python3 benchmarks/timing_fidelity.py --out "$OUT/fidelity" \
    --cache-dir $CACHE --problems 30 --ncu --max-seconds 370 > "$OUT/fidelity.log" 2>&1 &
  FID=$!
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 380 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" \
    --solutions cuda,triton --cache-dir $CACHE --max-seconds 360 --slots 3 ${SKIP:+--skip-passed $SKIP} \
    > "$OUT/selftest.log" 2>&1
  echo "selftest exit $?"; grep -v "^pass " "$OUT/selftest.log" | tail -12
  wait $FID; echo "fidelity exit $?"; grep -A4 "^| timing" "$OUT/fidelity/timing_fidelity.md"
  wait $SOL; echo "solutions exit $?"; tail -6 "$OUT/solutions.log"
  ;;
11)
  # (2-GPU host, first call of a session) the GPU selftest with every solution as a control (issues 5, 10),
  # on both GPUs through the local executor, all 32 cores building
  timeout 570 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" --solutions cuda,triton \
    --cache-dir $CACHE --max-seconds 540 --slots 3 > "$OUT/selftest.log" 2>&1
  echo "selftest exit $?"; grep -v "^pass " "$OUT/selftest.log" | tail -15
  ;;
12)
  # (2-GPU host, right after 11: its builds are in $CACHE) GPU0 + cores 0-15: timing fidelity over 30
  # problems, alone on its GPU (issue 11); GPU1 + cores 16-31: the throughput batch, cold (issue 9)
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 570 python3 benchmarks/timing_fidelity.py --out "$OUT/fidelity" \
    --cache-dir $CACHE --problems 30 --first 23,24,25,26,27,28 --ncu --max-seconds 550 > "$OUT/fidelity.log" 2>&1 &
  FID=$!
  CUDA_VISIBLE_DEVICES=$G1 taskset -c 16-$((NCPU-1)) timeout 570 python3 benchmarks/throughput.py \
    --out "$OUT/throughput" --max-seconds 480 --warm 24 > "$OUT/throughput.log" 2>&1
  echo "throughput exit $?"; tail -22 "$OUT/throughput.log"
  wait $FID; echo "fidelity exit $?"; grep -A4 "^| timing" "$OUT/fidelity/timing_fidelity.md"
  ;;
13)
  # (2-GPU host, fresh) GPU0 + cores 0-15: the solutions not yet through the evaluator as controls with
  # this code, and the fixtures that exercise sampled outputs again (issues 5, 10); GPU1 + cores 16-31:
  # timing fidelity, single-kernel solutions first (issue 11). Disk and memory facts for the next plan.
  { df -h /tmp /dev/shm; free -g; } > "$OUT/disk.txt" 2>&1
  CUDA_VISIBLE_DEVICES=$G1 taskset -c 16-$((NCPU-1)) timeout 500 python3 benchmarks/timing_fidelity.py \
    --out "$OUT/fidelity" --cache-dir $CACHE --problems 30 --first 23,24,25,26,27,28 --ncu --max-seconds 480 \
    > "$OUT/fidelity.log" 2>&1 &
  FID=$!
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 500 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" \
    --solutions cuda,triton --cache-dir $CACHE --max-seconds 440 --slots 3 \
    --skip-passed benchmarks/results/device-2026-11-30e/selftest_gpu_call1.jsonl --rerun memo_pointer,side_stream \
    > "$OUT/selftest.log" 2>&1
  echo "selftest exit $?"; grep -v "^pass " "$OUT/selftest.log" | tail -12
  wait $FID; echo "fidelity exit $?"; grep -A4 "^| timing" "$OUT/fidelity/timing_fidelity.md"
  ;;
14|20)
  # (20: the same after 19, with the reservoir's keeps between timed calls)
  # (2-GPU host, fresh; first call of a session) timing fidelity over 30 problems (issue 11), 15 per GPU
  # with 16 cores each, single-kernel solutions first; then one report over both halves
  { df -h /tmp /dev/shm; free -g; } > "$OUT/disk.txt" 2>&1
  for half in 0 1; do
    CUDA_VISIBLE_DEVICES=$(( half ? G1 : 0 )) taskset -c $(( half * 16 ))-$(( half * 16 + 15 )) timeout 560 \
      python3 benchmarks/timing_fidelity.py --out "$OUT/fidelity_$half" --cache-dir $CACHE --problems 15 \
      --skip $(( half * 15 )) --first 23,24,25,26,27,28 --ncu --ncu-count 2 --max-seconds 540 \
      > "$OUT/fidelity_$half.log" 2>&1 &
  done
  wait
  mkdir -p "$OUT/fidelity" && cat "$OUT"/fidelity_[01]/timing_fidelity.jsonl > "$OUT/fidelity/timing_fidelity.jsonl"
  cp "$OUT/fidelity_0/timing_fidelity_summary.json" "$OUT/fidelity/"
  python3 benchmarks/timing_fidelity.py --out "$OUT/fidelity" --report-only > /dev/null
  tail -3 "$OUT"/fidelity_[01].log; grep -A4 "^| timing" "$OUT/fidelity/timing_fidelity.md"
  ;;
15)
  # (same host, right after 14: the solutions' builds are in $CACHE) GPU0 + cores 0-15: the throughput
  # batch, cold (issue 9: one GPU, 16 CPUs); GPU1 + cores 16-31: every GPU fixture and prompt example
  # again (the tensor files changed), then the solutions not yet through the evaluator as controls
  # (issues 5, 10)
  E=benchmarks/results/device-2026-11-30e
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 570 python3 benchmarks/throughput.py --out "$OUT/throughput" \
    --max-seconds 420 --warm 24 --warm-seconds 90 > "$OUT/throughput.log" 2>&1 &
  TP=$!
  CUDA_VISIBLE_DEVICES=$G1 taskset -c 16-$((NCPU-1)) timeout 560 python3 benchmarks/selftest_gpu.py \
    --out "$OUT/selftest" --solutions cuda,triton --cache-dir $CACHE --max-seconds 520 --slots 3 \
    --skip-passed $E/selftest_gpu_call1.jsonl $E/selftest_gpu_call3.jsonl --fixtures-again \
    > "$OUT/selftest.log" 2>&1
  echo "selftest exit $?"; grep -v "^pass " "$OUT/selftest.log" | tail -12
  wait $TP; echo "throughput exit $?"; tail -22 "$OUT/throughput.log"
  ;;
16)
  # (same host, if device time is left) the controls 15 did not reach, on both GPUs; SKIP= the
  # selftest_gpu.jsonl files of 15 and earlier
  timeout 540 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" --solutions cuda,triton \
    --cache-dir $CACHE --max-seconds 500 --slots 3 --skip-passed $SKIP > "$OUT/selftest.log" 2>&1
  echo "selftest exit $?"; grep -v "^pass " "$OUT/selftest.log" | tail -12
  ;;
17)
  # (2-GPU host; after 14-16) GPU0 + cores 0-15: the throughput batch again, cold (issue 9), with build
  # jobs at lower priority, reference runs that release the GPU before writing, and a reference pool
  # sized to the host; GPU1 + cores 16-31: timing fidelity for the problems 14 did not reach (issue 11)
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 570 python3 benchmarks/throughput.py --out "$OUT/throughput" \
    --max-seconds 420 --warm 24 --warm-seconds 90 > "$OUT/throughput.log" 2>&1 &
  TP=$!
  CUDA_VISIBLE_DEVICES=$G1 taskset -c 16-$((NCPU-1)) timeout 560 python3 benchmarks/timing_fidelity.py \
    --out "$OUT/fidelity_2" --cache-dir $CACHE --problems 6 --skip 28 --first 23,24,25,26,27,28 \
    --max-seconds 500 > "$OUT/fidelity_2.log" 2>&1
  echo "fidelity exit $?"; tail -n 4 "$OUT/fidelity_2.log"
  wait $TP; echo "throughput exit $?"; tail -n 30 "$OUT/throughput.log"
  ;;
18)
  # after sampled outputs above 32 MiB became random elements, large outputs stream through pinned
  # buffers, the comparison reuses its buffers and reference caches are written in the background:
  # GPU0 + cores 0-15: kbench's throughput batch, cold then warm (issue 9); GPU1 + cores 16-31: the
  # upstream flow on the first 24 of the same files (16 builders, then one fresh process per candidate)
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 570 python3 benchmarks/throughput.py --out "$OUT/throughput" \
    --max-seconds 420 --warm 24 --warm-seconds 90 > "$OUT/throughput.log" 2>&1 &
  TP=$!
  CUDA_VISIBLE_DEVICES=$G1 taskset -c 16-$((NCPU-1)) timeout 560 python3 benchmarks/upstream_flow.py \
    --out "$OUT/upstream" --limit 24 --builders 16 > "$OUT/upstream.log" 2>&1
  echo "upstream exit $?"; tail -n 14 "$OUT/upstream.log"
  wait $TP; echo "throughput exit $?"; tail -n 30 "$OUT/throughput.log"
  python3 benchmarks/upstream_flow.py --out "$OUT/upstream" --compare "$OUT/throughput/throughput.json"
  ;;
19)
  # (after 18, same or fresh machine) the streamed writer's GPU test and output_handling.py on GPU0, then
  # every GPU fixture and prompt example and the solutions as controls on both GPUs (issues 5, 10)
  CUDA_VISIBLE_DEVICES=0 timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/sandbox/test_samples.py > "$OUT/pytest_gpu.log" 2>&1
  echo "pytest exit $?"; tail -n 3 "$OUT/pytest_gpu.log"
  CUDA_VISIBLE_DEVICES=0 timeout 60 python3 benchmarks/output_handling.py --gib 1 \
    --out "$OUT/output_handling.md" > "$OUT/output_handling.log" 2>&1; echo "output_handling exit $?"
  timeout 420 python3 benchmarks/selftest_gpu.py --out "$OUT/selftest" --solutions cuda,triton \
    --cache-dir $CACHE --max-seconds 380 --slots 3 > "$OUT/selftest.log" 2>&1
  echo "selftest exit $?"; grep -v "^pass " "$OUT/selftest.log" | tail -12
  ;;
esac
ls -R "$OUT" | head -40
# at most 8 files come back from a call: everything travels as one archive
tar czf /tmp/device_out.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/device_out.tgz "$OUT/"
