#!/usr/bin/env bash
# Device call: the submitted code (vectorized prefill prologue, one head row per lane group) against
# the previous csrc (.gpu/old): native_step A/B interleaved, the prologue's kernel time, the CUDA
# suites and transformers parity.
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
rm -rf /tmp/old && mkdir -p /tmp/old && cp -r .gpu/old/* /tmp/old/
make native-cuda > $OUT/build.log 2>&1 & p1=$!
make -C /tmp/old native-cuda > $OUT/build-old.log 2>&1 & p2=$!
# Experiment: decode attention's grid with the kv heads of a sequence adjacent in launch order.
rm -rf /tmp/swap && mkdir -p /tmp/swap && cp -r csrc Makefile /tmp/swap/ && cp .gpu/swap/attention_decode.cu /tmp/swap/csrc/cuda/
make -C /tmp/swap native-cuda > $OUT/build-swap.log 2>&1 & p3=$!
wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; echo "swap build rc=$?"
echo "build new rc=$r1 old rc=$r2 $((SECONDS - t0)) s"; [ $r1 = 0 ] || { tail -30 $OUT/build.log; exit 1; }
make native-cpu > /dev/null 2>&1
NEW=$PWD/build/liblmpool_cuda.so OLD=/tmp/old/build/liblmpool_cuda.so
step() { local name=$1 limit=$2 log=$3; shift 3; echo "== $name" >> "$log"; local t=$SECONDS; timeout "$limit" "$@" >> "$log" 2>&1; echo "$name rc=$? in $((SECONDS - t)) s"; }
SWAP=/tmp/swap/build/liblmpool_cuda.so
for i in 1 2; do for v in old new swap; do
  lib=$OLD; [ $v = new ] && lib=$NEW; [ $v = swap ] && lib=$SWAP
  LMPOOL_LIB=$lib step "native_step $v $i" 60 $OUT/ns-$v-$i.log bun bench/main.ts native_step --batches 1,4,16,64,256 --out $OUT/ns-$v-$i.json
  grep -E "^ +[0-9]+ +[0-9.]+ |^prefill" $OUT/ns-$v-$i.log
done; done
for v in old new; do
  lib=$OLD; [ $v = new ] && lib=$NEW
  LMPOOL_LIB=$lib step "ncu prologue $v" 60 $OUT/ncu-prologue-$v.csv ncu --clock-control none --kernel-name regex:"qk_norm_rope" --metrics gpu__time_duration.sum --csv bun bench/main.ts native_step --profile
  python3 -c "
import csv; r=[float(x['Metric Value'].replace(',','')) for x in csv.DictReader(l for l in open('$OUT/ncu-prologue-$v.csv') if l.startswith('\"'))]
big=[v for v in r if v>20000]; print(f'$v prologue kernels: {len(r)}, 8x2048-token launches {len(big)}: mean {sum(big)/max(1,len(big))/1000:.1f} us')"
done
LMPOOL_BACKEND=cuda step "native+gpu tests" 150 $OUT/tests.log bun test test/native test/gpu
grep -E "^ *[0-9]+ (pass|fail|skip)|\(fail\)" $OUT/tests.log | head
step "hf reference" 90 $OUT/parity.log bash -c "python3 test/gpu/hf_reference.py /tmp/hf-qwen3 qwen3 && python3 test/gpu/hf_reference.py /tmp/hf-llama llama"
LMPOOL_LIB=$NEW step "hf parity" 60 $OUT/parity.log bun run test/gpu/hf_parity.ts /tmp/hf-qwen3 /tmp/hf-llama
grep '"pass"' $OUT/parity.log
echo "total $((SECONDS - t0)) s"
