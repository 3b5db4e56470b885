/**
 * The weights of a Hugging Face model directory: one model.safetensors, or several shards listed
 * by model.safetensors.index.json ({"weight_map": {tensor name: shard file}}), merged into one
 * name -> tensor table.
 * @module
 */
import { join } from "node:path";
import { ModelFormatError } from "../core/errors.ts";
import { pathExists, readText } from "../runtime/files.ts";
import { openSafetensors, type SafetensorsTensor } from "./safetensors.ts";

/** File names of a single-file and a sharded checkpoint. */
export const SINGLE_FILE = "model.safetensors";
export const INDEX_FILE = "model.safetensors.index.json";

/** Every tensor of a model directory, with the shard each came from. */
export interface ModelWeights {
  readonly dir: string;
  /** Shard file names, in index order. */
  readonly files: readonly string[];
  readonly tensors: ReadonlyMap<string, SafetensorsTensor & { readonly file: string }>;
}

/** Opens every safetensors file of `dir` (memory-mapped under Bun). */
export function openModelWeights(dir: string): ModelWeights {
  const indexPath = join(dir, INDEX_FILE);
  if (pathExists(indexPath)) return openSharded(dir, indexPath);
  if (pathExists(join(dir, SINGLE_FILE))) return merge(dir, [SINGLE_FILE], null);
  throw new ModelFormatError(
    `${dir}: no ${SINGLE_FILE} or ${INDEX_FILE} (expected a Hugging Face safetensors checkpoint)`,
  );
}

function openSharded(dir: string, indexPath: string): ModelWeights {
  let index: unknown;
  try {
    index = JSON.parse(readText(indexPath));
  } catch (e) {
    throw new ModelFormatError(`${indexPath}: not valid JSON (${(e as Error).message})`, { cause: e });
  }
  const weightMap = (index as { weight_map?: unknown } | null)?.weight_map;
  if (typeof weightMap !== "object" || weightMap === null || Array.isArray(weightMap)) {
    throw new ModelFormatError(`${indexPath}: missing "weight_map" object`);
  }
  const map = weightMap as Record<string, unknown>;
  const files: string[] = [];
  for (const [name, file] of Object.entries(map)) {
    if (typeof file !== "string" || file.includes("/") || file.includes("\\") || file.startsWith(".")) {
      throw new ModelFormatError(
        `${indexPath}: weight_map[${JSON.stringify(name)}] = ${JSON.stringify(file)} is not a shard file name`,
      );
    }
    if (!files.includes(file)) files.push(file);
  }
  const missingFiles = files.filter((f) => !pathExists(join(dir, f)));
  if (missingFiles.length > 0) {
    throw new ModelFormatError(`${dir}: shard files listed in ${INDEX_FILE} are missing: ${missingFiles.join(", ")}`);
  }
  return merge(dir, files, map as Record<string, string>);
}

function merge(dir: string, files: string[], weightMap: Record<string, string> | null): ModelWeights {
  const tensors = new Map<string, SafetensorsTensor & { file: string }>();
  for (const file of files) {
    for (const [name, t] of openSafetensors(join(dir, file)).tensors) {
      // The index is authoritative: a tensor found in a shard the index does not assign it to is ignored.
      if (weightMap && weightMap[name] !== file) continue;
      const prior = tensors.get(name);
      if (prior) throw new ModelFormatError(`${dir}: tensor ${name} is in both ${prior.file} and ${file}`);
      tensors.set(name, { ...t, file });
    }
  }
  if (weightMap) {
    const absent = Object.entries(weightMap).filter(([name]) => !tensors.has(name)).map(([n, f]) => `${n} (in ${f})`);
    if (absent.length > 0) {
      throw new ModelFormatError(
        `${dir}: tensors listed in ${INDEX_FILE} are not in their shard: ${absent.join(", ")}`,
      );
    }
  }
  return { dir, files, tensors };
}
