// The fault suite's short form in CI: each important case of `bun bench faults --quick` against
// the real server (examples/serve.ts --gpus 2 --backend cpu, as a subprocess, real signals and
// HTTP) under load. Every case must lose no request and leak no KV block, and pass its own checks
// (a 4xx for oversized or out-of-range input, restarts detected and served past, a bounded drain,
// no orphans). The result table of the run is printed at the end.
import { afterAll, expect, test } from "bun:test";
import { FAULT_CASES, faultCase } from "../../bench/faults/case_table.ts";
import type { CaseResult } from "../../bench/faults/case_result.ts";
import { parseFaultsArgs } from "../../bench/faults/options.ts";
import { caseRow } from "../../bench/faults/report.ts";
import { runCase } from "../../bench/faults/run_case.ts";

/** The cases CI runs, in the suite's order. */
const CI_CASES = [
  "f1-large-body",
  "f2-bad-floats",
  "f3-long-prompt",
  "kill-worker-decode",
  "stop-worker",
  "kill-control-plane",
  "launcher-sigterm",
  "launcher-sigkill",
];

const options = parseFaultsArgs(
  ["--quick", "--backend", "cpu", "--gpus", "2", "--cases", CI_CASES.join(",")],
  FAULT_CASES.map((c) => c.name),
  [],
  () => {},
)!;
const results: CaseResult[] = [];

function explain(r: CaseResult): string {
  const failed = r.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
  return `${r.name}: ${r.status}\n${failed.join("\n")}\n${r.notes.join("\n")}\n--- server output ---\n${
    r.serverOutputTail ?? ""
  }`;
}

for (const name of CI_CASES) {
  const c = faultCase(name);
  // The case's own bound, plus start-up, drain and stop of the server.
  const timeout = c.timeoutMs(options) + options.startTimeoutMs + 60_000;
  test(name, async () => {
    const r = await runCase(c, options, () => {});
    results.push(r);
    expect({ name, lost: r.lost, examples: r.lostExamples }).toEqual({ name, lost: 0, examples: [] });
    // The launcher cases end the server: there is nothing left to read leaks from.
    if (!r.leakNote.startsWith("n/a")) {
      expect({ name, leaked: r.leakedBlocks, note: r.leakNote }).toEqual({ name, leaked: 0, note: "" });
    }
    if (r.status !== "pass") throw new Error(explain(r));
  }, timeout);
}

afterAll(() => {
  if (results.length) console.log(`fault cases (quick):\n${results.map(caseRow).join("\n")}`);
});
