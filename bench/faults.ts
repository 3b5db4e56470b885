/**
 * `bun bench faults`: the fault suite. Each case starts the real server (`examples/serve.ts
 * --gpus 2 --backend cpu --port 0` as a subprocess), runs it under a mixed load of short and long
 * requests, streamed and not, injects its fault (oversized or out-of-range input, a long prompt,
 * kill -9 or SIGSTOP of a worker, kill -9 of the control plane, SIGTERM or SIGKILL of the
 * launcher, client disconnects, a soak with kills) and reports requests sent / completed / failed
 * with a clear error / lost, leaked KV blocks, time to detect and time to serve again at full
 * capacity, as faults.md and faults.json under bench/results/<UTC timestamp>/. `--quick` is the
 * short CI form. Exits non-zero (throws) when a case fails.
 * @module
 */
import { FAULT_CASES, faultCase } from "./faults/case_table.ts";
import type { CaseResult } from "./faults/case_result.ts";
import { type FaultsOptions, parseFaultsArgs } from "./faults/options.ts";
import { FAULTS_SCHEMA, type FaultsReport, renderFaultsMarkdown, writeFaultsReport } from "./faults/report.ts";
import { runCase } from "./faults/run_case.ts";
import type { BenchEntry } from "./entry.ts";
import { collectMetadata } from "./report/metadata.ts";
import { createResultsDir } from "./report/write_artifacts.ts";

/** Thrown at the end of a run in which a case failed: the table is written first. */
export class FaultCaseFailure extends Error {
  override readonly name = "FaultCaseFailure";
}

/** Runs the cases of `o` in table order, rewriting the report after each; returns it and where it went. */
async function runFaults(
  o: FaultsOptions,
  argv: string[],
  log: (line: string) => void = console.log,
): Promise<{ report: FaultsReport; dir: string }> {
  const dir = o.out ?? createResultsDir();
  const report: FaultsReport = {
    schema: FAULTS_SCHEMA,
    metadata: collectMetadata({
      command: ["bun", "bench", "faults", ...argv],
      extra: { backend: o.backend, gpuFlag: o.gpus, quick: o.quick, soakMinutes: o.soakMinutes },
    }),
    cases: [],
  };
  log(
    `faults: ${o.cases.length} case(s), backend ${o.backend}, --gpus ${o.gpus}${
      o.quick ? ", quick" : ""
    }; results in ${dir}`,
  );
  for (const name of o.cases) {
    report.cases.push(await runCase(faultCase(name), o, log));
    // Rewrite after every case: an interrupted suite keeps what it measured.
    writeFaultsReport(report, dir);
  }
  log(`\n${renderFaultsMarkdown(report)}`);
  log(`wrote ${dir}/faults.md and faults.json`);
  return { report, dir };
}

/** The names of the cases that did not pass (not run counts as passing here: it says why in the table). */
function failedCases(cases: readonly CaseResult[]): string[] {
  return cases.filter((c) => c.status === "fail").map((c) => c.name);
}

const entry: BenchEntry = {
  name: "faults",
  description:
    "fault suite on the real server under load: sent/completed/clear errors/lost, leaked blocks, time to detect and to serve again",
  async run(argv) {
    const o = parseFaultsArgs(
      argv,
      FAULT_CASES.map((c) => c.name),
      FAULT_CASES.map((c) => `${c.name.padEnd(22)} ${c.description}`),
      console.log,
    );
    if (o === null) return;
    const { report } = await runFaults(o, argv);
    const failed = failedCases(report.cases);
    if (failed.length > 0) throw new FaultCaseFailure(`${failed.length} fault case(s) failed: ${failed.join(", ")}`);
  },
};
export default entry;
