import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { stepCost } from "../../../calibration/engine_profile.ts";
const profile = JSON.parse(readFileSync("bench/calibration/profiles/h200-qwen3-0.6b.json", "utf8"));
for (const pol of ["cache-aware", "lmpool"]) {
  const lines = gunzipSync(readFileSync(`bench/results/20261204T0000Z/h200-mooncake-step-traces/steps-${pol}.jsonl.gz`)).toString().trim().split("\n").map((l) => JSON.parse(l));
  const steps = lines.map((s: any) => ({ ...s, own: stepCost(profile, { decodeSeqs: s.decodeSeqs, decodeContext: s.decodeContext, prefillSeqs: s.prefillSeqs, prefillTokens: s.prefillTokens, prefillPairs: s.prefillPairs }).totalMs, end: s.t + s.nativeMs }));
  const t0 = Math.min(...steps.map((s: any) => s.t)), t1 = Math.max(...steps.map((s: any) => s.end));
  const by: any[][] = [0, 1].map((r) => steps.filter((s: any) => s.rank === r));
  let sumOwn = 0;
  for (const s of steps) sumOwn += s.own;
  console.log(`${pol}: ${steps.length} steps, wall ${((t1 - t0) / 1e3).toFixed(1)} s, sum of alone-predicted ${(sumOwn / 1e3).toFixed(1)} s, sum of observed native ${(steps.reduce((a: number, s: any) => a + s.nativeMs, 0) / 1e3).toFixed(1)} s`);
  // per step: fraction of its interval the other rank was in a step, and the other rank's predicted work overlapping
  const rows: number[][] = [];
  for (const r of [0, 1]) for (const s of by[r]!) {
    let busy = 0, work = 0;
    for (const o of by[1 - r]!) {
      const ov = Math.min(s.end, o.end) - Math.max(s.t, o.t);
      if (ov > 0) { busy += ov; work += o.own * ov / o.nativeMs; }
    }
    rows.push([s.nativeMs, s.own, work, busy / s.nativeMs, s.kind === "decode" ? 1 : 0]);
  }
  const stat = (f: (x: number[]) => boolean, name: string) => {
    const sel = rows.filter(f);
    const m = (i: number) => sel.reduce((a, x) => a + x[i]!, 0) / sel.length;
    console.log(`  ${name}: n=${sel.length} observed ${m(0).toFixed(2)} own ${m(1).toFixed(2)} other-work-overlapping ${m(2).toFixed(2)} other-busy ${(100 * m(3)).toFixed(0)}%  obs/own ${(m(0) / m(1)).toFixed(2)} obs/(own+other) ${(m(0) / (m(1) + m(2))).toFixed(2)}`);
  };
  stat((x) => x[4] === 1 && x[3]! < 0.1, "decode, other idle");
  stat((x) => x[4] === 1 && x[3]! > 0.9, "decode, other busy");
  stat((x) => x[4] === 0 && x[3]! < 0.1, "prefill/mixed, other idle");
  stat((x) => x[4] === 0 && x[3]! > 0.9, "prefill/mixed, other busy");
}
