// safetensors writer -> reader round trips (bf16/f16/f32, streamed producers, sharded index) and
// the reader's errors on malformed files.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelFormatError } from "../../../lib/core/errors.ts";
import {
  bf16ToF32,
  decodeFloats,
  encodeFloats,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
} from "../../../lib/model/float_formats.ts";
import { openSafetensors, parseSafetensors } from "../../../lib/model/safetensors.ts";
import { encodeSafetensorsHeader, writeSafetensorsFile } from "../../../lib/model/safetensors_writer.ts";
import { openModelWeights } from "../../../lib/model/shards.ts";
import { rng } from "../../helpers/bf16.ts";

function withDir(f: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), "lmpool-st-"));
  try {
    f(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function randomValues(n: number, seed: number): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: n }, () => (r() - 0.5) * 8);
}

test("16-bit conversions round to nearest even and invert exactly on representable values", () => {
  expect(bf16ToF32(f32ToBf16(1.0))).toBe(1.0);
  expect(f16ToF32(f32ToF16(-2.5))).toBe(-2.5);
  expect(f16ToF32(f32ToF16(65504))).toBe(65504);
  expect(f16ToF32(f32ToF16(1e6))).toBe(Infinity);
  expect(f16ToF32(f32ToF16(2 ** -24))).toBe(2 ** -24);
  // 1 + 2^-11 is halfway between two halves: ties to even (1.0); 1 + 3*2^-11 rounds up to 1 + 2^-9.
  expect(f16ToF32(f32ToF16(1 + 2 ** -11))).toBe(1);
  expect(f16ToF32(f32ToF16(1 + 3 * 2 ** -11))).toBe(1 + 2 ** -9);
  const r = rng(5);
  for (let i = 0; i < 2000; i++) {
    const x = (r() - 0.5) * 100;
    expect(Math.abs(bf16ToF32(f32ToBf16(x)) - x)).toBeLessThanOrEqual(Math.abs(x) * 2 ** -8);
    expect(Math.abs(f16ToF32(f32ToF16(x)) - x)).toBeLessThanOrEqual(Math.abs(x) * 2 ** -11 + 2 ** -25);
  }
});

test("a file with bf16, f16 and f32 tensors reads back the written values as views", () => {
  withDir((dir) => {
    const a = randomValues(6 * 5, 1);
    const b = randomValues(7, 2);
    const c = randomValues(3 * 2 * 4, 3);
    const path = join(dir, "x.safetensors");
    writeSafetensorsFile(path, [
      { name: "a", dtype: "BF16", shape: [6, 5], data: encodeFloats(a, "BF16") },
      { name: "b", dtype: "F16", shape: [7], data: encodeFloats(b, "F16") },
      // Streamed in uneven chunks.
      {
        name: "c",
        dtype: "F32",
        shape: [3, 2, 4],
        data: (emit) => {
          const bytes = encodeFloats(c, "F32");
          emit(bytes.subarray(0, 10));
          emit(bytes.subarray(10));
        },
      },
      { name: "empty", dtype: "F32", shape: [0, 3], data: new Uint8Array(0) },
    ], { metadata: { format: "pt", note: "hi" } });
    const f = openSafetensors(path);
    expect(f.metadata).toEqual({ format: "pt", note: "hi" });
    expect([...f.tensors.keys()]).toEqual(["a", "b", "c", "empty"]);
    const ta = f.tensors.get("a")!;
    expect(ta.shape).toEqual([6, 5]);
    expect(ta.numel).toBe(30);
    expect([...decodeFloats(ta.bytes, "BF16")]).toEqual([...a].map((x) => bf16ToF32(f32ToBf16(x))));
    expect([...decodeFloats(f.tensors.get("b")!.bytes, "F16")]).toEqual([...b].map((x) => f16ToF32(f32ToF16(x))));
    expect([...decodeFloats(f.tensors.get("c")!.bytes, "F32")]).toEqual([...c]);
    expect(f.tensors.get("empty")!.bytes.byteLength).toBe(0);
    // Views share the file's buffer (no copy) and data starts 8-byte aligned.
    const all = f.tensors.get("a")!.bytes;
    expect(f.tensors.get("c")!.bytes.buffer).toBe(all.buffer);
    expect((all.byteOffset) % 8).toBe(0);
  });
});

test("a producer emitting the wrong byte count is an error naming the tensor", () => {
  withDir((dir) => {
    expect(() =>
      writeSafetensorsFile(join(dir, "bad.safetensors"), [
        { name: "short", dtype: "BF16", shape: [4], data: (emit) => emit(new Uint8Array(6)) },
      ])
    ).toThrow(/short: got 6 bytes, expected 8/);
  });
});

