// Native forward step vs the independent float64 TypeScript reference: a two-sequence prefill
// (logits at every prompt token), then greedy decode steps that cross block boundaries, for Qwen3
// and Llama (llama3 rope scaling), tied and untied embeddings, block sizes 16 and 32, head_dim 16
// and 128. Tolerance: rel. L2 1e-4 per row on the fp32 CPU backend, 3e-2 on bf16 backends.
import { describe, expect, test } from "bun:test";
import { native } from "../../ffi/native.ts";
import { rng } from "../helpers/bf16.ts";
import { createRandomModel, type RandomModelOptions, testSeed } from "../helpers/random_model.ts";
import { logSoftmaxAt, referenceLogits, relL2 } from "../helpers/reference_model.ts";
import { buildStep, rowLogits, shuffledBlocks } from "../helpers/step_builder.ts";

const TOL = native().backend === "cpu" ? 1e-4 : 3e-2;

interface Variant extends Omit<RandomModelOptions, "seed"> {
  blockSize: number;
}

const VARIANTS: Variant[] = [
  { arch: "qwen3", tie: false, blockSize: 16 },
  { arch: "qwen3", tie: true, blockSize: 32 },
  { arch: "llama", tie: false, blockSize: 32 },
  { arch: "llama", tie: true, blockSize: 16 },
  { arch: "qwen3", tie: false, blockSize: 16, hiddenSize: 128, numHeads: 2, numKvHeads: 1, headDim: 128 },
  { arch: "llama", tie: true, blockSize: 16, numHeads: 4, numKvHeads: 1, headDim: 128 },
];

function name(v: Variant): string {
  return `${v.arch} ${v.tie ? "tied" : "untied"} block ${v.blockSize} head_dim ${v.headDim ?? 16}`;
}

describe(`model logits vs float64 reference (${native().backend} backend)`, () => {
  for (const v of VARIANTS) {
    test(name(v), () => {
      const seed = testSeed();
      const ctx = `${name(v)}, seed ${seed} (replay: LP_TEST_SEED=${seed})`;
      const rand = rng(seed ^ 0x5eed);
      const { config, weights, model } = createRandomModel(native(), { ...v, seed });
      const kv = model.createKvCache(12, v.blockSize);
      const V = config.vocabSize;
      const prompts = [13, 7].map((n) => Array.from({ length: n }, () => Math.floor(rand() * V)));
      const blocks = shuffledBlocks(rand, 12, 6);
      const tables = [blocks.slice(0, 3), blocks.slice(3, 6)];
      const decodeSteps = 10;

      // logits[s][p]: native logits of sequence s at position p.
      const logits: Float32Array[][] = [[], []];
      const logprobs: number[][] = [[], []];
      const tokens = prompts.map((p) => [...p]);

      const rows = prompts.flatMap((p, s) => p.map((_, j) => ({ token: (s === 0 ? 0 : prompts[0]!.length) + j })));
      const prefill = buildStep(
        prompts.map((p, s) => ({ tokens: p, cached: 0, blockTable: tables[s]! })),
        v.blockSize,
        { rows, vocab: V },
      );
      model.step(kv, prefill);
      rows.forEach((r, i) => {
        const s = r.token < prompts[0]!.length ? 0 : 1;
        logits[s]!.push(Float32Array.from(rowLogits(prefill, i, V)));
        logprobs[s]!.push(prefill.outLogprobs[i]!);
      });
      let next = [prefill.outTokens[prompts[0]!.length - 1]!, prefill.outTokens[rows.length - 1]!];

      for (let step = 0; step < decodeSteps; step++) {
        const b = buildStep(
          tokens.map((t, s) => ({ tokens: [next[s]!], cached: t.length, blockTable: tables[s]! })),
          v.blockSize,
          { vocab: V },
        );
        model.step(kv, b);
        tokens.forEach((t, s) => {
          t.push(next[s]!);
          logits[s]!.push(Float32Array.from(rowLogits(b, s, V)));
          logprobs[s]!.push(b.outLogprobs[s]!);
        });
        next = [b.outTokens[0]!, b.outTokens[1]!];
      }

      let worst = 0;
      tokens.forEach((t, s) => {
        const want = referenceLogits(config, weights, t);
        want.forEach((ref, p) => {
          const got = logits[s]![p]!;
          const err = relL2(got, ref);
          worst = Math.max(worst, err);
          if (!(err <= TOL)) throw new Error(`${ctx}: sequence ${s} position ${p}: rel. L2 ${err} > ${TOL}`);
          // Greedy picked argmax of the native logits; its logprob is log_softmax there.
          let argmax = 0;
          for (let i = 1; i < V; i++) if (got[i]! > got[argmax]!) argmax = i;
          // The logprob must be log_softmax of the backend's own logits (tight), and on the fp32 CPU
          // backend also of the float64 reference; bf16 logits are held to the rel. L2 bound above.
          const own = logSoftmaxAt(got, argmax);
          if (!(Math.abs(logprobs[s]![p]! - own) <= 1e-3)) {
            throw new Error(
              `${ctx}: sequence ${s} position ${p}: logprob ${logprobs[s]![p]} vs log_softmax of its logits ${own}`,
            );
          }
          const lp = logSoftmaxAt(ref, argmax);
          if (native().backend === "cpu" && !(Math.abs(logprobs[s]![p]! - lp) <= 1e-3 + TOL * Math.abs(lp))) {
            throw new Error(`${ctx}: sequence ${s} position ${p}: logprob ${logprobs[s]![p]} vs reference ${lp}`);
          }
        });
      });
      console.log(`${ctx}: worst rel. L2 ${worst.toExponential(2)}`);
      expect(worst).toBeLessThanOrEqual(TOL);
      kv.dispose();
      model.dispose();
    });
  }
});
