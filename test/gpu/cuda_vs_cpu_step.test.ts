// The CUDA forward step against the CPU backend on the same random models: prefill across query
// tiles, a chunked continuation that reads its prefix from the cache mixed with a decode, decode
// steps through graphs (batches 1 to 16 -> fused GEMV path, 24 -> cuBLAS), and the KV the two
// backends wrote. Tolerances are bf16's: rel. L2 of logits <= 2e-2 per row; greedy tokens
// agree except at near ties (CPU logit gap under 5% of the logits' RMS). Skips without CUDA.
import { describe, expect, test } from "bun:test";
import type { KvCache, NativeModel, StepBatch } from "../../ffi/native.ts";
import { bf16ToF32, rng } from "../helpers/bf16.ts";
import { createRandomModel, type RandomModelOptions, testSeed } from "../helpers/random_model.ts";
import { relL2 } from "../helpers/reference_model.ts";
import { buildStep, rowLogits, type SeqStep, shuffledBlocks } from "../helpers/step_builder.ts";
import { openBackends } from "./cuda_backends.ts";

const LOGIT_TOL = 2e-2;
const TIE_FRACTION = 0.05;

interface Variant extends Omit<RandomModelOptions, "seed"> {
  blockSize: number;
}

const VARIANTS: Variant[] = [
  {
    arch: "qwen3",
    tie: true,
    blockSize: 16,
    vocabSize: 1000,
    hiddenSize: 256,
    intermediateSize: 512,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 128,
  },
  {
    arch: "llama",
    tie: false,
    blockSize: 32,
    vocabSize: 1000,
    hiddenSize: 256,
    intermediateSize: 384,
    numHeads: 8,
    numKvHeads: 2,
    headDim: 64,
  },
  {
    arch: "qwen3",
    tie: false,
    blockSize: 256,
    vocabSize: 777,
    hiddenSize: 512,
    intermediateSize: 1024,
    numHeads: 16,
    numKvHeads: 8,
    headDim: 128,
  },
  {
    arch: "llama",
    tie: true,
    blockSize: 16,
    vocabSize: 500,
    hiddenSize: 96,
    intermediateSize: 160,
    numHeads: 6,
    numKvHeads: 3,
    headDim: 32,
  },
  // Eight query heads per kv head at head size 128 (the decode kernel's widest group).
  {
    arch: "llama",
    tie: false,
    blockSize: 128,
    vocabSize: 800,
    hiddenSize: 256,
    intermediateSize: 512,
    numHeads: 8,
    numKvHeads: 1,
    headDim: 128,
  },
  // Rows wider than 4096: 8-row GEMV tiles with several weight windows per warp.
  {
    arch: "qwen3",
    tie: true,
    blockSize: 64,
    vocabSize: 600,
    hiddenSize: 1280,
    intermediateSize: 4608,
    numHeads: 10,
    numKvHeads: 5,
    headDim: 128,
  },
];

