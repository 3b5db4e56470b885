// Bad inputs to the model, KV cache and step calls are NativeErrors whose message names the value
// (never a crash), and the model keeps working afterwards. (Bad sampling values fail only their row:
// bad_sampling_rows.test.ts.)
import { describe, expect, test } from "bun:test";
import { native, type StepBatch } from "../../ffi/native.ts";
import { NativeError } from "../../lib/core/errors.ts";
import { createRandomModel, randomWeights, setWeights, testSeed, tinyConfig } from "../helpers/random_model.ts";
import { buildStep } from "../helpers/step_builder.ts";

const LP_ERR_INVALID = -1, LP_ERR_STATE = -7;

function nativeError(fn: () => void): NativeError {
  try {
    fn();
  } catch (e) {
    if (e instanceof NativeError) return e;
    throw e;
  }
  throw new Error("expected a NativeError, nothing was thrown");
}

describe(`bad inputs (${native().backend} backend)`, () => {
  const seed = testSeed();
  const { config, model } = createRandomModel(native(), {
    arch: "qwen3",
    tie: false,
    seed,
    maxNumTokens: 64,
    maxNumSeqs: 8,
  });
  const kv = model.createKvCache(4, 16);
  const good = () => buildStep([{ tokens: [1, 2, 3, 4, 5], cached: 0, blockTable: [2] }], 16);

  const stepCases: [string, (b: StepBatch) => void, RegExp][] = [
    ["token id >= vocab", (b) => (b.tokenIds[2] = config.vocabSize), new RegExp(`token id ${config.vocabSize}\\b`)],
    ["negative token id", (b) => (b.tokenIds[0] = -4), /token id -4\b/],
    ["slot out of range", (b) => (b.slotMapping[1] = 9999), /slot 9999\b/],
    [
      "slot not where the block table puts the token",
      (b) => (b.slotMapping[1] = 3 * 16 + 1),
      /slot_mapping 49, but the block table puts it at slot 33/,
    ],
    ["block id out of range", (b) => (b.blockTables[0] = 77), /block id 77\b/],
    ["context_len < query_len", (b) => (b.contextLens[0] = 3), /context_len 3 < query_len 5/],
    ["query_start past num_tokens", (b) => (b.queryStart[1] = 6), /query_start\[num_seqs=1\]=6/],
    ["sample_index out of range", (b) => (b.sampleIndex[0] = 5), /sample_index 5\b/],
  ];
  for (const [what, spoil, message] of stepCases) {
    test(`step: ${what}`, () => {
      const b = good();
      spoil(b);
      const e = nativeError(() => model.step(kv, b));
      expect(e.message).toMatch(message);
      expect(e.status).toBe(LP_ERR_INVALID);
    });
  }

  test("step: num_tokens over the finalize() max", () => {
    const tokens = Array.from({ length: 65 }, (_, i) => 1 + (i % 7));
    const b = buildStep([{ tokens, cached: 0, blockTable: [0, 1, 2, 3, 0] }], 16);
    const e = nativeError(() => model.step(kv, b));
    expect(e.message).toMatch(/num_tokens=65 exceeds max_num_tokens=64/);
    expect(e.status).toBe(LP_ERR_INVALID);
  });

  // The C side cannot see an array's length: a count past an array's end must stop in TypeScript.
  const shortArrays: [string, (b: StepBatch) => void, RegExp][] = [
    ["num_tokens past tokenIds", (b) => (b.numTokens = 6), /StepBatch\.tokenIds has 5 elements; the counts need 6/],
    ["num_seqs past queryStart", (b) => (b.numSeqs = 2), /StepBatch\.queryStart has 2 elements; the counts need 3/],
    [
      "max_blocks_per_seq past blockTables",
      (b) => (b.maxBlocksPerSeq = 3),
      /StepBatch\.blockTables has 1 elements; the counts need 3/,
    ],
    ["num_rows past sampleIndex", (b) => (b.numRows = 2), /StepBatch\.sampleIndex has 1 elements; the counts need 2/],
    [
      "an outLogits shorter than num_rows x vocab",
      (b) => (b.outLogits = new Float32Array(config.vocabSize - 1)),
      /StepBatch\.outLogits has \d+ elements/,
    ],
    ["a negative count", (b) => (b.numRows = -1), /StepBatch\.numRows must be an int32 >= 0, got -1/],
  ];
  for (const [what, spoil, message] of shortArrays) {
    test(`step: ${what} is a RangeError naming the field, before any native call`, () => {
      const b = good();
      spoil(b);
      expect(() => model.step(kv, b)).toThrow(RangeError);
      expect(() => model.stepLaunch(kv, b)).toThrow(message);
    });
  }

  test("step: more rows than max_num_seqs", () => {
    const rows = Array.from({ length: 9 }, () => ({ token: 4 }));
    const b = buildStep([{ tokens: [1, 2, 3, 4, 5], cached: 0, blockTable: [2] }], 16, { rows });
    expect(nativeError(() => model.step(kv, b)).message).toMatch(/num_rows=9 exceeds max_num_seqs=8/);
  });

  test("the model still works after the errors", () => {
    const b = good();
    model.step(kv, b);
    expect(b.outTokens[0]!).toBeGreaterThanOrEqual(0);
    expect(b.outTokens[0]!).toBeLessThan(config.vocabSize);
  });

  test("weights: wrong numel, bad layer, q_norm on Llama", () => {
    const w = new Float32Array(10);
    expect(nativeError(() => model.setWeight(0, "q", "f32", w, 10)).message).toMatch(/numel 10, expected 4096/);
    expect(nativeError(() => model.setWeight(5, "q", "f32", w, 10)).message).toMatch(/layer 5 out of range/);
    expect(nativeError(() => model.setWeight(0, "embed", "f32", w, 10)).message).toMatch(/layer must be -1, got 0/);
    const llama = native().createModel(tinyConfig({ arch: "llama", tie: true, seed }));
    expect(nativeError(() => llama.setWeight(0, "qNorm", "f32", new Float32Array(16), 16)).message).toMatch(
      /q_norm exists only for Qwen3/,
    );
    llama.dispose();
  });

  test("finalize names the first missing weight; step before finalize is a state error", () => {
    const c = tinyConfig({ arch: "qwen3", tie: false, seed });
    const w = randomWeights(c, seed);
    w.layers[1]!.kNorm = null;
    const m = native().createModel(c);
    setWeights(m, w);
    const e = nativeError(() => m.finalize(16, 4));
    expect(e.message).toContain("missing weight layer 1 k_norm");
    expect(e.status).toBe(LP_ERR_STATE);
    using kv2 = m.createKvCache(2, 16);
    const s = nativeError(() => m.step(kv2, good()));
    expect(s.status).toBe(LP_ERR_STATE);
    expect(s.message).toContain("finalize");
    m.dispose();

    const untied = native().createModel(c);
    expect(nativeError(() => untied.finalize(16, 4)).message).toContain("missing weight embed");
    untied.dispose();
  });

  test("KV cache: bad sizes and block ids", () => {
    expect(nativeError(() => model.createKvCache(4, 0)).message).toMatch(/block_size=0/);
    expect(nativeError(() => kv.gather(Int32Array.of(1, 12))).message).toMatch(/block id 12 \(index 1\)/);
    const buf = new Uint8Array(kv.blockBytes);
    expect(nativeError(() => kv.scatter(Int32Array.of(-1), buf)).message).toMatch(/block id -1\b/);
  });

  test("config: heads not a multiple of kv heads", () => {
    const c = { ...tinyConfig({ arch: "qwen3", tie: false, seed }), numHeads: 3 };
    expect(nativeError(() => native().createModel(c)).message).toMatch(/num_heads=3 .*num_kv_heads=2/);
  });

  if (native().backend === "cpu") {
    test("a handle of the wrong kind is an error, not a crash", () => {
      const status = native().symbols.lp_model_finalize(kv.handle, 4, 4);
      expect(status).toBe(LP_ERR_INVALID);
      expect(native().lastError()).toContain("not a live CPU model");
    });
  }
});
