import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { stepCost } from "../../../calibration/engine_profile.ts";
const profile = JSON.parse(readFileSync("bench/calibration/profiles/h200-qwen3-0.6b.json", "utf8"));
for (const pol of ["cache-aware", "lmpool"]) {
  const steps = gunzipSync(readFileSync(`bench/results/20261204T0000Z/h200-mooncake-step-traces/steps-${pol}.jsonl.gz`)).toString().trim().split("\n").map((l) => JSON.parse(l)).map((s: any) => ({ ...s, own: stepCost(profile, s).totalMs, end: s.t + s.nativeMs }));
  for (const r of [0, 1]) {
    const mine = steps.filter((s: any) => s.rank === r), other = steps.filter((s: any) => s.rank !== r);
    let n = 0, obs = 0, own = 0, ow = 0, starts = 0, batch = 0, pre = 0;
    for (const s of mine) {
      if (s.kind !== "decode") continue;
      let w = 0, st = 0, busy = 0, p = 0;
      for (const o of other) {
        const ov = Math.min(s.end, o.end) - Math.max(s.t, o.t);
        if (ov > 0) { w += o.own * ov / o.nativeMs; busy += ov; if (o.kind !== "decode") p += ov; }
        if (o.t > s.t && o.t < s.end) st++;
      }
      if (busy / s.nativeMs < 0.9) continue;
      n++; obs += s.nativeMs; own += s.own; ow += w; starts += st; batch += s.decodeSeqs; pre += p / s.nativeMs;
    }
    console.log(`${pol} rank ${r}: decode steps (other busy) ${n}, batch ${(batch / n).toFixed(1)}, observed ${(obs / n).toFixed(2)} own ${(own / n).toFixed(2)} other ${(ow / n).toFixed(2)} ratio ${(obs / (own + ow)).toFixed(2)}, other's step starts inside ${(starts / n).toFixed(2)}, time beside other's prefill ${(100 * pre / n).toFixed(0)}%`);
  }
}
