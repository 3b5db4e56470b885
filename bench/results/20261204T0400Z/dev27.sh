#!/usr/bin/env bash
# Device call: the submitted code (decode attention grid with a sequence's kv heads adjacent) on the warm
# machine: the CUDA suites and the decode steps.
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
make native-cuda native-cpu > $OUT/build.log 2>&1; echo "build rc=$? $((SECONDS - t0)) s"
LMPOOL_BACKEND=cuda timeout 60 bun test test/native test/gpu > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^ *[0-9]+ (pass|fail|skip)|\(fail\)" $OUT/tests.log | head
timeout 30 bun bench/main.ts native_step --batches 16,64,256 > $OUT/ns.log 2>&1; grep -E "^ +[0-9]+ +[0-9.]+ " $OUT/ns.log
echo "total $((SECONDS - t0)) s"
