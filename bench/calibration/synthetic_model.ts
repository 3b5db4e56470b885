/**
 * The native model the step benchmarks time: a real shape with seeded random bf16 weights built in
 * memory (no files), and the step batches they feed it. Weight values do not change a step's
 * time, so random ones measure the same kernels a checkpoint would run.
 * @module
 */
import {
  allocateStepBatch,
  type Native,
  type NativeModel,
  type NativeModelConfig,
  type StepBatch,
} from "../../ffi/native.ts";
import { seededRandom } from "../../lib/core/seeded_random.ts";
import { f32ToBf16 } from "../../lib/model/float_formats.ts";

/** Seeded uniform values in [-spread, spread] as bf16 bits. */
function randomBf16(n: number, spread: number, seed: number): Uint16Array {
  const rand = seededRandom(seed);
  return Uint16Array.from({ length: n }, () => f32ToBf16((rand() * 2 - 1) * spread));
}

/** Builds and finalizes a model of shape `c` with random weights: one random pool, tiled to each weight's size. */
export function buildSyntheticModel(
  native: Native,
  c: NativeModelConfig,
  maxTokens: number,
  maxSeqs: number,
): NativeModel {
  const model = native.createModel(c);
  const pool = randomBf16(1 << 20, Math.sqrt(3 / c.hiddenSize), 12345);
  let big = new Uint16Array(0);
  const tensor = (numel: number): Uint16Array => {
    if (numel <= pool.length) return pool.subarray(0, numel);
    if (big.length < numel) {
      big = new Uint16Array(numel);
      for (let o = 0; o < numel; o += pool.length) big.set(pool.subarray(0, Math.min(pool.length, numel - o)), o);
    }
    return big.subarray(0, numel);
  };
  const norm = (n: number) => Float32Array.from({ length: n }, (_, i) => 1 + 0.1 * Math.sin(i));
  const H = c.hiddenSize, I = c.intermediateSize, D = c.headDim, q = c.numHeads * D, kv = c.numKvHeads * D;
  const matrix = (layer: number, kind: Parameters<NativeModel["setWeight"]>[1], numel: number) =>
    model.setWeight(layer, kind, "bf16", tensor(numel), numel);
  const vector = (layer: number, kind: Parameters<NativeModel["setWeight"]>[1], n: number) =>
    model.setWeight(layer, kind, "f32", norm(n), n);
  matrix(-1, "embed", c.vocabSize * H);
  vector(-1, "finalNorm", H);
  if (!c.tieWordEmbeddings) matrix(-1, "lmHead", c.vocabSize * H);
  for (let l = 0; l < c.numLayers; l++) {
    vector(l, "inputNorm", H);
    matrix(l, "q", q * H);
    matrix(l, "k", kv * H);
    matrix(l, "v", kv * H);
    matrix(l, "o", H * q);
    if (c.arch === "qwen3") {
      vector(l, "qNorm", D);
      vector(l, "kNorm", D);
    }
    vector(l, "postNorm", H);
    matrix(l, "gate", I * H);
    matrix(l, "up", I * H);
    matrix(l, "down", H * I);
  }
  model.finalize(maxTokens, maxSeqs);
  return model;
}

/** One group of sequences in a step: `seqs` sequences each computing `len` tokens after `cached` ones. */
export interface SeqGroup {
  seqs: number;
  len: number;
  cached: number;
}

/**
 * A step of several sequence groups (a mixed step: a prefill chunk beside a decode batch). Every
 * sequence owns `perSeq` consecutive blocks from `firstBlock` on, in group order, and samples its
 * last token.
 */
export function makeGroupedStep(
  groups: readonly SeqGroup[],
  firstBlock: number,
  perSeq: number,
  bs: number,
  vocab: number,
  seed: number,
): StepBatch {
  const seqs = groups.reduce((s, g) => s + g.seqs, 0);
  const T = groups.reduce((s, g) => s + g.seqs * g.len, 0);
  const b: StepBatch = {
    ...allocateStepBatch({ tokens: T, seqs, maxBlocksPerSeq: perSeq }),
    numSeqs: seqs,
    numTokens: T,
    numRows: seqs,
  };
  b.topP.fill(1);
  let s32 = seed >>> 0;
  let s = 0, t = 0;
  for (const g of groups) {
    for (let k = 0; k < g.seqs; k++, s++) {
      const first = firstBlock + s * perSeq;
      for (let j = 0; j < perSeq; j++) b.blockTables[s * perSeq + j] = first + j;
      b.contextLens[s] = g.cached + g.len;
      for (let j = 0; j < g.len; j++, t++) {
        const pos = g.cached + j;
        s32 = (Math.imul(s32, 1664525) + 1013904223) >>> 0;
        b.tokenIds[t] = s32 % vocab;
        b.positions[t] = pos;
        b.slotMapping[t] = (first + Math.floor(pos / bs)) * bs + (pos % bs);
      }
      b.queryStart[s + 1] = t;
      b.sampleIndex[s] = t - 1;
    }
  }
  return b;
}

/** A step of `seqs` sequences: seq s feeds `len` tokens after `cached` ones, in blocks from firstBlock + s * perSeq. */
export function makeStep(
  seqs: number,
  len: number,
  cached: number,
  firstBlock: number,
  perSeq: number,
  bs: number,
  vocab: number,
  seed: number,
): StepBatch {
  return makeGroupedStep([{ seqs, len, cached }], firstBlock, perSeq, bs, vocab, seed);
}

/** Wall time of `fn`, ms. */
export function timeMs(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}
