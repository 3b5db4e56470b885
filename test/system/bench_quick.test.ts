// `bun bench e2e --quick` end to end on the CPU backend with the tiny model and the real engines:
// it must write results.json, summary.md and the SVG charts, holding every configuration; with an
// NVLink pair declared, transfer-rr's copies show in the transfers table. `bun bench
// transfer_latency --quick` verifies every forced copy round and reports the 1-block target line.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { QUICK_CONFIGURATIONS } from "../../bench/e2e.ts";
import { checkWellFormed } from "../unit/bench/xml_check.ts";

test("the quick e2e form writes JSON, markdown and SVG artifacts with the quick configurations", () => {
  const out = join(mkdtempSync(join(tmpdir(), "lmpool-bench-quick-")), "results");
  const main = fileURLToPath(new URL("../../bench/main.ts", import.meta.url));
  const r = spawnSync(process.execPath, ["run", main, "e2e", "--quick", "--out", out], {
    encoding: "utf8",
    timeout: 240_000,
  });
  if (r.status !== 0) {
    throw new Error(
      `bun bench e2e --quick exited ${r.status} (${r.signal ?? "no signal"}):\n${r.stdout.slice(-3000)}\n${
        r.stderr.slice(-3000)
      }`,
    );
  }

  for (const f of ["results.json", "summary.md", "throughput.svg", "ttft.svg", "tpot.svg"]) {
    expect(existsSync(join(out, f))).toBe(true);
  }
  const results = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
  expect(results.schema).toBe("lmpool-bench/1");
  expect(results.metadata.model.architectures).toEqual(["Qwen3ForCausalLM"]);
  expect(results.metadata.seeds.workload).toBe(0);
  const scenario = results.scenarios[0];
  expect(scenario.workload.name).toBe("locality-1x");
  expect(scenario.traceProfile.requestShare).toBeCloseTo(0.75, 10);
  const configs = scenario.configurations as {
    name: string;
    status: string;
    completeRepetitions: number;
    intervals: Record<string, { mean: number; halfWidth: number | null }>;
    repetitions: { metrics: { completed: number; prefixHitRate: number } }[];
  }[];
  expect(configs.map((c) => c.name)).toEqual(QUICK_CONFIGURATIONS);

  // The single-GPU LLM runs for real: two complete repetitions, an interval on throughput, prefix hits.
  const single = configs.find((c) => c.name === "single-gpu")!;
  expect(single.status).toBe("ok");
  expect(single.completeRepetitions).toBe(2);
  expect(single.repetitions[0]!.metrics.completed).toBe(scenario.workload.requests);
  expect(single.intervals.outputThroughput!.mean).toBeGreaterThan(0);
  expect(single.intervals.outputThroughput!.halfWidth).not.toBeNull();
  expect(single.repetitions[0]!.metrics.prefixHitRate).toBeGreaterThan(0);
  // The multi-GPU configurations run LLMEngine on two CPU-backend ranks: every one completes.
  for (const c of configs.filter((c) => c.name !== "single-gpu")) {
    expect(`${c.name}: ${c.status}`).toBe(`${c.name}: ok`);
    expect(c.completeRepetitions).toBe(2);
    expect(c.repetitions[0]!.metrics.completed).toBe(scenario.workload.requests);
    expect(Object.keys((c.repetitions[0]!.metrics as unknown as { transferPlans: object }).transferPlans).sort())
      .toEqual(["aborted", "completed", "leaseRoutes", "publish1BlockMs", "publishMs", "releasedBlocks"]);
  }
  // Round-robin spreads the requests over both ranks.
  const rr = configs.find((c) => c.name === "round-robin")!;
  expect(
    Object.keys((rr.repetitions[0]!.metrics as unknown as { perRankRequests: Record<string, number> }).perRankRequests)
      .sort(),
  ).toEqual(["0", "1"]);

  const md = readFileSync(join(out, "summary.md"), "utf8");
  for (const name of QUICK_CONFIGURATIONS) expect(md).toContain(`| ${name} |`);
  for (const f of ["throughput.svg", "ttft.svg", "tpot.svg"]) {
    const els = checkWellFormed(readFileSync(join(out, f), "utf8"));
    const bars = els.filter((e) => e.attrs.class === "bar");
    expect(bars.length).toBe(configs.length);
  }
}, 300_000);

function runBench(args: string[], timeout: number): void {
  const main = fileURLToPath(new URL("../../bench/main.ts", import.meta.url));
  const r = spawnSync(process.execPath, ["run", main, ...args], { encoding: "utf8", timeout });
  if (r.status !== 0) {
    throw new Error(
      `bun bench ${args.join(" ")} exited ${r.status} (${r.signal ?? "no signal"}):\n${r.stdout.slice(-3000)}\n${
        r.stderr.slice(-3000)
      }`,
    );
  }
}

