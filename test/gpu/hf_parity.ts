// CUDA logits vs transformers' own forward (a GPU acceptance check). Run on the GPU machine after
// test/gpu/hf_reference.py wrote DIR:  bun run test/gpu/hf_parity.ts DIR [DIR...]
// For each model: the prefill path (one step over all tokens, logits at every position) and the
// decode path (a short prefill, then one teacher-forced token per step) are compared with the
// reference: relative L2 error of all logits (target <= 2e-2) and top-1 agreement (>= 95%).
import { readFileSync } from "node:fs";
import { Native } from "../../ffi/native.ts";
import { loadModel } from "../../lib/model/loader.ts";
import { buildStep } from "../helpers/step_builder.ts";

const BLOCK = 256;
const DECODE_FROM = 64;

function compare(ours: Float32Array, ref: Float32Array, rows: number, vocab: number, rowOffset: number) {
  let num = 0, den = 0, agree = 0;
  for (let r = 0; r < rows; r++) {
    let ao = 0, ar = 0;
    for (let v = 0; v < vocab; v++) {
      const o = ours[r * vocab + v]!, f = ref[(r + rowOffset) * vocab + v]!;
      num += (o - f) ** 2;
      den += f * f;
      if (o > ours[r * vocab + ao]!) ao = v;
      if (f > ref[(r + rowOffset) * vocab + ar]!) ar = v;
    }
    if (ao === ar) agree++;
  }
  return { relL2: Math.sqrt(num / den), top1: agree / rows, positions: rows };
}

async function parity(dir: string) {
  const { tokens, vocab } = JSON.parse(readFileSync(`${dir}/tokens.json`, "utf8")) as {
    tokens: number[];
    vocab: number;
  };
  const ref = new Float32Array(readFileSync(`${dir}/logits.f32`).buffer.slice(0));
  const n = tokens.length;
  const native = new Native({ backend: (process.env.LMPOOL_BACKEND as "cpu" | undefined) ?? "cuda" });
  const { model } = await loadModel(dir, native, { maxNumTokens: n, maxNumSeqs: n });
  const blocks = Array.from({ length: Math.ceil(n / BLOCK) }, (_, i) => i);
  // Prefill path: every position sampled in one step.
  const kv1 = model.createKvCache(blocks.length, BLOCK);
  const pre = buildStep([{ tokens, cached: 0, blockTable: blocks }], BLOCK, {
    rows: tokens.map((_, t) => ({ token: t })),
    vocab,
  });
  model.step(kv1, pre);
  const prefill = compare(pre.outLogits!, ref, n, vocab, 0);
  kv1.dispose();
  // Decode path: prefill DECODE_FROM tokens, then one token per step through the paged cache.
  const kv2 = model.createKvCache(blocks.length, BLOCK);
  model.step(
    kv2,
    buildStep([{ tokens: tokens.slice(0, DECODE_FROM), cached: 0, blockTable: blocks }], BLOCK, { vocab }),
  );
  const dec = new Float32Array((n - DECODE_FROM) * vocab);
  for (let t = DECODE_FROM; t < n; t++) {
    const b = buildStep([{ tokens: [tokens[t]!], cached: t, blockTable: blocks }], BLOCK, { vocab });
    model.step(kv2, b);
    dec.set(b.outLogits!.subarray(0, vocab), (t - DECODE_FROM) * vocab);
  }
  const decode = compare(dec, ref, n - DECODE_FROM, vocab, DECODE_FROM);
  kv2.dispose();
  model.dispose();
  return { dir, prefill, decode };
}

let failed = false;
for (const dir of process.argv.slice(2)) {
  const r = await parity(dir);
  const ok = [r.prefill, r.decode].every((m) => m.relL2 <= 2e-2 && m.top1 >= 0.95);
  failed ||= !ok;
  console.log(JSON.stringify({ ...r, pass: ok }));
}
process.exit(failed ? 1 : 0);
