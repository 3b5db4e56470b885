// The fault suite's bookkeeping: its flags (bad values name the flag), the case table, the
// tally of outcomes into the table's columns, the verdict, the markdown and JSON it writes, and
// the load generator's bounded stop against a real local HTTP server.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FAULT_CASES, faultCase } from "../../../bench/faults/case_table.ts";
import { type CaseResult, tallyOutcomes, verdict } from "../../../bench/faults/case_result.ts";
import { LoadGenerator } from "../../../bench/faults/load.ts";
import { parseFaultsArgs } from "../../../bench/faults/options.ts";
import {
  caseRow,
  FAULTS_SCHEMA,
  type FaultsReport,
  renderFaultsMarkdown,
  writeFaultsReport,
} from "../../../bench/faults/report.ts";
import type { RequestOutcome } from "../../../bench/faults/request_outcome.ts";
import { collectMetadata } from "../../../bench/report/metadata.ts";

const NAMES = FAULT_CASES.map((c) => c.name);
const parse = (argv: string[]) => parseFaultsArgs(argv, NAMES, [], () => {});

test("flags: defaults, --quick, and errors that name the flag and the value", () => {
  const full = parse([])!;
  expect([full.backend, full.gpus, full.ranks, full.soakMinutes, full.quick, full.cases]).toEqual([
    "cpu",
    "2",
    2,
    10,
    false,
    NAMES,
  ]);
  expect(parse(["--backend", "cuda"])!.soakMinutes).toBe(3);
  const quick = parse(["--quick", "--gpus", "0,0", "--cases", "soak,f2-bad-floats"])!;
  expect([quick.ranks, quick.soakMinutes, quick.cases]).toEqual([2, 1, ["soak", "f2-bad-floats"]]);
  expect(parse(["--gpus", "0, 0,1"])!.ranks).toBe(3);
  expect(() => parse(["--backend", "tpu"])).toThrow('--backend must be cpu or cuda, got "tpu"');
  expect(() => parse(["--gpus", "two"])).toThrow(
    '--gpus must be a GPU count (e.g. 2) or a comma-separated list of device ids, one per rank (e.g. 0,1 or 0,0), got "two"',
  );
  expect(() => parse(["--gpus", "1"])).toThrow("--gpus must give at least 2 ranks");
  expect(() => parse(["--cases", "f9"])).toThrow("--cases must name cases among");
  expect(() => parse(["--soak-minutes", "0"])).toThrow('--soak-minutes must be a positive integer, got "0"');
  expect(() => parse(["--nope"])).toThrow();
  let help = "";
  expect(parseFaultsArgs(["--help"], NAMES, ["soak  the soak"], (l) => (help = l))).toBeNull();
  expect(help).toContain("--soak-minutes N");
});

test("the case table: unique names, each found by name, a bounded time for each", () => {
  expect(new Set(NAMES).size).toBe(NAMES.length);
  for (
    const n of [
      "f1-large-body",
      "f2-bad-floats",
      "f3-long-prompt",
      "kill-worker-decode",
      "stop-worker",
      "kill-control-plane",
      "launcher-sigterm",
      "launcher-sigkill",
      "soak",
    ]
  ) {
    expect(faultCase(n).name).toBe(n);
  }
  expect(() => faultCase("f9")).toThrow('unknown fault case "f9"');
  const o = parse(["--quick"])!;
  for (const c of FAULT_CASES) expect(c.timeoutMs(o)).toBeLessThanOrEqual(10 * 60_000);
});

const outcome = (kind: RequestOutcome["kind"], endAt: number, transport = false): RequestOutcome => ({
  kind,
  label: kind,
  status: null,
  detail: `${kind} detail`,
  sentAt: 0,
  firstTokenAt: null,
  endAt,
  transport,
});

test("tally: lost excludes deliberate hang-ups and transport failures after the launcher's own death", () => {
  const xs = [
    outcome("completed", 1),
    outcome("clear_error", 2),
    outcome("cancelled", 3),
    outcome("lost", 4, true),
    outcome("lost", 20, true),
    outcome("lost", 30),
  ];
  expect(tallyOutcomes(xs)).toMatchObject({ sent: 6, completed: 1, clearErrors: 1, cancelled: 1, lost: 3, severed: 0 });
  const t = tallyOutcomes(xs, 10);
  expect(t).toMatchObject({ lost: 2, severed: 1 });
  expect(t.lostExamples).toEqual(["lost: lost detail", "lost: lost detail"]);
  expect(verdict([{ name: "a", ok: true, detail: "" }], null)).toBe("pass");
  expect(verdict([{ name: "a", ok: true, detail: "" }], "no transfer ran")).toBe("not run");
  expect(verdict([{ name: "a", ok: false, detail: "" }], "no transfer ran")).toBe("fail");
});

