/**
 * Hugging Face config.json (+ generation_config.json) -> ModelSpec: the native model shape plus
 * the facts the engine needs (context length, EOS/BOS ids, dtype, name). Supports
 * Qwen3ForCausalLM and LlamaForCausalLM, with default or llama3 RoPE scaling.
 * @module
 */
import { basename, join } from "node:path";
import { z } from "zod";
import type { NativeModelConfig } from "../../ffi/model_config.ts";
import { ModelFormatError } from "../core/errors.ts";
import { pathExists, readText } from "../runtime/files.ts";

/** Architectures (config.json "architectures"[0]) LMPool runs, and their native arch. */
export const SUPPORTED_ARCHITECTURES = { Qwen3ForCausalLM: "qwen3", LlamaForCausalLM: "llama" } as const;
/** One of SUPPORTED_ARCHITECTURES' keys. */
export type SupportedArchitecture = keyof typeof SUPPORTED_ARCHITECTURES;

/** What LMPool knows about a model from its directory's config files. */
export interface ModelSpec {
  readonly architecture: SupportedArchitecture;
  readonly native: NativeModelConfig;
  /** max_position_embeddings: the longest prompt + output. */
  readonly maxModelLen: number;
  /** EOS ids of config.json and generation_config.json (union, config first). */
  readonly eosTokenIds: readonly number[];
  readonly bosTokenId: number | null;
  /** torch_dtype (or transformers v5 "dtype"), e.g. "bfloat16"; null when absent. */
  readonly torchDtype: string | null;
  /** A display name: _name_or_path when it looks like a hub id, else the directory name. */
  readonly name: string;
}

const positiveInt = z.number().int().positive();
const tokenIds = z.union([z.number().int().nonnegative(), z.array(z.number().int().nonnegative())]).nullish();
const ropeScalingSchema = z.looseObject({
  rope_type: z.string().optional(),
  type: z.string().optional(),
  rope_theta: z.number().positive().optional(),
  factor: z.number().positive().optional(),
  low_freq_factor: z.number().positive().optional(),
  high_freq_factor: z.number().positive().optional(),
  original_max_position_embeddings: positiveInt.optional(),
}).nullish();

const hfConfigSchema = z.looseObject({
  architectures: z.array(z.string()).min(1),
  vocab_size: positiveInt,
  hidden_size: positiveInt,
  intermediate_size: positiveInt,
  num_hidden_layers: positiveInt,
  num_attention_heads: positiveInt,
  num_key_value_heads: positiveInt.nullish(),
  head_dim: positiveInt.nullish(),
  max_position_embeddings: positiveInt,
  rms_norm_eps: z.number().positive().optional(),
  rope_theta: z.number().positive().optional(),
  rope_scaling: ropeScalingSchema,
  // transformers v5 folds rope_theta and the scaling into one object.
  rope_parameters: ropeScalingSchema,
  tie_word_embeddings: z.boolean().optional(),
  hidden_act: z.string().optional(),
  attention_bias: z.boolean().optional(),
  mlp_bias: z.boolean().optional(),
  use_sliding_window: z.boolean().optional(),
  bos_token_id: tokenIds,
  eos_token_id: tokenIds,
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  _name_or_path: z.string().optional(),
});

const generationConfigSchema = z.looseObject({ bos_token_id: tokenIds, eos_token_id: tokenIds });

type HfConfig = z.infer<typeof hfConfigSchema>;

/** Parses config.json (and optionally generation_config.json) objects into a ModelSpec. */
export function parseModelSpec(
  config: unknown,
  options: { generationConfig?: unknown; name?: string; source?: string } = {},
): ModelSpec {
  const source = options.source ?? "config.json";
  const architecture = checkArchitecture(config, source);
  const c = validate(hfConfigSchema, config, source);
  const gen = options.generationConfig === undefined
    ? {}
    : validate(generationConfigSchema, options.generationConfig, "generation_config.json");
  checkSupportedFeatures(c, source);
  const numHeads = c.num_attention_heads;
  const numKvHeads = c.num_key_value_heads ?? numHeads;
  if (numHeads % numKvHeads !== 0) {
    throw new ModelFormatError(
      `${source}: num_attention_heads=${numHeads} is not a multiple of num_key_value_heads=${numKvHeads}`,
    );
  }
  if (c.head_dim == null && c.hidden_size % numHeads !== 0) {
    throw new ModelFormatError(
      `${source}: hidden_size=${c.hidden_size} is not divisible by num_attention_heads=${numHeads} and head_dim is not given`,
    );
  }
  const headDim = c.head_dim ?? c.hidden_size / numHeads;
  if (headDim % 2 !== 0) throw new ModelFormatError(`${source}: head_dim=${headDim} must be even for RoPE`);
  const rope = parseRope(c, source);
  const native: NativeModelConfig = {
    arch: SUPPORTED_ARCHITECTURES[architecture],
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numLayers: c.num_hidden_layers,
    numHeads,
    numKvHeads,
    headDim,
    tieWordEmbeddings: c.tie_word_embeddings ?? false,
    maxPosition: c.max_position_embeddings,
    rmsNormEps: c.rms_norm_eps ?? 1e-6,
    ...rope,
  };
  const eos = [...idList(c.eos_token_id), ...idList(gen.eos_token_id)];
  return {
    architecture,
    native,
    maxModelLen: c.max_position_embeddings,
    eosTokenIds: [...new Set(eos)],
    bosTokenId: idList(c.bos_token_id)[0] ?? idList(gen.bos_token_id)[0] ?? null,
    torchDtype: c.torch_dtype ?? c.dtype ?? null,
    name: options.name ?? hubName(c._name_or_path) ?? "model",
  };
}

