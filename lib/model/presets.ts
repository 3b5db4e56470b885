/**
 * config.json contents of the synthetic models LMPool generates: tiny ones for tests, a small
 * demo for the embedded default server, and the real Qwen3-0.6B/1.7B shapes for benchmarks. All
 * use the Qwen3 tokenizer's vocabulary (151936 rows, padded past its 151669 tokens as upstream).
 * @module
 */

/** Names of the built-in synthetic model presets. */
export type PresetName = "tiny" | "tiny-llama" | "demo" | "qwen3-0.6b" | "qwen3-1.7b";

/** A Hugging Face config.json object. */
export type HfConfigJson = Record<string, unknown>;

/** Token ids of the Qwen3 tokenizer: <|endoftext|> and <|im_end|>. */
export const QWEN3_ENDOFTEXT_ID = 151643;
const QWEN3_IM_END_ID = 151645;

function qwen3(dims: {
  hidden: number;
  intermediate: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  maxPosition: number;
}): HfConfigJson {
  return {
    architectures: ["Qwen3ForCausalLM"],
    model_type: "qwen3",
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: QWEN3_ENDOFTEXT_ID,
    eos_token_id: QWEN3_IM_END_ID,
    head_dim: dims.headDim,
    hidden_act: "silu",
    hidden_size: dims.hidden,
    initializer_range: 0.02,
    intermediate_size: dims.intermediate,
    max_position_embeddings: dims.maxPosition,
    max_window_layers: dims.layers,
    num_attention_heads: dims.heads,
    num_hidden_layers: dims.layers,
    num_key_value_heads: dims.kvHeads,
    rms_norm_eps: 1e-6,
    rope_scaling: null,
    rope_theta: 1000000,
    sliding_window: null,
    tie_word_embeddings: true,
    torch_dtype: "bfloat16",
    use_cache: true,
    use_sliding_window: false,
    vocab_size: 151936,
  };
}

const TINY = { hidden: 64, intermediate: 128, layers: 2, heads: 4, kvHeads: 2, headDim: 16, maxPosition: 4096 };

/** The HF config of a preset (a fresh object each call). */
export function presetConfig(preset: PresetName): HfConfigJson {
  switch (preset) {
    case "tiny":
      return qwen3(TINY);
    case "tiny-llama":
      return {
        architectures: ["LlamaForCausalLM"],
        model_type: "llama",
        attention_bias: false,
        mlp_bias: false,
        bos_token_id: QWEN3_ENDOFTEXT_ID,
        eos_token_id: QWEN3_IM_END_ID,
        head_dim: TINY.headDim,
        hidden_act: "silu",
        hidden_size: TINY.hidden,
        initializer_range: 0.02,
        intermediate_size: TINY.intermediate,
        max_position_embeddings: TINY.maxPosition,
        num_attention_heads: TINY.heads,
        num_hidden_layers: TINY.layers,
        num_key_value_heads: TINY.kvHeads,
        rms_norm_eps: 1e-5,
        // Thresholds at wavelengths 256 and 1024 split head_dim 16's frequencies into all three
        // llama3 regimes (kept, smoothed, divided by factor), so tests exercise each.
        rope_scaling: {
          rope_type: "llama3",
          factor: 4.0,
          low_freq_factor: 1.0,
          high_freq_factor: 4.0,
          original_max_position_embeddings: 1024,
        },
        rope_theta: 500000,
        tie_word_embeddings: false,
        torch_dtype: "bfloat16",
        use_cache: true,
        vocab_size: 151936,
      };
    case "demo":
      return qwen3({ hidden: 256, intermediate: 768, layers: 4, heads: 8, kvHeads: 4, headDim: 32, maxPosition: 8192 });
    case "qwen3-0.6b":
      return qwen3({
        hidden: 1024,
        intermediate: 3072,
        layers: 28,
        heads: 16,
        kvHeads: 8,
        headDim: 128,
        maxPosition: 40960,
      });
    case "qwen3-1.7b":
      return qwen3({
        hidden: 2048,
        intermediate: 6144,
        layers: 28,
        heads: 16,
        kvHeads: 8,
        headDim: 128,
        maxPosition: 40960,
      });
    default:
      throw new RangeError(`unknown model preset ${JSON.stringify(preset)}; presets: ${PRESET_NAMES.join(", ")}`);
  }
}

/** Every preset name. */
export const PRESET_NAMES: readonly PresetName[] = ["tiny", "tiny-llama", "demo", "qwen3-0.6b", "qwen3-1.7b"];

/** True when `name` is a preset. */
export function isPresetName(name: string): name is PresetName {
  return (PRESET_NAMES as readonly string[]).includes(name);
}
