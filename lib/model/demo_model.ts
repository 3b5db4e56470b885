/**
 * Synthetic models generated once and cached: the embedded default of the server and the test
 * models. A model is written into a temporary directory and renamed into place, so a directory
 * that exists is complete, and concurrent callers never see half-written files.
 * @module
 */
import { renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { pid, readSetting } from "../runtime/env.ts";
import { makeDir, pathExists } from "../runtime/files.ts";
import { isPresetName, PRESET_NAMES, type PresetName } from "./presets.ts";
import { writeSyntheticModel } from "./synthetic_writer.ts";

/** Bumped whenever generation changes the bytes written, so stale caches are not reused. */
export const SYNTHETIC_MODEL_VERSION = 1;

/** Options of ensureModel. */
export interface EnsureModelOptions {
  /** Root of the cache (default $LMPOOL_CACHE_DIR, else <repo>/.cache/models). */
  cacheDir?: string;
  /** Weight seed (default 0). */
  seed?: number;
  /** Called while generating (not when the model is already cached). */
  onProgress?: (writtenBytes: number, totalBytes: number, tensorName: string) => void;
}

/** The default cache root: $LMPOOL_CACHE_DIR, else .cache/models in the LMPool checkout. */
export function defaultModelCacheDir(): string {
  return readSetting("LMPOOL_CACHE_DIR") ?? fileURLToPath(new URL("../../.cache/models/", import.meta.url));
}

/** The directory ensureModel uses for a preset (it may not exist yet). */
export function cachedModelDir(
  preset: PresetName,
  options: Pick<EnsureModelOptions, "cacheDir" | "seed"> = {},
): string {
  const seed = options.seed ?? 0;
  const suffix = seed === 0 ? "" : `-seed${seed}`;
  return join(options.cacheDir ?? defaultModelCacheDir(), `${preset}-v${SYNTHETIC_MODEL_VERSION}${suffix}`);
}

/** Returns the directory of the preset's synthetic model, generating it first if not cached. */
export async function ensureModel(preset: PresetName, options: EnsureModelOptions = {}): Promise<string> {
  if (!isPresetName(preset)) {
    throw new RangeError(`unknown model preset ${JSON.stringify(preset)}; presets: ${PRESET_NAMES.join(", ")}`);
  }
  const dir = cachedModelDir(preset, options);
  if (pathExists(join(dir, "config.json"))) return dir;
  const root = join(dir, "..");
  makeDir(root);
  const tmp = join(root, `.tmp-${preset}-${pid()}-${Math.random().toString(36).slice(2)}`);
  try {
    writeSyntheticModel(tmp, { preset, seed: options.seed ?? 0, onProgress: options.onProgress });
    renameSync(tmp, dir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    // Another process finished first: its directory is complete, use it.
    if (pathExists(join(dir, "config.json"))) return dir;
    throw e;
  }
  return dir;
}
