#!/usr/bin/env bash
# Device call: judge (B) Mooncake window, all four configurations in one call (one machine instance).
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
[ -f build/liblmpool_cuda.so ] || make native-cuda native-cpu > $OUT/build.log 2>&1; echo "build $((SECONDS - t0)) s"
step() { local name=$1 limit=$2 log=$3; shift 3; echo "== $name" >> "$log"; local t=$SECONDS; timeout "$limit" "$@" >> "$log" 2>&1; echo "$name rc=$? in $((SECONDS - t)) s"; }
step "e2e mooncake all" $((590 - SECONDS + t0)) $OUT/mc.log bun bench/main.ts e2e --gpus 0,0 --backend cuda --configs cache-aware,lmpool,lmpool-routing,round-robin --repetitions 3 --workload mooncake --first 800 --max-input 8192 --max-output 128 --out $OUT/mc
grep -E "^\| (round|cache|lmpool)" $OUT/mc/summary.md | head -4 | cut -c1-200
grep -E "#[0-9]:" $OUT/mc.log | tail -12
echo "total $((SECONDS - t0)) s"
