/**
 * The cluster simulator in its CI forms: a quick 8-GPU and a quick 64-GPU simulation must conserve
 * every request and block (each request finishes exactly once; at the end the page table equals
 * what the workers publish and nothing is leaked), be deterministic (two runs give the same JSON
 * apart from wall-clock fields), and replay the Mooncake trace with the block reuse its hash ids
 * imply (with an unlimited cache, one request at a time).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runSimulate } from "../../../bench/simulate.ts";
import type { BenchResults } from "../../../bench/report/schema.ts";
import type { SimulatedRunSummary } from "../../../bench/simulator/simulate_configurations.ts";
import { VirtualClock } from "../../../lib/core/virtual_clock.ts";
import { SharedGpu } from "../../../bench/simulator/shared_gpu.ts";
import { EventTimers } from "../../../bench/simulator/event_timers.ts";

const quiet = () => {};

async function simulate(args: string[]): Promise<{ results: BenchResults; runs: SimulatedRunSummary[]; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), "lmpool-sim-"));
  const out = await runSimulate([...args, "--out", dir], quiet);
  if (!out) throw new Error("no result");
  return { results: out.results, runs: out.runs, dir };
}

/** results.json without the fields that hold wall-clock readings (timestamps, host facts). */
function comparable(dir: string): unknown {
  const r = JSON.parse(readFileSync(join(dir, "results.json"), "utf8")) as { metadata: unknown };
  const { metadata: _m, ...rest } = r;
  return rest;
}

function expectConserved(results: BenchResults, runs: SimulatedRunSummary[]): void {
  for (const run of runs) expect(run.audit).toEqual([]);
  for (const s of results.scenarios) {
    for (const c of s.configurations) {
      expect(c.status).toBe("ok");
      for (const rep of c.repetitions) {
        expect(rep.complete).toBe(true);
        // Every request finished exactly once: as many completions as requests, none failed.
        expect(rep.metrics!.completed).toBe(s.workload.requests);
        expect(rep.metrics!.failed).toBe(0);
        const perRank = Object.values(rep.metrics!.perRankRequests).reduce((a, b) => a + b, 0);
        expect(perRank).toBe(s.workload.requests);
      }
    }
  }
}

