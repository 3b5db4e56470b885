#!/usr/bin/env bash
# Device call: per-step traces of cache-aware and lmpool on the Mooncake window (one repetition each).
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
[ -f build/liblmpool_cuda.so ] || make native-cuda > $OUT/build.log 2>&1; echo "build $((SECONDS - t0)) s"
step() { local name=$1 limit=$2 log=$3; shift 3; echo "== $name" >> "$log"; local t=$SECONDS; timeout "$limit" "$@" >> "$log" 2>&1; echo "$name rc=$? in $((SECONDS - t)) s"; }
for c in cache-aware lmpool; do
  LMPOOL_TRACE_STEPS=$OUT/steps-$c.jsonl step "e2e mooncake $c" 150 $OUT/mc-$c.log bun bench/main.ts e2e --gpus 0,0 --backend cuda --configs $c --repetitions 1 --workload mooncake --first 800 --max-input 8192 --max-output 128 --save-requests --out $OUT/mc-$c
  grep -E "^\| (cache|lmpool)" $OUT/mc-$c/summary.md | head -1 | cut -c1-160
  wc -l $OUT/steps-$c.jsonl
done
gzip $OUT/steps-*.jsonl
echo "total $((SECONDS - t0)) s"