test("with an NVLink pair, the quick load-skew run's copies show by kind with their publish latency", () => {
  type Metrics = {
    transfers: { count: number; blocks: number };
    transferPlans: {
      completed: Record<string, number>;
      publishMs: { samples: number; p50: number; p95: number; max: number } | null;
    };
  };
  // In "auto" mode whether a CPU run copies depends on timing (a copy to a stepping rank prices in
  // its phase waits); what this checks is the report of copies, so the run forces them.
  const out = join(mkdtempSync(join(tmpdir(), "lmpool-bench-quick-")), "results");
  runBench([
    "e2e",
    "--quick",
    "--topology",
    "0-1",
    "--workload",
    "load-skew",
    "--configs",
    "transfer-rr",
    "--transfer-mode",
    "force",
    "--repetitions",
    "1",
    "--out",
    out,
  ], 120_000);
  const rr: {
    status: string;
    description: string;
    intervals: Record<string, { mean: number }>;
    repetitions: { metrics: Metrics }[];
  } = JSON.parse(readFileSync(join(out, "results.json"), "utf8")).scenarios[0].configurations[0];
  expect(rr.status).toBe("ok");
  expect(rr.description).toContain("transfers forced");
  const m = rr.repetitions[0]!.metrics;
  const kinds = m.transferPlans.completed;
  expect(m.transfers.count).toBeGreaterThanOrEqual(1);
  expect(kinds.prefixCopy! + kinds.offload! + kinds.background!).toBe(m.transfers.count);
  expect(m.transferPlans.publishMs!.samples).toBeGreaterThanOrEqual(m.transfers.count);
  expect(m.transferPlans.publishMs!.p50).toBeGreaterThan(0);
  expect(m.transferPlans.publishMs!.max).toBeGreaterThanOrEqual(m.transferPlans.publishMs!.p95);
  expect(rr.intervals.transferPublishP50!.mean).toBe(m.transferPlans.publishMs!.p50);
  const md = readFileSync(join(out, "summary.md"), "utf8");
  expect(md).toContain("| configuration | plans done | prefix copies |");
  expect(md).toMatch(/\| transfer-rr \| \d/);
}, 400_000);

test("the quick transfer_latency form verifies every forced copy round and reports the 1-block target", () => {
  const file = join(mkdtempSync(join(tmpdir(), "lmpool-bench-quick-")), "latency.json");
  runBench(["transfer_latency", "--quick", "--blocks", "1,4", "--reps", "3", "--out", file], 60_000);
  const r = JSON.parse(readFileSync(file, "utf8"));
  expect(r.schema).toBe("lmpool-transfer-latency/1");
  expect(r.failures).toEqual([]);
  expect(r.points.map((p: { blocks: number }) => p.blocks)).toEqual([1, 4]);
  for (const p of r.points) {
    expect(p.verified).toBe(3);
    expect(p.p50Ms).toBeGreaterThan(0);
    expect(p.maxMs).toBeGreaterThanOrEqual(p.p95Ms);
    // Odd rounds shift round-robin: copies go both ways.
    expect(Object.keys(p.p50ByDirection).sort()).toEqual(["0->1", "1->0"]);
  }
  expect(r.target).toMatchObject({ blocks: 1, limitMs: 1, p50Ms: r.points[0].p50Ms });
  // One warm-up and three measured rounds per size, each one plan; the CPU backend sends over host sockets.
  expect(r.controlPlane).toMatchObject({
    transfer_completed: 8,
    transfer_blocks: 4 * 1 + 4 * 4,
    transfer_publish_samples: 8,
    transfer_publish_1block_samples: 4,
  });
  expect(r.bytesByPath.host).toBe(r.controlPlane.transfer_bytes);
}, 90_000);

test(
  "--gpus with a repeated device runs two ranks on that device; single-gpu runs on the first listed device",
  async () => {
    const out = join(mkdtempSync(join(tmpdir(), "lmpool-bench-quick-")), "results");
    runBench(
      ["e2e", "--quick", "--gpus", "0,0", "--configs", "round-robin", "--repetitions", "1", "--out", out],
      120_000,
    );
    const results = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
    expect(results.metadata.gpusUsed).toBe(1);
    expect(results.metadata.rankDevices).toEqual([0, 0]);
    const rr: {
      status: string;
      description: string;
      repetitions: { error?: string; metrics: { perRankRequests: Record<string, number> } }[];
    } = results.scenarios[0].configurations[0];
    expect(`${rr.status} ${rr.repetitions[0]?.error ?? ""}`).toBe("ok ");
    expect(rr.description).toBe("2 ranks on devices 0,0, round-robin dispatch, transfers off");
    expect(Object.keys(rr.repetitions[0]!.metrics.perRankRequests).sort()).toEqual(["0", "1"]);

    // The CPU backend has device 0 only: asking the single-GPU engine for device 1 must reach the
    // native library and fail there, which shows the first listed device is the one it opens.
    const { buildConfigurations } = await import("../../bench/configurations.ts");
    const { ensureModel } = await import("../../lib/model/demo_model.ts");
    const [single] = buildConfigurations(["single-gpu"], {
      modelDir: await ensureModel("tiny"),
      backend: "cpu",
      gpus: [1, 1],
    });
    await expect(single!.create()).rejects.toThrow(/device 1 does not exist/);
  },
  180_000,
);
