// Report artifacts: markdown table, vLLM-style serving block, artifact writing with charts.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aggregateRun } from "../../../bench/driver/aggregate.ts";
import type { ConfigurationResult } from "../../../bench/driver/repetitions.ts";
import { toRecord } from "../../../bench/driver/request_record.ts";
import { collectMetadata } from "../../../bench/report/metadata.ts";
import { type BenchResults, RESULTS_SCHEMA } from "../../../bench/report/schema.ts";
import { formatServingResult } from "../../../bench/report/serving_report.ts";
import { formatInterval, markdownTable, scenarioSection, transferTable } from "../../../bench/report/summary_md.ts";
import { utcStamp, writeArtifacts } from "../../../bench/report/write_artifacts.ts";
import { studentTInterval } from "../../../bench/stats/interval.ts";
import { checkWellFormed } from "./xml_check.ts";

const run = aggregateRun({
  startedAtEpochMs: 0,
  elapsedMs: 2000,
  statsBefore: null,
  statsAfter: null,
  records: [0, 1, 2].map((i) =>
    toRecord({
      id: `r${i}`,
      promptTokens: 100,
      dueMs: 0,
      sentMs: 0,
      tokenDeltas: [{ atMs: 100 + i, tokens: 1 }, { atMs: 300, tokens: 1 }],
      finishMs: 300,
      cachedTokens: i * 16,
      rank: i % 2,
      finishReason: "length",
    })
  ),
});

test("markdown table escapes pipes and checks row widths", () => {
  expect(markdownTable(["a", "b"], [["1", "x|y"]])).toBe("| a | b |\n|---|---|\n| 1 | x\\|y |");
  expect(() => markdownTable(["a", "b"], [["1"]])).toThrow(/1 cells for 2 headers/);
  expect(formatInterval(studentTInterval([1, 2, 3, 4, 5]), 2)).toBe("3.00 ± 1.96");
  expect(formatInterval(studentTInterval([0.5]), 1, 100)).toBe("50.0");
  expect(formatInterval(undefined, 1)).toBe("—");
});

test("serving result uses vLLM's layout", () => {
  const text = formatServingResult(run, { maxConcurrency: 4 });
  const lines = text.split("\n");
  expect(lines[0]).toBe("============ Serving Benchmark Result ============");
  expect(lines).toContain("---------------Time to First Token----------------");
  expect(lines).toContain("-----Time per Output Token (excl. 1st token)------");
  expect(lines).toContain("---------------Inter-token Latency----------------");
  expect(lines).toContain("----------------End-to-end Latency----------------");
  expect(lines[lines.length - 1]).toBe("=".repeat(50));
  expect(lines).toContain(`${"Successful requests:".padEnd(40)} ${"3".padEnd(10)}`);
  expect(lines).toContain(`${"Maximum request concurrency:".padEnd(40)} ${"4".padEnd(10)}`);
  expect(lines).toContain(`${"Output token throughput (tok/s):".padEnd(40)} ${"3.00".padEnd(10)}`);
  expect(lines).toContain(`${"Mean TTFT (ms):".padEnd(40)} ${"101.00".padEnd(10)}`);
  expect(lines.every((l) => l.length <= 51)).toBe(true);
});

