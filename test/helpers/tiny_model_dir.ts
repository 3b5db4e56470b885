/**
 * Synthetic test models, generated once and cached under build/test-models/<hash>/, where the hash
 * covers the generator's sources so an edit to the writer regenerates instead of reusing stale
 * files. ensureModel's write-then-rename makes concurrent test processes safe.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { readModelSpec } from "../../lib/model/config.ts";
import { ensureModel } from "../../lib/model/demo_model.ts";
import type { PresetName } from "../../lib/model/presets.ts";
import { ModelTokenizer } from "../../lib/model/tokenizer.ts";

const GENERATOR_SOURCES = [
  "synthetic_writer.ts",
  "random_weights.ts",
  "presets.ts",
  "safetensors_writer.ts",
  "weight_names.ts",
  "float_formats.ts",
];

let cacheRoot: string | undefined;

/** build/test-models/<hash of the generator's sources>/: the root of every cached test model. */
export function testModelCacheRoot(): string {
  if (!cacheRoot) {
    const h = createHash("sha256");
    for (const f of GENERATOR_SOURCES) h.update(readFileSync(new URL(`../../lib/model/${f}`, import.meta.url)));
    cacheRoot = fileURLToPath(new URL(`../../build/test-models/${h.digest("hex").slice(0, 12)}/`, import.meta.url));
  }
  return cacheRoot;
}

/** Directory of a cached synthetic model ("tiny" by default: Qwen3 arch, real tokenizer). */
export async function tinyModelDir(preset: PresetName = "tiny"): Promise<string> {
  return ensureModel(preset, { cacheDir: testModelCacheRoot() });
}

let tokenizer: Promise<ModelTokenizer> | undefined;

/** The tiny model's tokenizer (the real Qwen3 one), loaded once per test process. */
export function tinyTokenizer(): Promise<ModelTokenizer> {
  tokenizer ??= tinyModelDir().then((dir) =>
    ModelTokenizer.fromDir(dir, { eosTokenIds: readModelSpec(dir).eosTokenIds })
  );
  return tokenizer;
}
