/**
 * Per-request records of a run as JSON lines (`--save-requests`): what a tail needs to be explained
 * (which request, when it was due and sent, where it ran, what it found cached, its first token),
 * under <results dir>/requests/<workload>/<configuration>-<run>.jsonl. Inter-token gaps are left
 * out: they are the bulk of a record and the summary already carries their distribution.
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { RequestRecord } from "../driver/request_record.ts";

/** Where the records of `configuration`'s run `run` (a repetition or a seed) of `workload` go. */
export function requestLogPath(dir: string, workload: string, configuration: string, run: number): string {
  const safe = (s: string) => s.replace(/[^A-Za-z0-9._-]+/g, "_");
  return join(dir, "requests", safe(workload), `${safe(configuration)}-${run}.jsonl`);
}

/** Writes the records of one run; returns the file. */
export function writeRequestLog(
  dir: string,
  workload: string,
  configuration: string,
  run: number,
  records: readonly RequestRecord[],
): string {
  const path = requestLogPath(dir, workload, configuration, run);
  mkdirSync(dirname(path), { recursive: true });
  const lines = records.map(({ itlMs: _gaps, ...rest }) => JSON.stringify(rest));
  writeFileSync(path, lines.length ? `${lines.join("\n")}\n` : "");
  return path;
}
