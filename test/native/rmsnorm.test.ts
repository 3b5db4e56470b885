// FFI tier: the RMSNorm kernel through the facade against a TypeScript reference, on whichever
// backend loads (CPU in CI, CUDA on the GPU machine). Tolerance: 1 bf16 ulp relative (2^-7) plus
// 1e-6 absolute, since both sides round the same fp32 value to bf16 but may sum in another order.
import { describe, expect, test } from "bun:test";
import { native } from "../../ffi/native.ts";
import { NativeError } from "../../lib/core/errors.ts";
import { bf16ToF32, f32ToBf16, rng } from "../helpers/bf16.ts";

function referenceRmsnorm(x: Uint16Array, w: Uint16Array, rows: number, dim: number, eps: number): Float64Array {
  const out = new Float64Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += bf16ToF32(x[r * dim + i]!) ** 2;
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[r * dim + i] = bf16ToF32(x[r * dim + i]!) * inv * bf16ToF32(w[i]!);
  }
  return out;
}

describe(`rmsnorm_bf16 (${native().backend} backend)`, () => {
  for (const [rows, dim] of [[1, 64], [7, 1024], [33, 1536], [4, 4097]] as const) {
    test(`rows=${rows} dim=${dim}`, () => {
      const seed = (Date.now() ^ (rows * 7919 + dim)) >>> 0;
      const rand = rng(seed);
      const x = Uint16Array.from({ length: rows * dim }, () => f32ToBf16((rand() * 2 - 1) * 4));
      const w = Uint16Array.from({ length: dim }, () => f32ToBf16(0.5 + rand()));
      const got = native().rmsnormBf16(x, w, rows, dim, 1e-6);
      const want = referenceRmsnorm(x, w, rows, dim, 1e-6);
      for (let i = 0; i < got.length; i++) {
        const g = bf16ToF32(got[i]!);
        const err = Math.abs(g - want[i]!);
        if (err > Math.abs(want[i]!) * 2 ** -7 + 1e-6) {
          throw new Error(`seed ${seed}: index ${i} got ${g}, want ${want[i]} (err ${err})`);
        }
      }
    });
  }

  test("bad shape is a NativeError naming the values", () => {
    const x = new Uint16Array(4);
    expect(() => native().rmsnormBf16(x, new Uint16Array(0), 1, 0, 1e-6)).toThrow(RangeError);
    // Bypass the facade's own check to reach the C argument check.
    const status = native().symbols.lp_rmsnorm_bf16(x, x, x, 1, 0, 1e-6);
    expect(status).not.toBe(0);
    expect(native().lastError()).toContain("dim=0");
    expect(() => native().check(status, "lp_rmsnorm_bf16")).toThrow(NativeError);
  });
});