test("the report: one row per case with every column, failed checks and notes below, JSON beside", () => {
  const r: CaseResult = {
    name: "kill-worker-3x",
    description: "three kills",
    status: "fail",
    sent: 40,
    completed: 37,
    clearErrors: 3,
    lost: 0,
    cancelled: 0,
    severed: 0,
    leakedBlocks: 0,
    leakNote: "",
    recoveries: [{ detectMs: 120, serveAgainMs: 1500, note: "" }, { detectMs: 110, serveAgainMs: 2600, note: "" }, {
      detectMs: 130,
      serveAgainMs: null,
      note: "x",
    }],
    checks: [{ name: "backoff visible", ok: false, detail: "times 1.50 s / 2.60 s / -" }],
    notes: ["a note"],
    lostExamples: [],
    durationMs: 9000,
  };
  expect(caseRow(r)).toBe("| kill-worker-3x | 40 | 37 | 3 | 0 | 0 | 0.12 / 0.11 / 0.13 | 1.50 / 2.60 / - | **FAIL** |");
  const passing: CaseResult = {
    ...r,
    name: "launcher-sigkill",
    status: "pass",
    leakedBlocks: null,
    leakNote: "n/a: the launcher exited",
    recoveries: [],
    checks: [],
    notes: [],
  };
  expect(caseRow(passing)).toBe("| launcher-sigkill | 40 | 37 | 3 | 0 | n/a | - | - | pass |");
  const report: FaultsReport = {
    schema: FAULTS_SCHEMA,
    metadata: collectMetadata({ command: ["bun", "bench", "faults"] }),
    cases: [r, passing],
  };
  const md = renderFaultsMarkdown(report);
  expect(md).toContain(
    "| case | sent | completed | failed with a clear error | lost | leaked blocks | time to detect (s) | time to serve again at full capacity (s) | result |",
  );
  expect(md).toContain("  - failed: backoff visible: times 1.50 s / 2.60 s / -");
  expect(md).toContain("  - a note");
  const dir = mkdtempSync(join(tmpdir(), "lmpool-faults-report-"));
  const files = writeFaultsReport(report, dir);
  expect(files.map((f) => f.slice(dir.length + 1))).toEqual(["faults.md", "faults.json"]);
  const json = JSON.parse(readFileSync(join(dir, "faults.json"), "utf8"));
  expect(json.schema).toBe(FAULTS_SCHEMA);
  expect(json.cases[0].recoveries[2].serveAgainMs).toBeNull();
  rmSync(dir, { recursive: true, force: true });
});

let server: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    async fetch(req) {
      const body = (await req.json()) as { stream?: boolean };
      await Bun.sleep(30);
      if (!body.stream) return Response.json({ choices: [{ index: 0, text: "x", finish_reason: "length" }] });
      return new Response(`data: {"choices":[{"index":0,"text":"x","finish_reason":"length"}]}\n\ndata: [DONE]\n\n`, {
        headers: { "content-type": "text/event-stream" },
      });
    },
  });
});
afterAll(() => server.stop(true));

test("the load keeps its concurrency, mixes streamed and plain requests, and stops with every request accounted", async () => {
  const load = new LoadGenerator({
    baseUrl: `http://127.0.0.1:${server.port}`,
    model: "m",
    concurrency: 3,
    deadlineMs: 2000,
  });
  load.start();
  await Bun.sleep(400);
  const outcomes = await load.stop();
  expect(outcomes.length).toBe(load.sent);
  expect(outcomes.length).toBeGreaterThan(6);
  expect(outcomes.every((o) => o.kind === "completed")).toBe(true);
  expect(new Set(outcomes.map((o) => o.label))).toEqual(new Set(["short", "short-stream", "long-stream", "long"]));
  const after = load.sent;
  await Bun.sleep(100);
  expect(load.sent).toBe(after);
});