describe("bun bench simulate", () => {
  test("--quick: 8 GPUs, conservation, and the same JSON twice", async () => {
    const a = await simulate(["--quick", "--workload", "locality", "--scales", "3"]);
    const b = await simulate(["--quick", "--workload", "locality", "--scales", "3"]);
    try {
      expectConserved(a.results, a.runs);
      expect(a.runs.length).toBe(4 * 2);
      expect(comparable(a.dir)).toEqual(comparable(b.dir));
      // Cache-aware routing reuses more than round-robin on a locality trace.
      const cfg = a.results.scenarios[0]!.configurations;
      const reuse = (n: string) => cfg.find((c) => c.name === n)!.intervals.tokenReuse!.mean;
      expect(reuse("cache-aware")).toBeGreaterThan(reuse("round-robin"));
    } finally {
      rmSync(a.dir, { recursive: true, force: true });
      rmSync(b.dir, { recursive: true, force: true });
    }
  }, 120_000);

  test("--save-requests writes every request of every seed, with the figures its metrics came from", async () => {
    const { results, dir } = await simulate([
      "--workload",
      "locality",
      "--scales",
      "1",
      "--configs",
      "round-robin,lmpool",
      "--seeds",
      "2",
      "--save-requests",
    ]);
    try {
      const s = results.scenarios[0]!;
      for (const c of s.configurations) {
        for (const seed of [0, 1]) {
          const lines = readFileSync(join(dir, "requests", s.workload.name, `${c.name}-${seed}.jsonl`), "utf8")
            .trim().split("\n").map((l) => JSON.parse(l) as { id: string; ttftMs: number; rank: number });
          expect(lines.length).toBe(s.workload.requests);
          expect(new Set(lines.map((r) => r.id)).size).toBe(lines.length);
          const mean = lines.reduce((a, r) => a + r.ttftMs, 0) / lines.length;
          expect(mean).toBeCloseTo(c.repetitions[seed]!.metrics!.ttftMs.mean, 6);
          expect(lines.every((r) => r.rank === 0 || r.rank === 1)).toBe(true);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test("a quick 64-GPU Mooncake simulation conserves requests and blocks, deterministically", async () => {
    const args = [
      "--quick",
      "--gpus",
      "64",
      "--workload",
      "mooncake",
      "--first",
      "600",
      "--arrival",
      "trace",
      "--speedup",
      "16",
      "--configs",
      "round-robin,lmpool",
      "--seeds",
      "1",
    ];
    const a = await simulate(args);
    const b = await simulate(args);
    try {
      expectConserved(a.results, a.runs);
      expect(comparable(a.dir)).toEqual(comparable(b.dir));
      // All 64 simulated ranks serve: round-robin sends work to every one of them.
      const rr = a.results.scenarios[0]!.configurations.find((c) => c.name === "round-robin")!;
      expect(Object.keys(rr.repetitions[0]!.metrics!.perRankRequests).length).toBe(64);
    } finally {
      rmSync(a.dir, { recursive: true, force: true });
      rmSync(b.dir, { recursive: true, force: true });
    }
  }, 180_000);

  test("the Mooncake replay's block reuse equals the reuse its hash ids imply", async () => {
    const { results, dir } = await simulate([
      "--gpus",
      "1",
      "--workload",
      "mooncake",
      "--first",
      "400",
      "--max-in-flight",
      "1",
      "--kv-blocks",
      "100000",
      "--configs",
      "round-robin",
      "--seeds",
      "1",
    ]);
    try {
      const s = results.scenarios[0]!;
      const fromIds = s.workload.params.hashIdTokenShare as number;
      const reuse = s.configurations[0]!.repetitions[0]!.metrics!.tokenReuse;
      expect(fromIds).toBeGreaterThan(0.1);
      expect(Math.abs(reuse - fromIds)).toBeLessThan(0.001);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  test("bad options are refused by name", async () => {
    await expect(runSimulate(["--topology", "ring"], quiet)).rejects.toThrow("--topology");
    await expect(runSimulate(["--configs", "single-gpu"], quiet)).rejects.toThrow("single-gpu");
    await expect(runSimulate(["--perturb", "noise=2"], quiet)).rejects.toThrow("--perturb");
    await expect(runSimulate(["--device-local-copy", "maybe"], quiet)).rejects.toThrow("--device-local-copy");
    await expect(runSimulate(["--workload", "locality", "--arrival", "trace", "--speedup-per-gpu", "1"], quiet))
      .rejects.toThrow("--speedup-per-gpu paces a mooncake trace only; not locality");
    await expect(
      runSimulate(["--per-gpu", '{"numRequests":4}', "--workload-options", '{"numRequests":8}'], quiet),
    ).rejects.toThrow("--per-gpu and --workload-options both set numRequests");
    await expect(runSimulate(["--model", "qwen3-1.7b"], quiet)).rejects.toThrow(/--model qwen3-1.7b does not match/);
  });
});

describe("SharedGpu", () => {
  test("ranks of one GPU share its compute: two equal steps both end after twice the time", async () => {
    const clock = new VirtualClock();
    const gpu = new SharedGpu(0, new EventTimers(clock));
    const ends: number[] = [];
    gpu.run(10, () => ends.push(clock.now()));
    gpu.run(10, () => ends.push(clock.now()));
    await clock.advance(100);
    expect(ends).toEqual([20, 20]);
    expect(gpu.busyMs).toBeCloseTo(20, 9);
  });

  test("a short step beside a long one ends first; the long one then runs alone", async () => {
    const clock = new VirtualClock();
    const gpu = new SharedGpu(0, new EventTimers(clock));
    const ends: Record<string, number> = {};
    gpu.run(30, () => (ends.long = clock.now()));
    gpu.run(10, () => (ends.short = clock.now()));
    await clock.advance(100);
    expect(ends.short).toBeCloseTo(20, 9);
    expect(ends.long).toBeCloseTo(40, 9);
  });
});
