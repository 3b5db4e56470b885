/**
 * Writes a Hugging Face model directory with deterministic random weights (N(0, 0.02) like HF's
 * init, RMSNorm scales 1.0) for a preset or a given config, plus the real Qwen3 tokenizer. Tensors
 * are generated while being written, shard by shard, so even the 1.7B shape needs little memory.
 * @module
 */
import { copyFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { makeDir, writeText } from "../runtime/files.ts";
import { type ModelSpec, parseModelSpec } from "./config.ts";
import type { FloatDType } from "./float_formats.ts";
import { type HfConfigJson, presetConfig, type PresetName, QWEN3_ENDOFTEXT_ID } from "./presets.ts";
import { qwen3TokenizerFiles } from "./qwen3_tokenizer_files.ts";
import { constantTensor, normalTensor } from "./random_weights.ts";
import { tensorByteLength, type TensorSource, writeSafetensorsFile } from "./safetensors_writer.ts";
import { INDEX_FILE, SINGLE_FILE } from "./shards.ts";
import { isNormKind, requiredWeights } from "./weight_names.ts";

/** Storage dtypes of synthetic weights (config.json torch_dtype names). */
export type SyntheticDType = "bfloat16" | "float16" | "float32";

const SAFETENSORS_DTYPE: Readonly<Record<SyntheticDType, FloatDType>> = {
  bfloat16: "BF16",
  float16: "F16",
  float32: "F32",
};

/** Options of writeSyntheticModel: exactly one of preset or config. */
export interface SyntheticModelOptions {
  preset?: PresetName;
  config?: HfConfigJson;
  /** Seed of the weights (default 0); the same seed writes the same bytes. */
  seed?: number;
  dtype?: SyntheticDType;
  /** Start a new shard before exceeding this many bytes (default 2 GiB; one tensor never splits). */
  maxShardBytes?: number;
  onProgress?: (writtenBytes: number, totalBytes: number, tensorName: string) => void;
}

/** What writeSyntheticModel wrote. */
export interface SyntheticModelInfo {
  readonly dir: string;
  readonly spec: ModelSpec;
  /** safetensors file names, in order. */
  readonly shards: readonly string[];
  readonly weightBytes: number;
}

/** Writes a synthetic model into `dir`, which must be empty or not exist. */
export function writeSyntheticModel(dir: string, options: SyntheticModelOptions): SyntheticModelInfo {
  if ((options.preset === undefined) === (options.config === undefined)) {
    throw new TypeError("writeSyntheticModel needs exactly one of `preset` or `config`");
  }
  const dtype = options.dtype ?? "bfloat16";
  const stDtype = SAFETENSORS_DTYPE[dtype];
  if (!stDtype) {
    throw new RangeError(
      `dtype must be one of ${Object.keys(SAFETENSORS_DTYPE).join(", ")}, got ${JSON.stringify(dtype)}`,
    );
  }
  const seed = options.seed ?? 0;
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`seed must be a non-negative integer, got ${seed}`);
  const maxShardBytes = options.maxShardBytes ?? 2 * 1024 ** 3;
  if (!(maxShardBytes > 0)) throw new RangeError(`maxShardBytes must be positive, got ${maxShardBytes}`);
  makeDir(dir);
  const existing = readdirSync(dir);
  if (existing.length > 0) {
    throw new RangeError(
      `${dir} is not empty (holds ${existing.slice(0, 3).join(", ")}${existing.length > 3 ? ", ..." : ""})`,
    );
  }

  const config: HfConfigJson = {
    ...(options.config ?? presetConfig(options.preset!)),
    torch_dtype: dtype,
    _name_or_path: `lmpool-synthetic/${options.preset ?? "custom"}`,
  };
  const spec = parseModelSpec(config, { name: config._name_or_path as string });
  const std = typeof config.initializer_range === "number" ? config.initializer_range : 0.02;
  const tensors: TensorSource[] = requiredWeights(spec.native).map((slot) => {
    const numel = slot.shape.reduce((a, b) => a * b, 1);
    const data = isNormKind(slot.kind)
      ? constantTensor(1, stDtype, numel)
      : normalTensor(seed, slot.name, stDtype, numel, std);
    return { name: slot.name, dtype: stDtype, shape: slot.shape, data };
  });
  const shards = planShards(tensors, maxShardBytes);
  const weightBytes = tensors.reduce((s, t) => s + tensorByteLength(t), 0);
  const names = shards.length === 1
    ? [SINGLE_FILE]
    : shards.map((_, i) => `model-${pad5(i + 1)}-of-${pad5(shards.length)}.safetensors`);

  let written = 0;
  const onTensor = (name: string, bytes: number) => {
    written += bytes;
    options.onProgress?.(written, weightBytes, name);
  };
  shards.forEach((shard, i) => writeSafetensorsFile(join(dir, names[i]!), shard, { onTensor }));
  if (shards.length > 1) {
    const weightMap: Record<string, string> = {};
    shards.forEach((shard, i) => shard.forEach((t) => (weightMap[t.name] = names[i]!)));
    writeText(
      join(dir, INDEX_FILE),
      JSON.stringify({ metadata: { total_size: weightBytes }, weight_map: weightMap }, null, 2),
    );
  }
  writeText(join(dir, "config.json"), JSON.stringify(config, null, 2));
  // As upstream Qwen3: generation also ends at <|endoftext|>, not only at the chat EOS.
  const eos = [...new Set([...spec.eosTokenIds, QWEN3_ENDOFTEXT_ID])];
  writeText(
    join(dir, "generation_config.json"),
    JSON.stringify({ bos_token_id: spec.bosTokenId, eos_token_id: eos, pad_token_id: QWEN3_ENDOFTEXT_ID }, null, 2),
  );
  const tok = qwen3TokenizerFiles();
  copyFileSync(tok.tokenizerJson, join(dir, "tokenizer.json"));
  copyFileSync(tok.tokenizerConfigJson, join(dir, "tokenizer_config.json"));
  return { dir, spec, shards: names, weightBytes };
}

/** Greedy split into shards of at most `maxBytes` (a larger tensor gets a shard of its own). */
function planShards(tensors: TensorSource[], maxBytes: number): TensorSource[][] {
  const shards: TensorSource[][] = [[]];
  let size = 0;
  for (const t of tensors) {
    const bytes = tensorByteLength(t);
    if (size > 0 && size + bytes > maxBytes) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1]!.push(t);
    size += bytes;
  }
  return shards;
}

function pad5(n: number): string {
  return String(n).padStart(5, "0");
}
