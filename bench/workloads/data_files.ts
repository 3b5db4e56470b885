/**
 * Data files the repository ships in bench/workloads/data/ (each one's provenance is in that
 * folder's README): found next to this module, so a clone needs nothing beside it.
 * @module
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** Path of `file` in bench/workloads/data/; a RangeError names the file and the path tried when it is missing. */
export function workloadDataPath(file: string): string {
  // Resolved against this module, not the working directory, so every caller finds the same file.
  const path = fileURLToPath(new URL(`./data/${file}`, import.meta.url));
  if (!existsSync(path)) throw new RangeError(`workload data file ${JSON.stringify(file)} not found at ${path}`);
  return path;
}
