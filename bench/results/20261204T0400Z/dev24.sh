#!/usr/bin/env bash
# Device call: A/B of the decode attention's shared-memory ring (and the vectorized prefill prologue)
# against the submitted csrc built beside it (.gpu/old); the CUDA suites and transformers parity on
# the new build; per-kernel times of decode steps at batch 16 and 64.
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
LMPOOL_BACKEND=cuda step "decode tests" 60 $OUT/tests-quick.log bun test test/gpu/cuda_vs_cpu_step.test.ts test/native/model_logits.test.ts test/gpu/cuda_graphs_kv.test.ts
grep -E "^ *[0-9]+ (pass|fail)|\(fail\)" $OUT/tests-quick.log | head
for i in 1 2; do for v in old new; do
  lib=$OLD; [ $v = new ] && lib=$NEW
  LMPOOL_LIB=$lib step "native_step $v $i" 60 $OUT/ns-$v-$i.log bun bench/main.ts native_step --batches 1,2,4,8,16,32,64,128,256 --out $OUT/ns-$v-$i.json
  grep -E "^ +[0-9]+ +[0-9.]+ |^prefill" $OUT/ns-$v-$i.log
done; done
for p in qwen3-0.6b qwen3-1.7b qwen3-0.6b; do for v in old new; do
  lib=$OLD; [ $v = new ] && lib=$NEW
  LMPOOL_LIB=$lib step "throughput $p $v" 90 $OUT/tp-$p-$v.log bun bench/main.ts throughput --preset $p
  grep -E "total time" $OUT/tp-$p-$v.log | tail -1
done; done
for b in 16 64; do
  LMPOOL_LIB=$NEW step "ncu b$b new" 120 $OUT/ncu-b$b-new.csv ncu --clock-control none --metrics gpu__time_duration.sum --csv bun bench/main.ts native_step --profile --batches $b
  python3 .gpu/ncu_sum.py $OUT/ncu-b$b-new.csv > $OUT/ncu-b$b-new.txt 2>&1; head -8 $OUT/ncu-b$b-new.txt
done
LMPOOL_BACKEND=cuda step "native+gpu tests" 150 $OUT/tests.log bun test test/native test/gpu
grep -E "^ *[0-9]+ (pass|fail|skip)|\(fail\)" $OUT/tests.log | head
step "hf reference" 90 $OUT/parity.log bash -c "python3 test/gpu/hf_reference.py /tmp/hf-qwen3 qwen3 && python3 test/gpu/hf_reference.py /tmp/hf-llama llama"
LMPOOL_LIB=$NEW step "hf parity" 60 $OUT/parity.log bun run test/gpu/hf_parity.ts /tmp/hf-qwen3 /tmp/hf-llama
grep '"pass"' $OUT/parity.log
echo "total $((SECONDS - t0)) s"
