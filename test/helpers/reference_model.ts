/**
 * An independent, deliberately plain float64 forward pass of a Qwen3/Llama decoder over one
 * sequence with a contiguous KV cache, written from the transformers definitions (not from the C
 * code). Tests compare the native step's logits against it.
 * @module
 */
import type { NativeModelConfig } from "../../ffi/native.ts";

/** Weights of one decoder layer, HF shapes ([out, in] row-major for linear layers). */
export interface ReferenceLayerWeights {
  inputNorm: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  o: Float32Array;
  qNorm: Float32Array | null;
  kNorm: Float32Array | null;
  postNorm: Float32Array;
  gate: Float32Array;
  up: Float32Array;
  down: Float32Array;
}

/** All weights of a model; lmHead is null when tied to embed. */
export interface ReferenceWeights {
  embed: Float32Array;
  finalNorm: Float32Array;
  lmHead: Float32Array | null;
  layers: ReferenceLayerWeights[];
}

function rmsnorm(x: Float64Array, w: ArrayLike<number>, eps: number): Float64Array {
  let ss = 0;
  for (const v of x) ss += v * v;
  const inv = 1 / Math.sqrt(ss / x.length + eps);
  return x.map((v, i) => v * inv * w[i]!);
}

/** y = W x for W [out, in]. */
function matvec(w: Float32Array, x: Float64Array, out: number): Float64Array {
  const inDim = x.length;
  const y = new Float64Array(out);
  for (let o = 0; o < out; o++) {
    let s = 0;
    for (let i = 0; i < inDim; i++) s += w[o * inDim + i]! * x[i]!;
    y[o] = s;
  }
  return y;
}

/** RoPE inverse frequencies, with transformers' llama3 rope_scaling when configured. */
export function ropeInvFreq(c: NativeModelConfig): Float64Array {
  const half = c.headDim / 2;
  const f = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    let inv = 1 / c.ropeTheta ** ((2 * i) / c.headDim);
    if (c.ropeType === "llama3") {
      const lowWavelen = c.ropeOriginalMaxPosition / c.ropeLowFreqFactor;
      const highWavelen = c.ropeOriginalMaxPosition / c.ropeHighFreqFactor;
      const wavelen = (2 * Math.PI) / inv;
      if (wavelen > lowWavelen) {
        inv = inv / c.ropeFactor;
      } else if (wavelen >= highWavelen) {
        const smooth = (c.ropeOriginalMaxPosition / wavelen - c.ropeLowFreqFactor) /
          (c.ropeHighFreqFactor - c.ropeLowFreqFactor);
        inv = (1 - smooth) * (inv / c.ropeFactor) + smooth * inv;
      }
    }
    f[i] = inv;
  }
  return f;
}

/** rotate_half RoPE of one head: pairs (i, i + d/2). */
function rope(x: Float64Array, invFreq: Float64Array, position: number): Float64Array {
  const half = invFreq.length;
  const out = new Float64Array(x.length);
  for (let i = 0; i < half; i++) {
    const a = invFreq[i]! * position;
    const c = Math.cos(a), s = Math.sin(a);
    out[i] = x[i]! * c - x[i + half]! * s;
    out[i + half] = x[i + half]! * c + x[i]! * s;
  }
  return out;
}

/** Logits (float64, one array of vocab values per position) of a causal LM over `tokens` at positions 0.. */
export function referenceLogits(c: NativeModelConfig, w: ReferenceWeights, tokens: readonly number[]): Float64Array[] {
  const H = c.hiddenSize, D = c.headDim, nH = c.numHeads, nKv = c.numKvHeads, I = c.intermediateSize;
  const invFreq = ropeInvFreq(c);
  let hidden = tokens.map((t) => Float64Array.from(w.embed.subarray(t * H, (t + 1) * H)));
  for (const L of w.layers) {
    // keys[p][kvHead], values[p][kvHead]: the contiguous cache of this layer.
    const keys: Float64Array[][] = [], values: Float64Array[][] = [];
    const queries: Float64Array[][] = [];
    hidden.forEach((h, p) => {
      const x = rmsnorm(h, L.inputNorm, c.rmsNormEps);
      const q = matvec(L.q, x, nH * D), k = matvec(L.k, x, nKv * D), v = matvec(L.v, x, nKv * D);
      const head = (a: Float64Array, j: number, norm: Float32Array | null) => {
        const s = a.slice(j * D, (j + 1) * D);
        return rope(norm ? rmsnorm(s, norm, c.rmsNormEps) : s, invFreq, p);
      };
      queries.push(Array.from({ length: nH }, (_, j) => head(q, j, L.qNorm)));
      keys.push(Array.from({ length: nKv }, (_, j) => head(k, j, L.kNorm)));
      values.push(Array.from({ length: nKv }, (_, j) => v.slice(j * D, (j + 1) * D)));
    });
    hidden = hidden.map((h, p) => {
      const attn = new Float64Array(nH * D);
      for (let hh = 0; hh < nH; hh++) {
        const kvHead = Math.floor(hh / (nH / nKv));
        const q = queries[p]![hh]!;
        const scores = Array.from({ length: p + 1 }, (_, j) => {
          let s = 0;
          for (let d = 0; d < D; d++) s += q[d]! * keys[j]![kvHead]![d]!;
          return s / Math.sqrt(D);
        });
        const mx = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - mx));
        const sum = e.reduce((a, b) => a + b, 0);
        for (let j = 0; j <= p; j++) {
          for (let d = 0; d < D; d++) attn[hh * D + d] = attn[hh * D + d]! + (e[j]! / sum) * values[j]![kvHead]![d]!;
        }
      }
      const o = matvec(L.o, attn, H);
      const h1 = h.map((v, i) => v + o[i]!);
      const x = rmsnorm(h1, L.postNorm, c.rmsNormEps);
      const g = matvec(L.gate, x, I), u = matvec(L.up, x, I);
      const act = g.map((gv, i) => (gv / (1 + Math.exp(-gv))) * u[i]!);
      const down = matvec(L.down, act, H);
      return h1.map((v, i) => v + down[i]!);
    });
  }
  const head = w.lmHead ?? w.embed;
  return hidden.map((h) => matvec(head, rmsnorm(h, w.finalNorm, c.rmsNormEps), c.vocabSize));
}

/** log_softmax(logits)[index] in float64. */
export function logSoftmaxAt(logits: ArrayLike<number>, index: number): number {
  let mx = -Infinity;
  for (let i = 0; i < logits.length; i++) mx = Math.max(mx, logits[i]!);
  let s = 0;
  for (let i = 0; i < logits.length; i++) s += Math.exp(logits[i]! - mx);
  return logits[index]! - mx - Math.log(s);
}

/** ||a - b|| / ||b||. */
export function relL2(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new RangeError(`length ${a.length} vs ${b.length}`);
  let num = 0, den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i]! - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num / (den || 1));
}
