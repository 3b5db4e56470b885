/**
 * Fast deterministic weights for synthetic models. Each tensor gets its own generator seeded from
 * (seed, tensor name), so its values do not depend on tensor order or sharding. Normal values come
 * from a 65536-entry inverse-CDF table indexed by 16 random bits (two per 32-bit draw of sfc32):
 * about 1 ns per element, and finer than bf16's 8-bit mantissa resolves anyway.
 * @module
 */
import { f32ToBf16, f32ToF16, type FloatDType } from "./float_formats.ts";

/** Emits a tensor's bytes in chunks; the chunk buffer is reused, so consume it before returning. */
export type TensorProducer = (emit: (chunk: Uint8Array) => void) => void;

const CHUNK_ELEMENTS = 1 << 20;

/** Inverse of the standard normal CDF (Acklam's rational approximation, rel. error < 1.2e-9). */
function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`normalQuantile needs 0 < p < 1, got ${p}`);
  const a = [
    -3.969683028665376e1,
    2.209460984245205e2,
    -2.759285104469687e2,
    1.38357751867269e2,
    -3.066479806614716e1,
    2.506628277459239,
  ];
  const b = [
    -5.447609879822406e1,
    1.615858368580409e2,
    -1.556989798598866e2,
    6.680131188771972e1,
    -1.328068155288572e1,
  ];
  const c = [
    -7.784894002430293e-3,
    -3.223964580411365e-1,
    -2.400758277161838,
    -2.549732539343734,
    4.374664141464968,
    2.938163982698783,
  ];
  const d = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
  const tail = (q: number) =>
    (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) /
    ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  if (p < 0.02425) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - 0.02425) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  return ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) /
    (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1);
}

const tables = new Map<string, Uint16Array | Float32Array>();

function normalTable(dtype: FloatDType, std: number): Uint16Array | Float32Array {
  const key = `${dtype}:${std}`;
  let t = tables.get(key);
  if (!t) {
    t = dtype === "F32" ? new Float32Array(65536) : new Uint16Array(65536);
    for (let i = 0; i < 65536; i++) {
      const x = std * normalQuantile((i + 0.5) / 65536);
      t[i] = dtype === "F32" ? x : dtype === "BF16" ? f32ToBf16(x) : f32ToF16(x);
    }
    tables.set(key, t);
  }
  return t;
}

/** 32-bit seed of one tensor's generator: FNV-1a of its name mixed with the model seed. */
function tensorSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  h ^= Math.floor(seed / 0x100000000) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A producer of `numel` N(0, std) values in `dtype`, deterministic in (seed, name). */
export function normalTensor(
  seed: number,
  name: string,
  dtype: FloatDType,
  numel: number,
  std: number,
): TensorProducer {
  return (emit) => {
    const table = normalTable(dtype, std);
    const chunk = dtype === "F32"
      ? new Float32Array(Math.min(numel, CHUNK_ELEMENTS))
      : new Uint16Array(Math.min(numel, CHUNK_ELEMENTS));
    const bytes = new Uint8Array(chunk.buffer);
    // sfc32 state; the first draws are discarded to mix the seed in.
    let a = 0x9e3779b9 | 0, b = tensorSeed(seed, name) | 0, c = 0x243f6a88 | 0, d = 1;
    for (let i = 0; i < 12; i++) {
      const t = (((a + b) | 0) + d) | 0;
      d = (d + 1) | 0;
      a = b ^ (b >>> 9);
      b = (c + (c << 3)) | 0;
      c = (c << 21) | (c >>> 11);
      c = (c + t) | 0;
    }
    for (let done = 0; done < numel;) {
      const n = Math.min(chunk.length, numel - done);
      for (let i = 0; i < n; i += 2) {
        const t = (((a + b) | 0) + d) | 0;
        d = (d + 1) | 0;
        a = b ^ (b >>> 9);
        b = (c + (c << 3)) | 0;
        c = (c << 21) | (c >>> 11);
        c = (c + t) | 0;
        chunk[i] = table[t & 0xffff]!;
        if (i + 1 < n) chunk[i + 1] = table[t >>> 16]!;
      }
      emit(bytes.subarray(0, n * chunk.BYTES_PER_ELEMENT));
      done += n;
    }
  };
}

/** A producer of `numel` copies of `value` in `dtype`. */
export function constantTensor(value: number, dtype: FloatDType, numel: number): TensorProducer {
  return (emit) => {
    const chunk = dtype === "F32"
      ? new Float32Array(Math.min(numel, CHUNK_ELEMENTS))
      : new Uint16Array(Math.min(numel, CHUNK_ELEMENTS));
    chunk.fill(dtype === "F32" ? value : dtype === "BF16" ? f32ToBf16(value) : f32ToF16(value));
    const bytes = new Uint8Array(chunk.buffer);
    for (let done = 0; done < numel;) {
      const n = Math.min(chunk.length, numel - done);
      emit(bytes.subarray(0, n * chunk.BYTES_PER_ELEMENT));
      done += n;
    }
  };
}
