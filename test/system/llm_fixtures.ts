// Models and helpers of the LLM system tests.
//
// The "tiny" preset's N(0, 0.02) weights make its greedy output copy the last prompt token: the
// residual stream is dominated by the token embedding, so outputs hardly depend on the K/V cache.
// The engine tests need outputs that do depend on every cached token, so they use a variant with
// larger weights (attention dominates the residual) and a 4096-token vocabulary (a cheap LM head;
// ids below 4096 are still real Qwen3 tokens, so text decoding works).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { presetConfig } from "../../lib/model/presets.ts";
import { writeSyntheticModel } from "../../lib/model/synthetic_writer.ts";
import { testModelCacheRoot } from "../helpers/tiny_model_dir.ts";

/** Vocabulary of the engine test model. */
export const ENGINE_TEST_VOCAB = 4096;

/** Directory of the context-sensitive tiny Qwen3 model (generated once, cached under build/). */
export function engineTestModelDir(): string {
  return cachedSyntheticModelDir("engine", {
    ...presetConfig("tiny"),
    vocab_size: ENGINE_TEST_VOCAB,
    initializer_range: 0.2,
  }, 7);
}

/**
 * A synthetic model of `config`, written once under build/ in a folder named by `prefix` and the
 * config's hash (concurrent test files may race to write it: the first rename wins).
 */
export function cachedSyntheticModelDir(prefix: string, config: Record<string, unknown>, seed: number): string {
  const root = testModelCacheRoot();
  const dir = `${root}${prefix}-${createHash("sha256").update(JSON.stringify(config)).digest("hex").slice(0, 12)}`;
  if (existsSync(`${dir}/config.json`)) return dir;
  const tmp = `${dir}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  try {
    mkdirSync(root, { recursive: true });
    writeSyntheticModel(tmp, { config, seed });
    renameSync(tmp, dir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(`${dir}/config.json`)) throw e;
  }
  return dir;
}

/** A seeded PRNG (mulberry32). */
export { seededRandom as rng } from "../../lib/core/seeded_random.ts";

/** `n` random token ids below the test vocabulary. */
export function randomTokens(next: () => number, n: number): number[] {
  return Array.from({ length: n }, () => Math.floor(next() * ENGINE_TEST_VOCAB));
}
