#!/usr/bin/env bash
# Device call: judge (B) locality 5x, all four configurations, 3 repetitions, in one call.
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
[ -f build/liblmpool_cuda.so ] || make native-cuda > $OUT/build.log 2>&1; echo "build $((SECONDS - t0)) s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
step() { local name=$1 limit=$2 log=$3; shift 3; echo "== $name" >> "$log"; local t=$SECONDS; timeout "$limit" "$@" >> "$log" 2>&1; echo "$name rc=$? in $((SECONDS - t)) s"; }
step "e2e loc5" 300 $OUT/loc5.log bun bench/main.ts e2e --gpus 0,0 --backend cuda --configs round-robin,cache-aware,lmpool-routing,lmpool --repetitions 3 --workload locality --scales 5 --save-requests --out $OUT/loc5
grep -E "^\| (round|cache|lmpool)" $OUT/loc5/summary.md | head -4 | cut -c1-200
echo "total $((SECONDS - t0)) s"
step "e2e mooncake rr" $((590 - SECONDS)) $OUT/mcrr.log bun bench/main.ts e2e --gpus 0,0 --backend cuda --configs round-robin --repetitions 3 --workload mooncake --first 800 --max-input 8192 --max-output 128 --save-requests --out $OUT/mcrr
grep -E "^\| (round|cache|lmpool)" $OUT/mcrr/summary.md | head -4 | cut -c1-200
echo "total $((SECONDS - t0)) s"
