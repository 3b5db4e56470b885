// Loading synthetic model directories into the native (CPU) library: every weight lands in its
// slot (logits equal an independent float64 reference computed from the files), bf16/f16/f32
// files all load, progress reaches the total, and bad checkpoints fail before any hand-over.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Native } from "../../../ffi/native.ts";
import { ModelFormatError } from "../../../lib/core/errors.ts";
import { readModelSpec } from "../../../lib/model/config.ts";
import { decodeFloats, type FloatDType } from "../../../lib/model/float_formats.ts";
import { loadModel, planWeightLoad } from "../../../lib/model/loader.ts";
import { presetConfig } from "../../../lib/model/presets.ts";
import { openModelWeights } from "../../../lib/model/shards.ts";
import { writeSyntheticModel } from "../../../lib/model/synthetic_writer.ts";
import { referenceLogits, type ReferenceWeights, relL2 } from "../../helpers/reference_model.ts";
import { buildStep, rowLogits } from "../../helpers/step_builder.ts";
import { tinyModelDir } from "../../helpers/tiny_model_dir.ts";

const native = new Native({ backend: "cpu" });
const scratch = mkdtempSync(join(tmpdir(), "lmpool-load-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The directory's weights decoded to float32, in the reference model's layout. */
function weightsFromFiles(dir: string): ReferenceWeights {
  const spec = readModelSpec(dir);
  const byName = new Map(
    planWeightLoad(spec, openModelWeights(dir)).map((
      p,
    ) => [p.slot.name, decodeFloats(p.tensor.bytes, p.tensor.dtype as FloatDType)]),
  );
  const get = (name: string) => byName.get(name) ?? null;
  const layer = (i: number, suffix: string) => get(`model.layers.${i}.${suffix}`)!;
  return {
    embed: get("model.embed_tokens.weight")!,
    finalNorm: get("model.norm.weight")!,
    lmHead: get("lm_head.weight"),
    layers: Array.from({ length: spec.native.numLayers }, (_, i) => ({
      inputNorm: layer(i, "input_layernorm.weight"),
      q: layer(i, "self_attn.q_proj.weight"),
      k: layer(i, "self_attn.k_proj.weight"),
      v: layer(i, "self_attn.v_proj.weight"),
      o: layer(i, "self_attn.o_proj.weight"),
      qNorm: get(`model.layers.${i}.self_attn.q_norm.weight`),
      kNorm: get(`model.layers.${i}.self_attn.k_norm.weight`),
      postNorm: layer(i, "post_attention_layernorm.weight"),
      gate: layer(i, "mlp.gate_proj.weight"),
      up: layer(i, "mlp.up_proj.weight"),
      down: layer(i, "mlp.down_proj.weight"),
    })),
  };
}

async function expectLogitsMatchFiles(dir: string, tokens: number[]): Promise<void> {
  const progress: [number, number, string][] = [];
  const { spec, model } = await loadModel(dir, native, {
    maxNumTokens: 64,
    maxNumSeqs: 8,
    onProgress: (a, b, n) => progress.push([a, b, n]),
  });
  try {
    const last = progress.at(-1)!;
    expect(last[0]).toBe(last[1]);
    expect(progress.length).toBe(planWeightLoad(spec, openModelWeights(dir)).length);
    expect(model.weightBytes()).toBeGreaterThan(0);
    const vocab = spec.native.vocabSize;
    using kv = model.createKvCache(4, 16);
    const b = buildStep([{ tokens, cached: 0, blockTable: [2] }], 16, {
      rows: tokens.map((_, token) => ({ token })),
      vocab,
    });
    model.step(kv, b);
    const ref = referenceLogits(spec.native, weightsFromFiles(dir), tokens);
    // A weight in the wrong slot, at the wrong offset or misread changes logits by far more.
    tokens.forEach((_, r) => expect(relL2(rowLogits(b, r, vocab), ref[r]!)).toBeLessThan(1e-4));
  } finally {
    model.dispose();
  }
}

test("the tiny Qwen3 model (bf16, tied) loads and computes from its files' weights", async () => {
  await expectLogitsMatchFiles(await tinyModelDir("tiny"), [9707, 11, 1879, 0]);
});

test("the tiny Llama model (llama3 RoPE, untied, sharded f16) loads and computes from its files' weights", async () => {
  const dir = join(scratch, "llama-f16");
  writeSyntheticModel(dir, {
    config: { ...presetConfig("tiny-llama"), vocab_size: 2000 },
    dtype: "float16",
    seed: 5,
    maxShardBytes: 100_000,
  });
  await expectLogitsMatchFiles(dir, [17, 1999, 3, 3, 256]);
});

test("an f32 checkpoint loads too", async () => {
  const dir = join(scratch, "qwen-f32");
  writeSyntheticModel(dir, { config: { ...presetConfig("tiny"), vocab_size: 1000 }, dtype: "float32", seed: 9 });
  await expectLogitsMatchFiles(dir, [5, 6, 7]);
});

test("a checkpoint missing tensors fails naming them; bad options are RangeErrors", async () => {
  const dir = join(scratch, "broken");
  writeSyntheticModel(dir, { config: { ...presetConfig("tiny-llama"), vocab_size: 300 }, maxShardBytes: 50_000 });
  await expect(loadModel(dir, native, { maxNumTokens: 0, maxNumSeqs: 1 })).rejects.toThrow(
    /maxNumTokens must be a positive integer, got 0/,
  );
  unlinkSync(join(dir, "model.safetensors.index.json"));
  await expect(loadModel(dir, native, { maxNumTokens: 8, maxNumSeqs: 1 })).rejects.toThrow(ModelFormatError);
});
