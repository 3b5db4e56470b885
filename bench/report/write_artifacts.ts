/**
 * Writes a results set under bench/results/<UTC timestamp>/: results.json, summary.md and the
 * SVG charts. JSON turns NaN/Infinity (e.g. an empty distribution) into null.
 * @module
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { renderCharts } from "./charts.ts";
import type { BenchResults } from "./schema.ts";
import { renderSummary } from "./summary_md.ts";

/** The default results root: bench/results of this checkout (git-ignored). */
export const DEFAULT_RESULTS_ROOT = fileURLToPath(new URL("../results/", import.meta.url));

/** A UTC timestamp for directory names: 20260727T231622Z. */
export function utcStamp(date = new Date()): string {
  return date.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");
}

/** Creates a new, unused results directory under `root`. */
export function createResultsDir(root = DEFAULT_RESULTS_ROOT, date = new Date()): string {
  const base = join(root, utcStamp(date));
  let dir = base;
  for (let i = 2; existsSync(dir); i++) dir = `${base}-${i}`;
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** JSON text of `value` with non-finite numbers as null. */
export function toJson(value: unknown): string {
  return `${JSON.stringify(value, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v), 2)}\n`;
}

/** Writes every artifact; returns the directory and the files written. */
export function writeArtifacts(
  results: BenchResults,
  options: { dir?: string; root?: string } = {},
): { dir: string; files: string[] } {
  const dir = options.dir ?? createResultsDir(options.root);
  mkdirSync(dir, { recursive: true });
  const files: Record<string, string> = {
    "results.json": toJson(results),
    "summary.md": renderSummary(results),
    ...renderCharts(results),
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return { dir, files: Object.keys(files).map((f) => join(dir, f)) };
}
