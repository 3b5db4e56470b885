// Weight hand-over: bf16, f16 and f32 inputs of the same values give the same model, and
// weightBytes() counts what the backend stores (tied models hold no separate LM head).
import { describe, expect, test } from "bun:test";
import { native } from "../../ffi/native.ts";
import { f32ToF16 } from "../../lib/model/float_formats.ts";
import { f32ToBf16, rng } from "../helpers/bf16.ts";
import { createRandomModel, randomWeights, setWeights, testSeed, tinyConfig } from "../helpers/random_model.ts";
import { buildStep } from "../helpers/step_builder.ts";

const ELEM_BYTES = native().backend === "cpu" ? 4 : 2;

describe(`model weights (${native().backend} backend)`, () => {
  test("bf16, f16 and f32 inputs of the same values give identical logits", () => {
    const seed = testSeed();
    const rand = rng(seed);
    const c = tinyConfig({ arch: "llama", tie: true, seed });
    const w = randomWeights(c, seed);
    // Values k/64 are exact in bf16, f16 and f32.
    w.embed = Float32Array.from(w.embed, () => Math.round((rand() * 2 - 1) * 64) / 64);
    const V = c.vocabSize;
    const logitsWith = (dtype: "bf16" | "f16" | "f32") => {
      const m = native().createModel(c);
      setWeights(m, w);
      const data = dtype === "f32" ? w.embed : Uint16Array.from(w.embed, dtype === "f16" ? f32ToF16 : f32ToBf16);
      m.setWeight(-1, "embed", dtype, data, w.embed.length);
      m.finalize(16, 2);
      using kv = m.createKvCache(2, 16);
      const b = buildStep([{ tokens: [3, 1, 4, 1, 5, 9], cached: 0, blockTable: [1] }], 16, { vocab: V });
      m.step(kv, b);
      m.dispose();
      return b.outLogits!;
    };
    const f32 = logitsWith("f32");
    expect(logitsWith("bf16")).toEqual(f32);
    expect(logitsWith("f16")).toEqual(f32);
  });

  test("weightBytes counts every stored weight", () => {
    for (const tie of [false, true]) {
      const { config: c, model } = createRandomModel(native(), { arch: "qwen3", tie, seed: 7 });
      const H = c.hiddenSize, I = c.intermediateSize, D = c.headDim;
      const perLayer = 2 * H + (c.numHeads + 2 * c.numKvHeads) * D * H + H * c.numHeads * D + 2 * D + 3 * I * H;
      const numel = c.vocabSize * H * (tie ? 1 : 2) + H + c.numLayers * perLayer;
      expect(model.weightBytes()).toBe(numel * ELEM_BYTES);
      model.dispose();
    }
  });
});