function rms(x: Float32Array): number {
  let s = 0;
  for (const v of x) s += v * v;
  return Math.sqrt(s / x.length);
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

/** Runs the same step on both backends and compares every sampled row. */
function compareStep(
  ctx: string,
  V: number,
  pair: { cuda: [NativeModel, KvCache]; cpu: [NativeModel, KvCache] },
  make: () => StepBatch,
): StepBatch {
  const onCuda = make(), onCpu = make();
  pair.cuda[0].step(pair.cuda[1], onCuda);
  pair.cpu[0].step(pair.cpu[1], onCpu);
  for (let r = 0; r < onCuda.numRows; r++) {
    const g = rowLogits(onCuda, r, V), c = rowLogits(onCpu, r, V);
    const err = relL2(g, c);
    if (!(err <= LOGIT_TOL)) throw new Error(`${ctx}: row ${r} rel. L2 ${err.toExponential(2)} > ${LOGIT_TOL}`);
    const tg = onCuda.outTokens[r]!, tc = onCpu.outTokens[r]!;
    expect(tg).toBe(argmax(g));
    if (tg !== tc && c[tc]! - c[tg]! > TIE_FRACTION * rms(c)) {
      throw new Error(`${ctx}: row ${r} greedy token ${tg} (CUDA) vs ${tc} (CPU), CPU logit gap ${c[tc]! - c[tg]!}`);
    }
    expect(Math.abs(onCuda.outLogprobs[r]! - onCpu.outLogprobs[r]!)).toBeLessThan(
      0.1 + 0.05 * Math.abs(onCpu.outLogprobs[r]!),
    );
  }
  return onCuda;
}

const backends = openBackends();

describe("CUDA step vs CPU step", () => {
  if ("skip" in backends) {
    test.skip(`skipped: ${backends.skip}`, () => {});
    return;
  }
  for (const v of VARIANTS) {
    test(`${v.arch} ${v.tie ? "tied" : "untied"} head_dim ${v.headDim} group ${v.numHeads! / v.numKvHeads!} block ${v.blockSize}`, () => {
      const seed = testSeed();
      const ctx = `${v.arch} head_dim ${v.headDim}, seed ${seed} (replay: LP_TEST_SEED=${seed})`;
      const rand = rng(seed ^ 0x6b1d);
      const opts = { ...v, seed, maxNumTokens: 512, maxNumSeqs: 256 };
      const cuda = createRandomModel(backends.cuda, opts), cpu = createRandomModel(backends.cpu, opts);
      const V = cuda.config.vocabSize, bs = v.blockSize;
      const numBlocks = 64;
      const pair = {
        cuda: [cuda.model, cuda.model.createKvCache(numBlocks, bs)] as [NativeModel, KvCache],
        cpu: [cpu.model, cpu.model.createKvCache(numBlocks, bs)] as [NativeModel, KvCache],
      };
      const order = shuffledBlocks(rand, numBlocks, numBlocks);
      const perSeq = Math.ceil(300 / bs);
      const lens = [70, 5, 130];
      const tables = lens.map((_, s) => order.slice(s * perSeq, (s + 1) * perSeq));
      const seqs = lens.map((n) => Array.from({ length: n }, () => Math.floor(rand() * V)));
      const step = (parts: { s: number; tokens: number[] }[], allRows = false) => () => {
        const steps: SeqStep[] = parts.map(({ s, tokens }) => ({
          tokens,
          cached: seqs[s]!.length - tokens.length,
          blockTable: tables[s]!,
        }));
        const total = parts.reduce((n, p) => n + p.tokens.length, 0);
        const rows = allRows ? Array.from({ length: Math.min(total, 200) }, (_, t) => ({ token: t })) : undefined;
        return buildStep(steps, bs, { rows, vocab: V, maxBlocksPerSeq: perSeq });
      };
      // Prefill of all three (multiple query tiles for the 70- and 130-token prompts).
      compareStep(`${ctx} prefill`, V, pair, step(lens.map((_, s) => ({ s, tokens: seqs[s]! })), true));
      // Chunked continuation of seq 0 (prefix from the cache) mixed with decodes of 1 and 2.
      const chunk = Array.from({ length: 40 }, () => Math.floor(rand() * V));
      seqs[0]!.push(...chunk);
      for (const s of [1, 2]) seqs[s]!.push(Math.floor(rand() * V));
      compareStep(
        `${ctx} chunk + decode`,
        V,
        pair,
        step(
          [{ s: 0, tokens: chunk }, { s: 1, tokens: seqs[1]!.slice(-1) }, { s: 2, tokens: seqs[2]!.slice(-1) }],
          true,
        ),
      );
      // Decode steps of all three (a graph of batch 4 serves them; the GEMV's 8-token instance),
      // then of one and two (graphs of 1 and 2).
      for (const group of [[0, 1, 2], [0, 1, 2], [0], [1, 2], [2], [0, 1]]) {
        for (const s of group) seqs[s]!.push(Math.floor(rand() * V));
        compareStep(`${ctx} decode [${group}]`, V, pair, step(group.map((s) => ({ s, tokens: seqs[s]!.slice(-1) }))));
      }
      // Two tokens of seq 1 at once: the fused GEMV path but not a pure decode, so the prologue
      // kernel runs and reads the rope table the first layer's QKV GEMV wrote.
      const two = [Math.floor(rand() * V), Math.floor(rand() * V)];
      seqs[1]!.push(...two);
      compareStep(`${ctx} two-token chunk`, V, pair, step([{ s: 1, tokens: two }], true));
      // The KV both backends wrote for seq 2's blocks: bf16 on CUDA, fp32 on CPU, same layout.
      const ids = Int32Array.from(tables[2]!.slice(0, Math.ceil(seqs[2]!.length / bs)));
      const g = new Uint16Array(pair.cuda[1].gather(ids).buffer), c = new Float32Array(pair.cpu[1].gather(ids).buffer);
      const gf = Float32Array.from(g, bf16ToF32);
      const kvErr = relL2(gf, c);
      if (!(kvErr <= LOGIT_TOL)) throw new Error(`${ctx}: gathered KV rel. L2 ${kvErr} > ${LOGIT_TOL}`);
      pair.cuda[1].dispose();
      pair.cpu[1].dispose();
      cuda.model.dispose();
      cpu.model.dispose();
    });
  }

  for (const [batch, path] of [[12, "fused GEMV path, 16-token instance"], [24, "cuBLAS path, graph of 32"]] as const) {
    test(`decode batch ${batch} (${path})`, () => {
      const seed = testSeed();
      const ctx = `batch ${batch}, seed ${seed} (replay: LP_TEST_SEED=${seed})`;
      const rand = rng(seed ^ batch);
      const opts = { ...VARIANTS[0]!, seed, maxNumTokens: 512, maxNumSeqs: 64 };
      const cuda = createRandomModel(backends.cuda, opts), cpu = createRandomModel(backends.cpu, opts);
      const V = cuda.config.vocabSize, bs = 16;
      const pair = {
        cuda: [cuda.model, cuda.model.createKvCache(batch * 4, bs)] as [NativeModel, KvCache],
        cpu: [cpu.model, cpu.model.createKvCache(batch * 4, bs)] as [NativeModel, KvCache],
      };
      const tables = Array.from({ length: batch }, (_, s) => [0, 1, 2, 3].map((j) => s * 4 + j));
      const seqs = tables.map(() => Array.from({ length: 3 + Math.floor(rand() * 30) }, () => Math.floor(rand() * V)));
      const make = (fresh: boolean) => () =>
        buildStep(
          seqs.map((t, s) => ({
            tokens: fresh ? t : t.slice(-1),
            cached: fresh ? 0 : t.length - 1,
            blockTable: tables[s]!,
          })),
          bs,
          { vocab: V },
        );
      compareStep(`${ctx} prefill`, V, pair, make(true));
      for (let i = 0; i < 3; i++) {
        seqs.forEach((t) => t.push(Math.floor(rand() * V)));
        compareStep(`${ctx} decode ${i}`, V, pair, make(false));
      }
      cuda.model.dispose();
      cpu.model.dispose();
    });
  }
});
