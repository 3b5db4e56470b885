/**
 * The suite's table: markdown (one row per case: sent, completed, failed with a clear error, lost,
 * leaked blocks, time to detect, time to serve again, result) with each failed check and note
 * listed below it, and the JSON of every result, written as faults.md and faults.json.
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RunMetadata } from "../report/metadata.ts";
import { toJson } from "../report/write_artifacts.ts";
import type { CaseResult } from "./case_result.ts";

/** The JSON schema tag of faults.json. */
export const FAULTS_SCHEMA = "lmpool-faults/1";

/** Everything faults.json holds. */
export interface FaultsReport {
  schema: typeof FAULTS_SCHEMA;
  metadata: RunMetadata;
  cases: CaseResult[];
}

const seconds = (ms: number | null) => (ms === null ? "-" : (ms / 1000).toFixed(2));

/** "1.20" for one recovery, "0.61 / 1.12 / 2.30" for several, "-" for none measured. */
function recoveryCell(r: CaseResult, key: "detectMs" | "serveAgainMs"): string {
  return r.recoveries.length === 0 ? "-" : r.recoveries.map((x) => seconds(x[key])).join(" / ");
}

/** One table row of `r`. */
export function caseRow(r: CaseResult): string {
  const leaked = r.leakedBlocks === null ? (r.leakNote.startsWith("n/a") ? "n/a" : "?") : String(r.leakedBlocks);
  const result = r.status === "pass" ? "pass" : r.status === "not run" ? "not run" : "**FAIL**";
  return `| ${r.name} | ${r.sent} | ${r.completed} | ${r.clearErrors} | ${r.lost} | ${leaked} | ${
    recoveryCell(r, "detectMs")
  } | ${recoveryCell(r, "serveAgainMs")} | ${result} |`;
}

/** The markdown report. */
export function renderFaultsMarkdown(report: FaultsReport): string {
  const m = report.metadata;
  const lines = [
    "# Fault suite",
    "",
    `${m.createdAt}, git ${m.gitRevision?.slice(0, 12) ?? "unknown"}${
      m.gitDirty ? " (dirty)" : ""
    }, ${m.host.cpus} CPUs (${m.host.cpuModel}), ${
      m.gpus.length ? m.gpus.map((g) => g.name).join(", ") : "no GPU"
    }; command: ${m.command.join(" ")}`,
    "",
    "Lost = neither completed nor a clear error (4xx/5xx with an OpenAI error body, or an error event and [DONE]); must be 0. " +
    "Leaked = KV blocks still referenced after the load drained (lmpool_kv_leaked_blocks); must be 0. Times in seconds from the fault, one per fault.",
    "",
    "| case | sent | completed | failed with a clear error | lost | leaked blocks | time to detect (s) | time to serve again at full capacity (s) | result |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ...report.cases.map(caseRow),
    "",
  ];
  for (const r of report.cases) {
    const failed = r.checks.filter((c) => !c.ok);
    if (failed.length === 0 && r.notes.length === 0) continue;
    lines.push(`- **${r.name}** (${(r.durationMs / 1000).toFixed(1)} s): ${r.description}`);
    for (const c of failed) lines.push(`  - failed: ${c.name}${c.detail ? `: ${c.detail.replace(/\n/g, " ")}` : ""}`);
    for (const n of r.notes) lines.push(`  - ${n}`);
    if (r.cancelled > 0 || r.severed > 0) {
      lines.push(`  - ${r.cancelled} disconnected on purpose, ${r.severed} cut by the launcher's own death`);
    }
  }
  return `${lines.join("\n")}\n`;
}

/** Writes faults.md and faults.json into `dir`; returns their paths. */
export function writeFaultsReport(report: FaultsReport, dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const md = join(dir, "faults.md");
  const json = join(dir, "faults.json");
  writeFileSync(md, renderFaultsMarkdown(report));
  writeFileSync(json, toJson(report));
  return [md, json];
}
