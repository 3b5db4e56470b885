#!/usr/bin/env bash
# Device call: judge (B) part 1: locality 5x (4 configs x 3, per-request records), Mooncake window lmpool + lmpool-routing.
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
[ -f build/liblmpool_cuda.so ] || make native-cuda native-cpu > $OUT/build.log 2>&1; echo "build $((SECONDS - t0)) s"
step() { local name=$1 limit=$2 log=$3; shift 3; echo "== $name" >> "$log"; local t=$SECONDS; timeout "$limit" "$@" >> "$log" 2>&1; echo "$name rc=$? in $((SECONDS - t)) s"; }
step "e2e loc5" 220 $OUT/loc5.log bun bench/main.ts e2e --gpus 0,0 --backend cuda --configs round-robin,cache-aware,lmpool-routing,lmpool --repetitions 3 --workload locality --scales 5 --save-requests --out $OUT/loc5
grep -E "^\| (round|cache|lmpool)" $OUT/loc5/summary.md | head -4 | cut -c1-200
step "e2e mooncake lmpool" $((585 - SECONDS + t0)) $OUT/mcB.log bun bench/main.ts e2e --gpus 0,0 --backend cuda --configs lmpool,lmpool-routing --repetitions 3 --workload mooncake --first 800 --max-input 8192 --max-output 128 --out $OUT/mcB
grep -E "^\| (round|cache|lmpool)" $OUT/mcB/summary.md | head -4 | cut -c1-200
echo "total $((SECONDS - t0)) s"
