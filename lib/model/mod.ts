/**
 * `lmpool/model`: Hugging Face model directories (config, safetensors, tokenizer, chat template),
 * the generated demo models, and the incremental detokenizer and stop-string matcher.
 * @module
 */
export { loadModel } from "./loader.ts";
export type { LoadedModel, LoadModelOptions } from "./loader.ts";
export { readModelSpec, SUPPORTED_ARCHITECTURES } from "./config.ts";
export type { ModelSpec } from "./config.ts";
export { ModelTokenizer } from "./tokenizer.ts";
export { ensureModel } from "./demo_model.ts";
export { writeSyntheticModel } from "./synthetic_writer.ts";
export { IncrementalDetokenizer } from "./incremental_detokenizer.ts";
export { StopStringMatcher } from "./stop_strings.ts";
