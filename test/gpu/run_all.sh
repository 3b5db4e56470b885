#!/usr/bin/env bash
# Every GPU acceptance check in one device call, logs under $OUT (7 files):
#   bash test/gpu/run_all.sh [one|two]   (default: two with 2+ visible GPUs, else one)
# source .gpu/env.sh is done here; run from the repo root with carry [".gpu"].
# One-GPU mode (nvidia-h200) runs every suite that needs one device, the multi-rank steps as two
# ranks on device 0, and names the two-GPU steps it skips; two-GPU mode (nvidia-h200-x2) runs all.
# Steps, most important first, each under its own time limit so a hang cannot eat the lease.
set -uo pipefail
OUT=${OUT:-/tmp/lmpool-gpu}
mkdir -p "$OUT"
source .gpu/env.sh > "$OUT/build.log" 2>&1
nvidia-smi topo -m >> "$OUT/build.log" 2>&1
visible=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
mode=${1:-$([ "$visible" -ge 2 ] && echo two || echo one)}
case "$mode" in one | two) ;; *) echo "run_all.sh: mode must be one or two, got '$mode'" >&2; exit 2 ;; esac
[ "$mode" = two ] && [ "$visible" -lt 2 ] && { echo "run_all.sh: two-GPU mode needs 2 GPUs, $visible visible" >&2; exit 2; }
echo "mode: $mode ($visible GPU(s) visible)"
{ time make native-cuda native-cpu; } >> "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build ok"
skipped() { echo "$1 skipped: needs two GPUs (one-GPU mode)"; }
# Multi-rank steps: two separate devices, or two ranks sharing device 0.
ranks=$([ "$mode" = two ] && echo 0,1 || echo 0,0)

step() { # name limit_s log command...
  local name=$1 limit=$2 log=$3; shift 3
  echo "== $name" >> "$log"
  local t0=$SECONDS
  timeout "$limit" "$@" >> "$log" 2>&1
  echo "$name rc=$? in $((SECONDS - t0)) s"
}

# The FFI and native suites against CUDA, and the GPU-only suites (CUDA vs CPU step, graphs,
# transfer); the two-GPU suites skip themselves on one GPU and say so.
LMPOOL_BACKEND=cuda step "native+gpu tests" 150 "$OUT/tests.log" bun test test/native test/gpu
tail -8 "$OUT/tests.log"
# Logits vs transformers' own forward, Qwen3 and Llama (llama3 rope scaling), prefill and decode paths.
step "hf reference" 90 "$OUT/parity.log" bash -c "python3 test/gpu/hf_reference.py /tmp/hf-qwen3 qwen3 && python3 test/gpu/hf_reference.py /tmp/hf-llama llama"
step "hf parity" 60 "$OUT/parity.log" bun run test/gpu/hf_parity.ts /tmp/hf-qwen3 /tmp/hf-llama
# The fp32 CPU reference on the same models separates a semantic difference from bf16 rounding.
LMPOOL_BACKEND=cpu step "hf parity (cpu backend)" 90 "$OUT/parity.log" bun run test/gpu/hf_parity.ts /tmp/hf-qwen3 /tmp/hf-llama
grep '"pass"' "$OUT/parity.log"
if [ "$mode" = two ]; then
  # Transfer path vs the link peak measured in the same run.
  step "transfer bench" 90 "$OUT/transfer.log" bun run bench/main.ts transfer --reps 20 --out "$OUT/transfer-profile.json"
  # Engine-level dispatch-to-publish of 1- and 8-block copies (control messages included),
  # with the per-phase trace (round trip, the worker's handling, the way there and back).
  LMPOOL_TRACE_TRANSFERS=1 step "transfer latency" 90 "$OUT/transfer.log" bun run bench/main.ts transfer_latency --blocks 1,8 --reps 20 --verbose
  grep -E "^target|control plane window" "$OUT/transfer.log"; grep "transfer-trace.* 1 blocks" "$OUT/transfer.log" | tail -3
  # The same once the processes' JIT has compiled the message paths (the time falls over the first dozens of plans).
  step "transfer latency (warm)" 90 "$OUT/transfer.log" bun run bench/main.ts transfer_latency --blocks 1 --reps 40 --warmup 40
  grep -E "^target" "$OUT/transfer.log" | tail -1
else
  skipped "transfer bench"; skipped "transfer latency"; skipped "transfer latency (warm)"
fi
# Decode and prefill step times against the copy-bandwidth and GEMM ceilings of this run.
step "native_step" 120 "$OUT/bench.log" bun run bench/main.ts native_step
tail -12 "$OUT/bench.log"
# Throughput on random-256 (bench/workloads/data/).
[ -n "${SKIP_THROUGHPUT:-}" ] || step "throughput" 80 "$OUT/bench.log" bun run bench/main.ts throughput --preset qwen3-0.6b
tail -4 "$OUT/bench.log"
# Two ranks serving through LLMEngine at locality 5x, where routing and transfer matter most.
step "e2e locality 5x" 120 "$OUT/e2e.log" bun run bench/main.ts e2e --gpus "$ranks" --workload locality --scales 5 --configs round-robin,weighted-scorers,lmpool-routing,lmpool --repetitions 3 --out /tmp/e2e
cat /tmp/e2e/summary.md >> "$OUT/e2e.log" 2>/dev/null; grep -E "^\| (round|weighted|lmpool)" /tmp/e2e/summary.md 2>/dev/null | cut -c1-160
