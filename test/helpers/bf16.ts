/** bf16 helpers for tests: round-to-nearest-even conversion, matching csrc/common/bf16.h. */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function f32ToBf16(x: number): number {
  f32[0] = x;
  const u = u32[0]!;
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16ToF32(h: number): number {
  u32[0] = (h << 16) >>> 0;
  return f32[0]!;
}

/** Seeded PRNG (mulberry32) so a failing case can be replayed from its printed seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
