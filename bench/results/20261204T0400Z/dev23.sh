#!/usr/bin/env bash
# Device call: A/B of the prefill attention (3 CTAs/SM, split K/V waits, diagonal-only mask) and the
# vectorized q/k norm + rope + KV write against the submitted csrc (built beside it from .gpu/old),
# with the CUDA-vs-CPU and transformers-parity checks on the new build.
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
rm -rf /tmp/old && mkdir -p /tmp/old && cp -r .gpu/old/* /tmp/old/
make native-cuda > $OUT/build.log 2>&1 & p1=$!
make -C /tmp/old native-cuda > $OUT/build-old.log 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
echo "build new rc=$r1 old rc=$r2 $((SECONDS - t0)) s"; [ $r1 = 0 ] || { tail -30 $OUT/build.log; exit 1; }
make native-cpu > /dev/null 2>&1
NEW=$PWD/build/liblmpool_cuda.so OLD=/tmp/old/build/liblmpool_cuda.so
step() { local name=$1 limit=$2 log=$3; shift 3; echo "== $name" >> "$log"; local t=$SECONDS; timeout "$limit" "$@" >> "$log" 2>&1; echo "$name rc=$? in $((SECONDS - t)) s"; }
LMPOOL_BACKEND=cuda step "prefill tests" 120 $OUT/tests.log bun test test/gpu/cuda_vs_cpu_step.test.ts test/native/paged_prefill.test.ts test/native/model_logits.test.ts test/gpu/cuda_graphs_kv.test.ts
grep -E "^ *[0-9]+ (pass|fail|skip)" $OUT/tests.log
for i in 1 2; do for v in old new; do
  lib=$OLD; [ $v = new ] && lib=$NEW
  LMPOOL_LIB=$lib step "native_step $v $i" 60 $OUT/ns-$v-$i.log bun bench/main.ts native_step --batches 1,16,64,256 --out $OUT/ns-$v-$i.json
  grep -E "^ +(1|16|64|256) |^prefill" $OUT/ns-$v-$i.log
done; done
LMPOOL_LIB=$NEW step "ncu prefill new" 120 $OUT/ncu-prefill-new.csv ncu --clock-control none --kernel-name regex:"prefill_kernel|qk_norm_rope" --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem --csv bun bench/main.ts native_step --profile
python3 - <<'PY'
import csv, collections
rows=[r for r in csv.DictReader(l for l in open('/tmp/r/ncu-prefill-new.csv') if l.startswith('"'))]
agg=collections.defaultdict(list)
for r in rows:
  agg[(r['Kernel Name'][:60], r['Metric Name'])].append(float(r['Metric Value'].replace(',','')))
for (k,m),v in sorted(agg.items()): print(f"{k:60s} {m:55s} n={len(v):3d} mean={sum(v)/len(v):10.2f} max={max(v):10.2f}")
PY
for v in old new; do
  lib=$OLD; [ $v = new ] && lib=$NEW
  LMPOOL_LIB=$lib step "throughput 0.6b $v" 90 $OUT/tp-$v.log bun bench/main.ts throughput --preset qwen3-0.6b
  grep -iE "output tok/s|tok/s" $OUT/tp-$v.log | tail -2
done
LMPOOL_BACKEND=cuda step "hf reference" 90 $OUT/parity.log bash -c "python3 test/gpu/hf_reference.py /tmp/hf-qwen3 qwen3 && python3 test/gpu/hf_reference.py /tmp/hf-llama llama"
LMPOOL_LIB=$NEW step "hf parity" 60 $OUT/parity.log bun run test/gpu/hf_parity.ts /tmp/hf-qwen3 /tmp/hf-llama
grep '"pass"' $OUT/parity.log
echo "total $((SECONDS - t0)) s"