function fileWith(headerJson: string, dataBytes = 0): Uint8Array {
  const h = new TextEncoder().encode(headerJson);
  const out = new Uint8Array(8 + h.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8);
  return out;
}

test("malformed headers are ModelFormatErrors naming the file and the bad entry", () => {
  const cases: [Uint8Array, RegExp][] = [
    [new Uint8Array(4), /too short/],
    [fileWith("{}").subarray(0, 9), /header length 2 does not fit/],
    [fileWith("{nope"), /not valid JSON/],
    [fileWith('{"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 2]}}', 2), /tensor w: unknown dtype "Q4"/],
    [fileWith('{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', 4), /needs 8/],
    [fileWith('{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', 4), /past the data's 4 bytes/],
    [fileWith('{"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}'), /shape \[-1\]/],
  ];
  for (const [bytes, pattern] of cases) {
    let err: unknown;
    try {
      parseSafetensors(bytes, "m.safetensors");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ModelFormatError);
    expect((err as Error).message).toMatch(/^m\.safetensors: /);
    expect((err as Error).message).toMatch(pattern);
  }
  // Known but non-float dtypes parse (the loader decides what it accepts).
  const ok = parseSafetensors(fileWith('{"ids": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}', 8));
  expect(ok.tensors.get("ids")!.dtype).toBe("I64");
});

test("header is padded to 8 bytes and its offsets are contiguous", () => {
  const h = encodeSafetensorsHeader([{ name: "x", dtype: "BF16", shape: [3] }, {
    name: "yy",
    dtype: "F32",
    shape: [2, 2],
  }]);
  const len = Number(new DataView(h.buffer).getBigUint64(0, true));
  expect(len % 8).toBe(0);
  expect(h.byteLength).toBe(8 + len);
  const json = JSON.parse(new TextDecoder().decode(h.subarray(8)));
  expect(json.x.data_offsets).toEqual([0, 6]);
  expect(json.yy.data_offsets).toEqual([6, 22]);
  expect(() =>
    encodeSafetensorsHeader([{ name: "x", dtype: "F32", shape: [1] }, { name: "x", dtype: "F32", shape: [1] }])
  ).toThrow(/duplicate/);
});

test("sharded checkpoints merge through model.safetensors.index.json", () => {
  withDir((dir) => {
    const v = randomValues(8, 9);
    writeSafetensorsFile(join(dir, "s1.safetensors"), [{
      name: "p",
      dtype: "F32",
      shape: [8],
      data: encodeFloats(v, "F32"),
    }]);
    writeSafetensorsFile(join(dir, "s2.safetensors"), [
      { name: "q", dtype: "BF16", shape: [2, 4], data: encodeFloats(v, "BF16") },
      { name: "stray", dtype: "F32", shape: [1], data: new Uint8Array(4) },
    ]);
    writeFileSync(
      join(dir, "model.safetensors.index.json"),
      JSON.stringify({ weight_map: { p: "s1.safetensors", q: "s2.safetensors" } }),
    );
    const w = openModelWeights(dir);
    expect(w.files).toEqual(["s1.safetensors", "s2.safetensors"]);
    expect([...w.tensors.keys()].sort()).toEqual(["p", "q"]);
    expect(w.tensors.get("q")!.file).toBe("s2.safetensors");
    expect([...decodeFloats(w.tensors.get("p")!.bytes, "F32")]).toEqual([...v]);

    writeFileSync(
      join(dir, "model.safetensors.index.json"),
      JSON.stringify({ weight_map: { p: "s1.safetensors", r: "s2.safetensors", z: "s3.safetensors" } }),
    );
    expect(() => openModelWeights(dir)).toThrow(/missing: s3\.safetensors/);
    writeFileSync(
      join(dir, "model.safetensors.index.json"),
      JSON.stringify({ weight_map: { p: "s1.safetensors", r: "s2.safetensors" } }),
    );
    expect(() => openModelWeights(dir)).toThrow(/not in their shard: r \(in s2\.safetensors\)/);
    writeFileSync(
      join(dir, "model.safetensors.index.json"),
      JSON.stringify({ weight_map: { p: "../s1.safetensors" } }),
    );
    expect(() => openModelWeights(dir)).toThrow(/is not a shard file name/);
  });
});

test("a directory without safetensors says what it expected", () => {
  withDir((dir) => {
    expect(() => openModelWeights(dir)).toThrow(/no model\.safetensors or model\.safetensors\.index\.json/);
  });
});
