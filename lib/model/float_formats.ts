/**
 * Conversions between float32 and the 16-bit formats stored in safetensors files (bf16, f16),
 * and decoding a tensor's raw little-endian bytes into float32 values.
 * @module
 */

/** Element types of weight tensors LMPool loads (safetensors names). */
export type FloatDType = "BF16" | "F16" | "F32";

/** Bytes per element of each supported dtype. */
const FLOAT_DTYPE_BYTES: Readonly<Record<FloatDType, number>> = { BF16: 2, F16: 2, F32: 4 };

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 -> bf16 bit pattern, round to nearest even (NaN stays NaN). */
export function f32ToBf16(x: number): number {
  f32[0] = x;
  const u = u32[0]!;
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bf16 bit pattern -> float32 value. */
export function bf16ToF32(h: number): number {
  u32[0] = (h << 16) >>> 0;
  return f32[0]!;
}

/** float32 -> IEEE half bit pattern, round to nearest even, overflow to infinity. */
export function f32ToF16(x: number): number {
  f32[0] = x;
  const u = u32[0]!;
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  let mant = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half (or zero): shift the implicit-1 mantissa right, rounding to nearest even.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let m = mant >>> shift;
    if (rest > half || (rest === half && (m & 1))) m++;
    return sign | m;
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (m & 1))) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

/** IEEE half bit pattern -> float32 value. */
export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Decodes `bytes` (little-endian elements of `dtype`, any alignment) into float32 values. */
export function decodeFloats(bytes: Uint8Array, dtype: FloatDType): Float32Array {
  const size = FLOAT_DTYPE_BYTES[dtype];
  if (bytes.byteLength % size !== 0) {
    throw new RangeError(`${bytes.byteLength} bytes is not a whole number of ${dtype} elements`);
  }
  const n = bytes.byteLength / size;
  const out = new Float32Array(n);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dtype === "F32") { for (let i = 0; i < n; i++) out[i] = view.getFloat32(i * 4, true); }
  else if (dtype === "BF16") { for (let i = 0; i < n; i++) out[i] = bf16ToF32(view.getUint16(i * 2, true)); }
  else for (let i = 0; i < n; i++) out[i] = f16ToF32(view.getUint16(i * 2, true));
  return out;
}

/** Encodes float32 values as little-endian elements of `dtype`. */
export function encodeFloats(values: ArrayLike<number>, dtype: FloatDType): Uint8Array {
  const size = FLOAT_DTYPE_BYTES[dtype];
  const out = new Uint8Array(values.length * size);
  const view = new DataView(out.buffer);
  for (let i = 0; i < values.length; i++) {
    const x = values[i]!;
    if (dtype === "F32") view.setFloat32(i * 4, x, true);
    else view.setUint16(i * 2, dtype === "BF16" ? f32ToBf16(x) : f32ToF16(x), true);
  }
  return out;
}
