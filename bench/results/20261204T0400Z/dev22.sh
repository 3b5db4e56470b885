#!/usr/bin/env bash
# Device call: per-kernel device times (ncu) of the prefill step (8 x 2048) and a batch-16 decode step, and the
# native_step baseline, on the submitted code.
set -uo pipefail
FINAL=$OUT; OUT=/tmp/r; rm -rf $OUT; mkdir -p $OUT
trap 'tar czf $FINAL/r.tgz -C /tmp r' EXIT
rm -rf node_modules; source .gpu/env.sh > $OUT/env.log 2>&1
t0=$SECONDS
make native-cuda > $OUT/build.log 2>&1; echo "build rc=$? $((SECONDS - t0)) s"
step() { local name=$1 limit=$2 log=$3; shift 3; echo "== $name" >> "$log"; local t=$SECONDS; timeout "$limit" "$@" >> "$log" 2>&1; echo "$name rc=$? in $((SECONDS - t)) s"; }
step "native_step" 150 $OUT/ns.log bun bench/main.ts native_step --batches 1,4,16,32,64,256 --out $OUT/ns.json
tail -16 $OUT/ns.log
step "ncu b16" 300 $OUT/ncu_b16.csv ncu --clock-control none --metrics gpu__time_duration.sum --csv bun bench/main.ts native_step --profile --batches 16
python3 .gpu/ncu_sum.py $OUT/ncu_b16.csv > $OUT/ncu_b16.txt 2>&1; head -30 $OUT/ncu_b16.txt
python3 - <<'PY' > $OUT/ncu_prefill.txt 2>&1
import csv, collections, re
rows=[r for r in csv.DictReader(l for l in open('/tmp/r/ncu_b16.csv') if l.startswith('"'))]
ks=[(r['Kernel Name'],float(r['Metric Value'].replace(',',''))/1000,r['Grid Size']) for r in rows if r['Metric Name']=='gpu__time_duration.sum']
idx=[i for i,k in enumerate(ks) if 'prefill' in k[0]]
# the last prefill step: its 28 attention launches and everything between the one before and the decode
last=idx[-28:]; lo=last[0]
while lo>0 and 'prefill' not in ks[lo-1][0] and 'decode' not in ks[lo-1][0] and len([1 for k in ks[lo-60:lo] if 'prefill' in k[0]])==0: lo-=1
lo=max(idx[-29]+1 if len(idx)>28 else 0, last[0]-20)
hi=last[-1]+12
agg=collections.OrderedDict()
for n,t,g in ks[lo:hi]:
  key=(re.sub(r'\(.*','',n)[:90],g); a=agg.setdefault(key,[0,0.0]); a[0]+=1; a[1]+=t
tot=sum(v[1] for v in agg.values())
print(f"prefill step window: {hi-lo} kernels, {tot:.0f} us")
for (n,g),(c,t) in sorted(agg.items(), key=lambda x:-x[1][1]): print(f"{t:9.1f} us x{c:3d} {t/c:8.2f} each grid {g} {n}")
PY
cat $OUT/ncu_prefill.txt | head -30
echo "total $((SECONDS - t0)) s"
