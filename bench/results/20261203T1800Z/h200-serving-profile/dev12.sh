#!/usr/bin/env bash
# Device call: GPU suites on 768caba; offline throughput and serving random-256 with per-step traces and CPU profiles.
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT/prof-server $OUT/prof-client
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
make native-cuda native-cpu > $OUT/build.log 2>&1; echo "build rc=$? $((SECONDS - t0)) s"
step() { local name=$1 limit=$2 log=$3; shift 3; echo "== $name" >> "$log"; local t0=$SECONDS; timeout "$limit" "$@" >> "$log" 2>&1; echo "$name rc=$? in $((SECONDS - t0)) s"; }
LMPOOL_BACKEND=cuda step "native+gpu tests" 70 $OUT/tests.log bun test --timeout 60000 test/native test/gpu
grep -E "^\(fail\)| pass$| fail$| skip$" $OUT/tests.log | head -12
LMPOOL_TRACE_STEPS=$OUT/offline-steps.jsonl step "offline" 50 $OUT/offline.log bun run bench/main.ts throughput --preset qwen3-0.6b
grep -E "decode .*steps|tok/s" $OUT/offline.log | head -4
MODEL=$(bun -e 'import { ensureModel } from "./lib/model/demo_model.ts"; console.log(await ensureModel("qwen3-0.6b"))' 2>>$OUT/serve.log | tail -1)
LMPOOL_TRACE_STEPS=$OUT/serve-steps.jsonl BUN_OPTIONS="--cpu-prof-md --cpu-prof-dir=$OUT/prof-server" bun examples/serve.ts --model "$MODEL" --port 8000 --backend cuda > $OUT/serve.log 2>&1 &
SERVER=$!
for i in $(seq 1 90); do curl -sf localhost:8000/health > /dev/null && break; sleep 1; done
echo "server up after $i s"
step "serving warm" 75 $OUT/serving.log bun bench/main.ts serving --workload random-256 --max-concurrency 256 --out $OUT/serving-warm
: > $OUT/serve-steps.jsonl
(sleep 4; top -b -n 1 -w 200 | head -30 > $OUT/top.txt) &
BUN_OPTIONS="--cpu-prof-md --cpu-prof-dir=$OUT/prof-client" step "serving plain" 75 $OUT/serving.log bun bench/main.ts serving --workload random-256 --max-concurrency 256 --out $OUT/serving-plain
grep -E "Output token throughput|Mean TPOT|Mean TTFT|duration" $OUT/serving.log
kill -TERM $SERVER; wait $SERVER 2>/dev/null
sleep 3; ls $OUT/prof-server $OUT/prof-client
echo "total $((SECONDS - t0)) s"
