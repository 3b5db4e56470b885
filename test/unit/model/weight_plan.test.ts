// HF tensor names <-> native slots, expected shapes, and the loader's pre-flight check that names
// every missing, misshaped or wrongly typed tensor before anything reaches the native library.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelFormatError } from "../../../lib/core/errors.ts";
import { type ModelSpec, parseModelSpec } from "../../../lib/model/config.ts";
import { planWeightLoad } from "../../../lib/model/loader.ts";
import { presetConfig } from "../../../lib/model/presets.ts";
import { type TensorSource, writeSafetensorsFile } from "../../../lib/model/safetensors_writer.ts";
import { openModelWeights } from "../../../lib/model/shards.ts";
import { parseWeightName, requiredWeights, weightName, weightShape } from "../../../lib/model/weight_names.ts";

const tiny = parseModelSpec(presetConfig("tiny"));
const tinyLlama = parseModelSpec(presetConfig("tiny-llama"));

test("names map to slots and back", () => {
  expect(weightName(-1, "embed")).toBe("model.embed_tokens.weight");
  expect(weightName(3, "kNorm")).toBe("model.layers.3.self_attn.k_norm.weight");
  expect(parseWeightName("model.layers.12.mlp.down_proj.weight")).toEqual({ layer: 12, kind: "down" });
  expect(parseWeightName("lm_head.weight")).toEqual({ layer: -1, kind: "lmHead" });
  expect(parseWeightName("model.layers.0.self_attn.rotary_emb.inv_freq")).toBeNull();
  expect(() => weightName(0, "embed")).toThrow(/layer must be -1, got 0/);
  expect(() => weightName(-1, "q")).toThrow(/layer >= 0, got -1/);
  for (const slot of requiredWeights(tinyLlama.native)) {
    expect(parseWeightName(slot.name)).toEqual({ layer: slot.layer, kind: slot.kind });
  }
});

test("required weights: q/k norm only for Qwen3, lm_head only when untied, HF shapes", () => {
  const q = requiredWeights(tiny.native);
  const l = requiredWeights(tinyLlama.native);
  expect(q.length).toBe(1 + 2 * 11 + 1); // embed, 11 per layer, final norm; tied
  expect(l.length).toBe(1 + 2 * 9 + 2); // no q/k norm; lm_head
  expect(q.some((s) => s.kind === "lmHead")).toBe(false);
  expect(l.some((s) => s.kind === "qNorm")).toBe(false);
  const c = tiny.native; // hidden 64, heads 4 x 16, kv 2 x 16, intermediate 128
  expect(weightShape(c, "q")).toEqual([64, 64]);
  expect(weightShape(c, "k")).toEqual([32, 64]);
  expect(weightShape(c, "o")).toEqual([64, 64]);
  expect(weightShape(c, "down")).toEqual([64, 128]);
  expect(weightShape(c, "gate")).toEqual([128, 64]);
  expect(weightShape(c, "qNorm")).toEqual([16]);
  expect(weightShape(c, "embed")).toEqual([151936, 64]);
});

/** A directory whose single shard holds every tensor of `spec`, edited by `edit`. */
function checkpoint(
  spec: ModelSpec,
  edit: (tensors: TensorSource[]) => TensorSource[],
): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "lmpool-plan-"));
  const tensors: TensorSource[] = requiredWeights(spec.native).map((s) => ({
    name: s.name,
    dtype: "BF16",
    shape: s.shape,
    data: (emit) => emit(new Uint8Array(s.shape.reduce((a, b) => a * b, 1) * 2)),
  }));
  writeSafetensorsFile(join(dir, "model.safetensors"), edit(tensors));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

function planError(spec: ModelSpec, edit: (t: TensorSource[]) => TensorSource[]): string {
  const { dir, cleanup } = checkpoint(spec, edit);
  try {
    planWeightLoad(spec, openModelWeights(dir));
  } catch (e) {
    expect(e).toBeInstanceOf(ModelFormatError);
    return (e as Error).message;
  } finally {
    cleanup();
  }
  throw new Error("expected planWeightLoad to throw");
}

test("a complete checkpoint plans every slot; extra tensors are ignored", () => {
  const { dir, cleanup } = checkpoint(
    tinyLlama,
    (
      t,
    ) => [...t, {
      name: "model.layers.0.self_attn.rotary_emb.inv_freq",
      dtype: "F32",
      shape: [8],
      data: new Uint8Array(32),
    }],
  );
  try {
    const plan = planWeightLoad(tinyLlama, openModelWeights(dir));
    expect(plan.map((p) => p.slot.name)).toEqual(requiredWeights(tinyLlama.native).map((s) => s.name));
    expect(plan.every((p) => p.dtype === "bf16" && p.tensor.numel === p.slot.shape.reduce((a, b) => a * b, 1))).toBe(
      true,
    );
  } finally {
    cleanup();
  }
});

test("every missing tensor is named", () => {
  const msg = planError(tiny, (t) => t.filter((x) => !x.name.includes("k_norm") && x.name !== "model.norm.weight"));
  expect(msg).toContain("missing tensors");
  expect(msg).toContain("model.layers.0.self_attn.k_norm.weight");
  expect(msg).toContain("model.layers.1.self_attn.k_norm.weight");
  expect(msg).toContain("model.norm.weight");
  const untied = planError(tinyLlama, (t) => t.filter((x) => x.name !== "lm_head.weight"));
  expect(untied).toContain("lm_head.weight");
  expect(untied).toContain("tie_word_embeddings is false");
});

test("every misshaped or unsupported-dtype tensor is named with what was expected", () => {
  const msg = planError(tiny, (t) =>
    t.map((x) => {
      if (x.name === "model.layers.1.mlp.up_proj.weight") {
        return { ...x, shape: [64, 128], data: new Uint8Array(64 * 128 * 2) };
      }
      if (x.name === "model.layers.0.self_attn.v_proj.weight") {
        return { ...x, shape: [32, 64, 1], data: new Uint8Array(32 * 64 * 2) };
      }
      if (x.name === "model.layers.0.input_layernorm.weight") {
        return { ...x, dtype: "F64", data: new Uint8Array(64 * 8) };
      }
      return x;
    }));
  expect(msg).toContain("model.layers.1.mlp.up_proj.weight has shape [64, 128], expected [128, 64]");
  expect(msg).toContain("model.layers.0.self_attn.v_proj.weight has shape [32, 64, 1], expected [32, 64]");
  expect(msg).toContain("model.layers.0.input_layernorm.weight has dtype F64; supported: BF16, F16, F32");
});
