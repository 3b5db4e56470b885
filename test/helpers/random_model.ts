/**
 * Tiny random-weight Qwen3/Llama models built in memory through NativeModel.setWeight, with the
 * same weights kept for the float64 reference. Values are bf16-representable so every backend
 * stores them exactly; matrices go over as bf16 bits, norms as f32 (both conversion paths run).
 * @module
 */
import { type Native, type NativeModel, type NativeModelConfig } from "../../ffi/native.ts";
import { bf16ToF32, f32ToBf16, rng } from "./bf16.ts";
import type { ReferenceLayerWeights, ReferenceWeights } from "./reference_model.ts";

/** Shape and variant of a random model; unset fields take the tiny defaults. */
export interface RandomModelOptions {
  arch: "qwen3" | "llama";
  tie: boolean;
  seed: number;
  vocabSize?: number;
  hiddenSize?: number;
  intermediateSize?: number;
  numLayers?: number;
  numHeads?: number;
  numKvHeads?: number;
  headDim?: number;
  /** Multiplies the LM head (or tied embedding) spread: larger makes sampling more peaked. */
  logitScale?: number;
  maxNumTokens?: number;
  maxNumSeqs?: number;
}

/**
 * The GPU suites' Qwen3 shape: head size 128 and a hidden size of 256, so the CUDA backend runs its
 * fast attention kernels and tensor-core GEMVs rather than their fallbacks, on a model still small
 * enough to build in a moment.
 */
export const KERNEL_QWEN3 = {
  arch: "qwen3",
  tie: true,
  hiddenSize: 256,
  intermediateSize: 512,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 128,
} as const satisfies Partial<RandomModelOptions>;

/** The native step tests' Qwen3 shape: small enough for the CPU backend in CI, grouped-query heads. */
export const SMALL_QWEN3 = {
  arch: "qwen3",
  tie: true,
  hiddenSize: 64,
  intermediateSize: 192,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
} as const satisfies Partial<RandomModelOptions>;

/** A finalized native model and what built it. */
export interface RandomModel {
  config: NativeModelConfig;
  weights: ReferenceWeights;
  model: NativeModel;
}

/** The config of a tiny model: Llama gets llama3 rope scaling (all three frequency bands hit). */
export function tinyConfig(o: RandomModelOptions): NativeModelConfig {
  const llama = o.arch === "llama";
  return {
    arch: o.arch,
    vocabSize: o.vocabSize ?? 300,
    hiddenSize: o.hiddenSize ?? 64,
    intermediateSize: o.intermediateSize ?? 96,
    numLayers: o.numLayers ?? 2,
    numHeads: o.numHeads ?? 4,
    numKvHeads: o.numKvHeads ?? 2,
    headDim: o.headDim ?? 16,
    tieWordEmbeddings: o.tie,
    ropeType: llama ? "llama3" : "default",
    ropeOriginalMaxPosition: llama ? 8192 : 0,
    maxPosition: 4096,
    rmsNormEps: 1e-6,
    ropeTheta: llama ? 500000 : 1000000,
    ropeFactor: llama ? 8 : 1,
    ropeLowFreqFactor: llama ? 1 : 0,
    ropeHighFreqFactor: llama ? 4 : 0,
  };
}

/** Uniform values in [center - spread, center + spread], rounded to bf16. */
function randomTensor(rand: () => number, n: number, spread: number, center = 0): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = bf16ToF32(f32ToBf16(center + (rand() * 2 - 1) * spread));
  return out;
}

/** Random weights for `c` (deterministic in seed). */
export function randomWeights(c: NativeModelConfig, seed: number, logitScale = 2): ReferenceWeights {
  const rand = rng(seed);
  const H = c.hiddenSize, I = c.intermediateSize, D = c.headDim;
  const linear = (out: number, inDim: number) => randomTensor(rand, out * inDim, Math.sqrt(3 / inDim));
  const norm = (n: number) => randomTensor(rand, n, 0.2, 1);
  const layers: ReferenceLayerWeights[] = [];
  const embedSpread = c.tieWordEmbeddings ? logitScale * Math.sqrt(3 / H) : 1;
  const embed = randomTensor(rand, c.vocabSize * H, embedSpread);
  for (let l = 0; l < c.numLayers; l++) {
    layers.push({
      inputNorm: norm(H),
      q: linear(c.numHeads * D, H),
      k: linear(c.numKvHeads * D, H),
      v: linear(c.numKvHeads * D, H),
      o: linear(H, c.numHeads * D),
      qNorm: c.arch === "qwen3" ? norm(D) : null,
      kNorm: c.arch === "qwen3" ? norm(D) : null,
      postNorm: norm(H),
      gate: linear(I, H),
      up: linear(I, H),
      down: linear(H, I),
    });
  }
  const finalNorm = norm(H);
  const lmHead = c.tieWordEmbeddings ? null : randomTensor(rand, c.vocabSize * H, logitScale * Math.sqrt(3 / H));
  return { embed, finalNorm, lmHead, layers };
}

function toBf16Bits(x: Float32Array): Uint16Array {
  const out = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = f32ToBf16(x[i]!);
  return out;
}

/** Hands every weight of `w` to `model` (matrices as bf16, norms as f32). */
export function setWeights(model: NativeModel, w: ReferenceWeights): void {
  const matrix = (layer: number, kind: Parameters<NativeModel["setWeight"]>[1], x: Float32Array) =>
    model.setWeight(layer, kind, "bf16", toBf16Bits(x), x.length);
  const vector = (layer: number, kind: Parameters<NativeModel["setWeight"]>[1], x: Float32Array) =>
    model.setWeight(layer, kind, "f32", x, x.length);
  matrix(-1, "embed", w.embed);
  vector(-1, "finalNorm", w.finalNorm);
  if (w.lmHead) matrix(-1, "lmHead", w.lmHead);
  w.layers.forEach((L, l) => {
    vector(l, "inputNorm", L.inputNorm);
    matrix(l, "q", L.q);
    matrix(l, "k", L.k);
    matrix(l, "v", L.v);
    matrix(l, "o", L.o);
    if (L.qNorm) vector(l, "qNorm", L.qNorm);
    if (L.kNorm) vector(l, "kNorm", L.kNorm);
    vector(l, "postNorm", L.postNorm);
    matrix(l, "gate", L.gate);
    matrix(l, "up", L.up);
    matrix(l, "down", L.down);
  });
}

/** Builds, fills and finalizes a random model on `native`. */
export function createRandomModel(native: Native, o: RandomModelOptions): RandomModel {
  const config = tinyConfig(o);
  const weights = randomWeights(config, o.seed, o.logitScale);
  const model = native.createModel(config);
  setWeights(model, weights);
  model.finalize(o.maxNumTokens ?? 256, o.maxNumSeqs ?? 64);
  return { config, weights, model };
}

/** A seed for a randomized test: LP_TEST_SEED when set (to replay a failure), else fresh. */
export function testSeed(): number {
  const env = process.env.LP_TEST_SEED;
  return env ? Number(env) >>> 0 : (Math.random() * 2 ** 32) >>> 0;
}
