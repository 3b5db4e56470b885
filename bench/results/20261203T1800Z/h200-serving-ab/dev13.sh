#!/usr/bin/env bash
# Device call: serving random-256 A/B, old (768caba tree in .ab-old) vs new (byte-table detokenizer, token_delta fast check).
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
[ -f build/liblmpool_cuda.so ] || make native-cuda native-cpu > $OUT/build.log 2>&1; echo "build $((SECONDS - t0)) s"
ln -sfn ../node_modules .ab-old/node_modules; ln -sfn ../build .ab-old/build
MODEL=$(bun -e 'import { ensureModel } from "./lib/model/demo_model.ts"; console.log(await ensureModel("qwen3-0.6b"))' 2>>$OUT/model.log | tail -1)
serve() { local tag=$1 dir=$2 n=$3
  (cd $dir && LMPOOL_TRACE_STEPS=$OUT/steps-$tag.jsonl exec bun examples/serve.ts --model "$MODEL" --port 8000 --backend cuda > $OUT/serve-$tag.log 2>&1) &
  local pid=$!
  for i in $(seq 1 90); do curl -sf localhost:8000/health > /dev/null && break; sleep 1; done
  for k in $(seq 1 $n); do
    timeout 60 bun bench/main.ts serving --workload random-256 --max-concurrency 256 --out $OUT/serving-$tag-$k > $OUT/serving-$tag-$k.log 2>&1
    echo "$tag run $k: $(grep -E 'Output token throughput|Mean TPOT|Mean TTFT' $OUT/serving-$tag-$k.log | awk -F: '{gsub(/ /,"",$2); printf "%s ", $2}') (tok/s, TTFT, TPOT)"
  done
  pkill -TERM -f "examples/serve.ts" ; wait $pid 2>/dev/null; sleep 1
}
serve new . 3; serve old .ab-old 3; serve new2 . 2
timeout 50 bun run bench/main.ts throughput --preset qwen3-0.6b > $OUT/offline.log 2>&1; grep -E "total time|decode " $OUT/offline.log
python3 - <<'PY'
import json,glob
for f in sorted(glob.glob('/tmp/r/steps-*.jsonl')):
    rows=[json.loads(l) for l in open(f)]
    d=[r for r in rows if r['kind']=='decode']
    if not d: continue
    n=len(d); print(f.split('/')[-1], 'decode steps', n, 'native %.2f total %.2f step %.2f gap %.2f ms' % tuple([sum(r[k] for r in d)/n for k in ('nativeMs','totalMs','stepMs')] + [sum(min(r['gapMs'], 50) for r in d)/n]))
PY
echo "total $((SECONDS - t0)) s"
