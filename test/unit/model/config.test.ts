// config.json parsing: Qwen3 and Llama (llama3 RoPE scaling), and errors that name the bad value.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelFormatError } from "../../../lib/core/errors.ts";
import { parseModelSpec, readModelSpec } from "../../../lib/model/config.ts";
import { presetConfig } from "../../../lib/model/presets.ts";

// Qwen/Qwen3-0.6B config.json as published.
const QWEN3_06B = {
  architectures: ["Qwen3ForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: "silu",
  hidden_size: 1024,
  initializer_range: 0.02,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: "qwen3",
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  transformers_version: "4.51.0",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

// meta-llama/Llama-3.2-1B config.json as published.
const LLAMA_32_1B = {
  architectures: ["LlamaForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 128000,
  eos_token_id: 128001,
  head_dim: 64,
  hidden_act: "silu",
  hidden_size: 2048,
  initializer_range: 0.02,
  intermediate_size: 8192,
  max_position_embeddings: 131072,
  mlp_bias: false,
  model_type: "llama",
  num_attention_heads: 32,
  num_hidden_layers: 16,
  num_key_value_heads: 8,
  pretraining_tp: 1,
  rms_norm_eps: 1e-5,
  rope_scaling: {
    factor: 32.0,
    high_freq_factor: 4.0,
    low_freq_factor: 1.0,
    original_max_position_embeddings: 8192,
    rope_type: "llama3",
  },
  rope_theta: 500000.0,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  use_cache: true,
  vocab_size: 128256,
};

function errorOf(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error");
}

test("Qwen3-0.6B config parses into the native shape", () => {
  const s = parseModelSpec(QWEN3_06B, { generationConfig: { eos_token_id: [151645, 151643], bos_token_id: 151643 } });
  expect(s.architecture).toBe("Qwen3ForCausalLM");
  expect(s.native).toEqual({
    arch: "qwen3",
    vocabSize: 151936,
    hiddenSize: 1024,
    intermediateSize: 3072,
    numLayers: 28,
    numHeads: 16,
    numKvHeads: 8,
    headDim: 128,
    tieWordEmbeddings: true,
    maxPosition: 40960,
    rmsNormEps: 1e-6,
    ropeType: "default",
    ropeTheta: 1000000,
    ropeFactor: 1,
    ropeLowFreqFactor: 1,
    ropeHighFreqFactor: 1,
    ropeOriginalMaxPosition: 40960,
  });
  expect(s.maxModelLen).toBe(40960);
  expect(s.eosTokenIds).toEqual([151645, 151643]);
  expect(s.bosTokenId).toBe(151643);
  expect(s.torchDtype).toBe("bfloat16");
});

test("Llama 3.2 config parses with llama3 RoPE scaling", () => {
  const s = parseModelSpec(LLAMA_32_1B, { name: "llama" });
  expect(s.architecture).toBe("LlamaForCausalLM");
  expect(s.native.arch).toBe("llama");
  expect(s.native.ropeType).toBe("llama3");
  expect(s.native.ropeTheta).toBe(500000);
  expect(s.native.ropeFactor).toBe(32);
  expect(s.native.ropeLowFreqFactor).toBe(1);
  expect(s.native.ropeHighFreqFactor).toBe(4);
  expect(s.native.ropeOriginalMaxPosition).toBe(8192);
  expect(s.native.headDim).toBe(64);
  expect(s.native.numKvHeads).toBe(8);
  expect(s.native.rmsNormEps).toBe(1e-5);
  expect(s.eosTokenIds).toEqual([128001]);
  expect(s.name).toBe("llama");
});

test("defaults: head_dim = hidden/heads, kv heads = heads, untied, theta 10000", () => {
  const c: Record<string, unknown> = { ...LLAMA_32_1B, rope_scaling: null };
  for (const k of ["head_dim", "num_key_value_heads", "tie_word_embeddings", "rope_theta"]) delete c[k];
  const s = parseModelSpec(c);
  expect(s.native.headDim).toBe(2048 / 32);
  expect(s.native.numKvHeads).toBe(32);
  expect(s.native.tieWordEmbeddings).toBe(false);
  expect(s.native.ropeTheta).toBe(10000);
});

test("transformers v5 rope_parameters are understood", () => {
  const c: Record<string, unknown> = {
    ...LLAMA_32_1B,
    rope_parameters: { ...LLAMA_32_1B.rope_scaling, rope_theta: 250000 },
  };
  delete c.rope_scaling;
  delete c.rope_theta;
  const s = parseModelSpec(c);
  expect(s.native.ropeType).toBe("llama3");
  expect(s.native.ropeTheta).toBe(250000);
});

test("an unknown architecture names it and the supported ones", () => {
  const e = errorOf(() => parseModelSpec({ ...QWEN3_06B, architectures: ["MistralForCausalLM"] }));
  expect(e).toBeInstanceOf(ModelFormatError);
  expect(e.message).toContain("MistralForCausalLM");
  expect(e.message).toContain("Qwen3ForCausalLM");
  expect(e.message).toContain("LlamaForCausalLM");
  expect(errorOf(() => parseModelSpec({ hidden_size: 3 })).message).toMatch(/architectures.*undefined/);
});

test("bad fields are named with their values", () => {
  const e = errorOf(() => parseModelSpec({ ...QWEN3_06B, num_attention_heads: -3, vocab_size: "big" }));
  expect(e).toBeInstanceOf(ModelFormatError);
  expect(e.message).toContain('"num_attention_heads" = -3');
  expect(e.message).toContain('"vocab_size" = "big"');
  const missing = errorOf(() => parseModelSpec({ ...QWEN3_06B, hidden_size: undefined }));
  expect(missing.message).toContain('"hidden_size" = undefined');
  expect(errorOf(() => parseModelSpec({ ...QWEN3_06B, num_key_value_heads: 5 })).message).toMatch(
    /num_attention_heads=16 .* num_key_value_heads=5/,
  );
  expect(errorOf(() => parseModelSpec(QWEN3_06B, { generationConfig: { eos_token_id: "x" } })).message).toContain(
    '"eos_token_id" = "x"',
  );
});

test("unsupported RoPE scaling types and features are rejected by name", () => {
  const yarn = errorOf(() => parseModelSpec({ ...QWEN3_06B, rope_scaling: { rope_type: "yarn", factor: 4 } }));
  expect(yarn).toBeInstanceOf(ModelFormatError);
  expect(yarn.message).toContain('"yarn"');
  expect(errorOf(() => parseModelSpec({ ...QWEN3_06B, rope_scaling: { type: "linear", factor: 2 } })).message)
    .toContain('"linear"');
  const partial = errorOf(() => parseModelSpec({ ...LLAMA_32_1B, rope_scaling: { rope_type: "llama3", factor: 8 } }));
  expect(partial.message).toContain("low_freq_factor");
  expect(partial.message).toContain("original_max_position_embeddings");
  expect(errorOf(() => parseModelSpec({ ...QWEN3_06B, attention_bias: true })).message).toContain("attention_bias");
  expect(errorOf(() => parseModelSpec({ ...QWEN3_06B, hidden_act: "gelu" })).message).toContain('"gelu"');
});

test("readModelSpec reads config.json and generation_config.json of a directory", () => {
  const dir = mkdtempSync(join(tmpdir(), "lmpool-config-"));
  try {
    expect(errorOf(() => readModelSpec(dir)).message).toContain("no config.json");
    writeFileSync(join(dir, "config.json"), JSON.stringify(presetConfig("tiny-llama")));
    writeFileSync(join(dir, "generation_config.json"), JSON.stringify({ eos_token_id: [151645, 7] }));
    const s = readModelSpec(dir);
    expect(s.architecture).toBe("LlamaForCausalLM");
    expect(s.native.ropeType).toBe("llama3");
    expect(s.eosTokenIds).toEqual([151645, 7]);
    expect(s.name).toBe(dir.split("/").pop()!);
    writeFileSync(join(dir, "config.json"), "{ not json");
    expect(errorOf(() => readModelSpec(dir)).message).toContain("not valid JSON");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
