// `bun bench e2e --quick --workload shared-prefix-ladder` end to end on the CPU backend with the tiny
// model and the real engines: the CPU-sized ladder (4 groups x 3 users, a warm-up pass, 3 rungs)
// runs on round-robin and lmpool-routing, and results.json and summary.md carry one row per
// configuration and rung whose request counts add up, whose offered rates rise, and whose warm-up
// already reuses the group's system prompt.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { QUICK_SHARED_PREFIX_LADDER } from "../../bench/e2e.ts";

interface Interval {
  mean: number;
  halfWidth: number | null;
}

test("the quick shared-prefix ladder reports one row per configuration and rung", () => {
  const out = join(mkdtempSync(join(tmpdir(), "lmpool-bench-ladder-")), "results");
  const main = fileURLToPath(new URL("../../bench/main.ts", import.meta.url));
  const configs = ["round-robin", "lmpool-routing"];
  const args = ["e2e", "--quick", "--workload", "shared-prefix-ladder", "--configs", configs.join(","), "--out", out];
  const r = spawnSync(process.execPath, ["run", main, ...args], { encoding: "utf8", timeout: 150_000 });
  if (r.status !== 0) {
    throw new Error(
      `bun bench ${args.join(" ")} exited ${r.status}:\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`,
    );
  }
  const results = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
  const scenario = results.scenarios[0];
  const q = QUICK_SHARED_PREFIX_LADDER;
  const users = q.groups * q.users;
  expect(scenario.workload.name).toBe("shared-prefix-ladder");
  expect(scenario.arrival).toBe(`ladder ${[Math.max(...q.rates) / 4, ...q.rates].join(", ")} req/s`);
  expect(results.metadata.seeds.arrival).toBe(0);

  // The plan: a warm-up pass over the users, then the rungs, whose counts add up to the workload.
  const rungs = scenario.ladder.rungs as { phase: string; rate: number; requests: number }[];
  expect(rungs.map((g) => g.phase)).toEqual(["warmup", ...q.rates.map((rate, k) => `rung ${k + 1} @ ${rate} req/s`)]);
  expect(rungs[0]!.requests).toBe(users);
  expect(rungs.slice(1).every((g) => g.requests === q.requestsPerRung)).toBe(true);
  expect(rungs.reduce((n, g) => n + g.requests, 0)).toBe(scenario.workload.requests);
  const rates = rungs.slice(1).map((g) => g.rate);
  expect(rates.every((rate, k) => k === 0 || rate > rates[k - 1]!)).toBe(true);

  const rows = scenario.ladder.rows as {
    configuration: string;
    phase: string;
    requests: number;
    repetitions: number;
    intervals: Record<string, Interval>;
  }[];
  expect(rows.map((row) => `${row.configuration} / ${row.phase}`)).toEqual(
    configs.flatMap((c) => rungs.map((g) => `${c} / ${g.phase}`)),
  );
  for (const row of rows) {
    expect(row.repetitions).toBe(2);
    // Every request of the rung completed, in every repetition.
    expect(row.intervals.completed).toMatchObject({ mean: row.requests, halfWidth: 0 });
    expect(row.intervals.requestThroughput!.mean).toBeGreaterThan(0);
    expect(row.intervals.outputThroughput!.mean).toBeGreaterThan(0);
    expect(row.intervals.ttftMean!.mean).toBeGreaterThan(0);
    expect(row.intervals.ttftP99!.mean).toBeGreaterThanOrEqual(row.intervals.ttftMean!.mean);
  }
  // A group's later users reuse its system prompt from the warm-up on: the warm-up sends each user
  // once, so whatever it reuses is a second (or third) request of a group hitting the first's prefix.
  for (const row of rows.filter((x) => x.phase === "warmup")) {
    expect(row.intervals.tokenReuse!.mean).toBeGreaterThan(0);
  }

  // Per repetition, the phase breakdown holds each rung with its own achieved throughput.
  for (const c of scenario.configurations) {
    expect(c.status).toBe("ok");
    for (const rep of c.repetitions) {
      expect(Object.keys(rep.metrics.phases)).toEqual(rungs.map((g) => g.phase));
      for (const g of rungs) expect(rep.metrics.phases[g.phase].requests).toBe(g.requests);
      expect(rep.metrics.completed).toBe(scenario.workload.requests);
    }
  }

  const md = readFileSync(join(out, "summary.md"), "utf8");
  expect(md).toContain("Per rung");
  for (const c of configs) {
    for (const g of rungs) expect(md).toContain(`| ${c} | ${g.phase} | ${g.rate} | ${g.requests} | 2 |`);
  }
}, 180_000);