test("artifacts: results.json, summary.md and three well-formed charts (plus transfer latency when measured)", () => {
  const config = (name: string, status: ConfigurationResult["status"]): ConfigurationResult => ({
    name,
    description: name,
    status,
    repetitions: status === "ok"
      ? [{ index: 0, complete: true, metrics: run }, { index: 1, complete: true, metrics: run }]
      : [],
    completeRepetitions: status === "ok" ? 2 : 0,
    intervals: status === "ok"
      ? {
        outputThroughput: studentTInterval([3, 3.2]),
        ttftMean: studentTInterval([101, 99]),
        tpotMean: studentTInterval([199, 201]),
      }
      : {},
    ...(status === "ok" ? {} : { reason: "LLMEngine not built yet" }),
  });
  const results: BenchResults = {
    schema: RESULTS_SCHEMA,
    entry: "e2e",
    metadata: collectMetadata({ command: ["test"], seeds: { workload: 0 } }),
    scenarios: [{
      workload: { name: "locality-1x", description: "d", seed: 0, params: {}, settings: {}, requests: 3 },
      traceProfile: null,
      arrival: "burst",
      maxInFlight: 16,
      configurations: [config("single-gpu", "ok"), config("lmpool", "not-available")],
    }],
    transferLatency: [{ pair: "0->1", blocks: 1, bytes: 100, latencyMs: 0.1 }, {
      pair: "0->1",
      blocks: 2,
      bytes: 200,
      latencyMs: 0.15,
    }],
  };
  const dir = join(mkdtempSync(join(tmpdir(), "lmpool-report-")), "out");
  const { files } = writeArtifacts(results, { dir });
  expect(files.map((f) => f.slice(dir.length + 1)).sort()).toEqual([
    "results.json",
    "summary.md",
    "throughput.svg",
    "tpot.svg",
    "transfer_latency.svg",
    "ttft.svg",
  ]);
  const json = JSON.parse(readFileSync(join(dir, "results.json"), "utf8"));
  expect(json.scenarios[0].configurations.map((c: { name: string }) => c.name)).toEqual(["single-gpu", "lmpool"]);
  const md = readFileSync(join(dir, "summary.md"), "utf8");
  expect(md).toContain("| single-gpu | ok | 2/2 | 3.1 ± 1.3 |");
  expect(md).toContain("| lmpool | not-available: LLMEngine not built yet | 0/0 |");
  for (const f of ["throughput.svg", "ttft.svg", "tpot.svg", "transfer_latency.svg"]) {
    expect(existsSync(join(dir, f))).toBe(true);
  }
  const bars = checkWellFormed(readFileSync(join(dir, "throughput.svg"), "utf8")).filter((e) =>
    e.attrs.class === "bar"
  );
  expect(bars.length).toBe(1);
  expect(
    checkWellFormed(readFileSync(join(dir, "transfer_latency.svg"), "utf8")).filter((e) => e.name === "circle").length,
  ).toBe(2);
});

test("the transfers table lists configurations that transferred: kinds, released blocks, publish latency", () => {
  const ci = (xs: number[]) => studentTInterval(xs);
  const moved: ConfigurationResult = {
    name: "lmpool",
    description: "d",
    status: "ok",
    repetitions: [],
    completeRepetitions: 2,
    intervals: {
      transferCount: ci([4, 4]),
      transferPrefixCopies: ci([3, 3]),
      transferOffloads: ci([1, 1]),
      transferBackground: ci([0, 0]),
      transferAborted: ci([0, 0]),
      transferBlocks: ci([12, 12]),
      transferReleasedBlocks: ci([2, 2]),
      leaseRoutes: ci([0, 0]),
      transferPublishP50: ci([0.5, 0.7]),
      transferPublishP95: ci([0.9, 0.9]),
      transferPublishMax: ci([1.25, 1.25]),
      transferPublish1BlockP50: ci([0.4, 0.4]),
    },
  };
  const none: ConfigurationResult = { ...moved, name: "round-robin", intervals: { transferCount: ci([0, 0]) } };
  expect(transferTable([none])).toBeUndefined();
  const table = transferTable([none, moved])!;
  expect(table.split("\n")[0]).toBe(
    "| configuration | plans done | prefix copies | offloads (move) | background | aborted | blocks | source blocks released | lease routes | publish p50 ms | publish p95 ms | publish max ms | 1-block p50 ms |",
  );
  expect(table).toContain(
    "| lmpool | 4.0 ± 0.0 | 3.0 ± 0.0 | 1.0 ± 0.0 | 0.0 ± 0.0 | 0.0 ± 0.0 | 12.0 ± 0.0 | 2.0 ± 0.0 | 0.0 ± 0.0 | 0.60 ± 1.27 | 0.90 ± 0.00 | 1.25 ± 0.00 | 0.40 ± 0.00 |",
  );
  expect(table).not.toContain("round-robin");
  const section = scenarioSection({
    workload: { name: "w", description: "d", seed: 0, params: {}, settings: {}, requests: 1 },
    traceProfile: null,
    arrival: "burst",
    maxInFlight: null,
    configurations: [none, moved],
  });
  expect(section).toContain("Transfers (publish = plan dispatch");
});

test("UTC stamps sort by time", () => {
  expect(utcStamp(new Date(Date.UTC(2026, 6, 27, 23, 16, 22, 123)))).toBe("20260727T231622Z");
});

test("metadata records the git revision of this checkout (or null without git)", () => {
  const git = spawnSync("git", ["rev-parse", "HEAD"], { encoding: "utf8" });
  const md = collectMetadata({ command: ["x"], seeds: { workload: 3 }, extra: { note: "n" } });
  expect(md.gitRevision).toBe(git.status === 0 ? git.stdout.trim() : null);
  expect(md.seeds).toEqual({ workload: 3 });
  expect(md.note).toBe("n");
  expect(md.host.cpus).toBeGreaterThan(0);
  expect(Array.isArray(md.gpus)).toBe(true);
});