/** Reads `dir`/config.json and, when present, `dir`/generation_config.json. */
export function readModelSpec(dir: string): ModelSpec {
  const configPath = join(dir, "config.json");
  if (!pathExists(configPath)) {
    throw new ModelFormatError(`${dir}: no config.json (expected a Hugging Face model directory)`);
  }
  const config = readJson(configPath);
  const genPath = join(dir, "generation_config.json");
  const generationConfig = pathExists(genPath) ? readJson(genPath) : undefined;
  const name = hubName((config as { _name_or_path?: unknown })?._name_or_path) ?? basename(dir.replace(/\/+$/, ""));
  return parseModelSpec(config, { generationConfig, name, source: configPath });
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readText(path));
  } catch (e) {
    throw new ModelFormatError(`${path}: not valid JSON (${(e as Error).message})`, { cause: e });
  }
}

function checkArchitecture(config: unknown, source: string): SupportedArchitecture {
  const supported = Object.keys(SUPPORTED_ARCHITECTURES).join(", ");
  const archs = (config as { architectures?: unknown } | null)?.architectures;
  if (!Array.isArray(archs) || typeof archs[0] !== "string") {
    throw new ModelFormatError(
      `${source}: "architectures" must be a non-empty list of names, got ${
        JSON.stringify(archs)
      }; supported: ${supported}`,
    );
  }
  const arch = archs[0];
  if (!(arch in SUPPORTED_ARCHITECTURES)) {
    throw new ModelFormatError(`${source}: unsupported architecture ${JSON.stringify(arch)}; supported: ${supported}`);
  }
  return arch as SupportedArchitecture;
}

function validate<T extends z.ZodType>(schema: T, value: unknown, source: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const problems = r.error.issues.map((issue) => {
    const path = issue.path.join(".");
    const got = issue.path.reduce<unknown>(
      (v, k) => (v as Record<PropertyKey, unknown> | undefined)?.[k as PropertyKey],
      value,
    );
    return `"${path}" = ${JSON.stringify(got) ?? "undefined"}: ${issue.message}`;
  });
  throw new ModelFormatError(`${source}: invalid field${problems.length > 1 ? "s" : ""}: ${problems.join("; ")}`);
}

function checkSupportedFeatures(c: HfConfig, source: string): void {
  const bad = (what: string) => {
    throw new ModelFormatError(`${source}: ${what} is not supported`);
  };
  if (c.hidden_act !== undefined && c.hidden_act !== "silu") {
    bad(`hidden_act=${JSON.stringify(c.hidden_act)} (only "silu")`);
  }
  if (c.attention_bias) bad("attention_bias=true");
  if (c.mlp_bias) bad("mlp_bias=true");
  if (c.use_sliding_window) bad("use_sliding_window=true");
}

type RopeFields = Pick<
  NativeModelConfig,
  "ropeType" | "ropeTheta" | "ropeFactor" | "ropeLowFreqFactor" | "ropeHighFreqFactor" | "ropeOriginalMaxPosition"
>;

function parseRope(c: HfConfig, source: string): RopeFields {
  const scaling = c.rope_scaling ?? c.rope_parameters ?? null;
  const theta = c.rope_theta ?? c.rope_parameters?.rope_theta ?? 10000;
  const type = scaling ? (scaling.rope_type ?? scaling.type ?? "default") : "default";
  const field = c.rope_scaling ? "rope_scaling" : "rope_parameters";
  if (type === "default") {
    return {
      ropeType: "default",
      ropeTheta: theta,
      ropeFactor: 1,
      ropeLowFreqFactor: 1,
      ropeHighFreqFactor: 1,
      ropeOriginalMaxPosition: c.max_position_embeddings,
    };
  }
  if (type !== "llama3") {
    throw new ModelFormatError(
      `${source}: ${field} type ${JSON.stringify(type)} is not supported (supported: "llama3", or none)`,
    );
  }
  const s = scaling!;
  const missing = (["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"] as const)
    .filter((k) => s[k] === undefined);
  if (missing.length > 0) throw new ModelFormatError(`${source}: llama3 ${field} lacks ${missing.join(", ")}`);
  if (s.high_freq_factor! <= s.low_freq_factor!) {
    throw new ModelFormatError(
      `${source}: llama3 ${field} high_freq_factor=${s.high_freq_factor} must exceed low_freq_factor=${s.low_freq_factor}`,
    );
  }
  return {
    ropeType: "llama3",
    ropeTheta: theta,
    ropeFactor: s.factor!,
    ropeLowFreqFactor: s.low_freq_factor!,
    ropeHighFreqFactor: s.high_freq_factor!,
    ropeOriginalMaxPosition: s.original_max_position_embeddings!,
  };
}

function idList(v: number | number[] | null | undefined): number[] {
  if (v == null) return [];
  return Array.isArray(v) ? v : [v];
}

function hubName(v: unknown): string | undefined {
  // "Qwen/Qwen3-0.6B" names the model; a local path ("/x/y", "./m") does not.
  if (typeof v !== "string" || v === "" || v.startsWith("/") || v.startsWith(".")) return undefined;
  return v;
}
