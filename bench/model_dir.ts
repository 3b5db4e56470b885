/**
 * The model directory of a benchmark's `--model` value (a preset name such as tiny or qwen3-0.6b
 * is generated once into the synthetic-model cache: real shapes, random weights; anything else is
 * a Hugging Face model directory), and the shape facts results record about it.
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ensureModel } from "../lib/model/demo_model.ts";
import { isPresetName } from "../lib/model/presets.ts";

/** The directory of `model` (a preset name or a path). */
export async function resolveModelDir(model: string): Promise<string> {
  return isPresetName(model) ? ensureModel(model) : model;
}

/** The directory and the shape fields of its config.json, for results metadata. */
export function readModelConfig(dir: string): Record<string, unknown> {
  const c = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  const keys = [
    "architectures",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "torch_dtype",
  ];
  return { dir, ...Object.fromEntries(keys.filter((k) => k in c).map((k) => [k, c[k]])) };
}
