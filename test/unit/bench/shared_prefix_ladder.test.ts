// The shared-prefix ladder: sizes, determinism from its seed, prefix sharing within a group and not
// across groups, rungs as phases in the order inference-perf walks its users, option checks, and
// how --arrival drives it (and other workloads) through workloadArrival.
import { describe, expect, test } from "bun:test";
import { arrivalOffsetsMs, parseArrival } from "../../../bench/driver/arrival.ts";
import { ladderRateOptions, workloadArrival } from "../../../bench/driver/ladder_arrival.ts";
import { localityWorkload } from "../../../bench/workloads/locality.ts";
import { memorySkewWorkload } from "../../../bench/workloads/memory_skew.ts";
import { buildWorkload } from "../../../bench/workloads/registry.ts";
import {
  ladderPhasesOf,
  SHARED_PREFIX_LADDER_DEFAULTS,
  sharedPrefixLadderWorkload,
  WARMUP_PHASE,
} from "../../../bench/workloads/shared_prefix_ladder.ts";

const small = {
  groups: 4,
  users: 3,
  systemTokens: 64,
  questionTokens: 16,
  outputTokens: 4,
  rates: [4, 8, 16],
  requestsPerRung: 12,
};
const prompt = (w: ReturnType<typeof sharedPrefixLadderWorkload>, i: number) =>
  w.requests[i]!.promptTokenIds as number[];
const commonPrefix = (a: number[], b: number[]) => {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
};

describe("shared-prefix ladder workload", () => {
  test("defaults: 40 x 5 users, 1,500 + 300 tokens, 250 out, a warm-up pass then rungs of rate x 8 s", () => {
    const w = sharedPrefixLadderWorkload();
    const d = SHARED_PREFIX_LADDER_DEFAULTS;
    expect(w.name).toBe("shared-prefix-ladder");
    const phases = ladderPhasesOf(w);
    expect(phases[0]).toEqual({ phase: WARMUP_PHASE, rate: 15, requests: 200, rung: false });
    expect(phases.slice(1).map((p) => p.rate)).toEqual([...d.rates]);
    expect(phases.slice(1).map((p) => p.requests)).toEqual(d.rates.map((r) => r * 8));
    expect(w.requests.length).toBe(phases.reduce((n, p) => n + p.requests, 0));
    expect(w.requests.every((r) => r.promptTokenIds!.length === 1800 && r.maxTokens === 250 && r.ignoreEos)).toBe(
      true,
    );
    expect(w.settings).toEqual({ blockSize: 256, kvBlocksPerGpu: 1600, phaseBarrier: true });
    // Rates rise rung after rung.
    const rates = phases.slice(1).map((p) => p.rate);
    expect(rates.every((r, k) => k === 0 || r > rates[k - 1]!)).toBe(true);
  });

  test("every request carries its phase, in rung order, and phases count what they send", () => {
    const w = sharedPrefixLadderWorkload(small);
    const labels = w.requests.map((r) => r.phase);
    expect([...new Set(labels)]).toEqual(["warmup", "rung 1 @ 4 req/s", "rung 2 @ 8 req/s", "rung 3 @ 16 req/s"]);
    for (const p of ladderPhasesOf(w)) expect(labels.filter((l) => l === p.phase).length).toBe(p.requests);
    expect(w.requests.map((r) => r.id)).toEqual(
      w.requests.map((_, i) => `shared-prefix-ladder-${String(i).padStart(4, "0")}`),
    );
  });

  test("deterministic from its seed; another seed changes the prompts and their order", () => {
    const a = sharedPrefixLadderWorkload({ ...small, seed: 7 });
    expect(sharedPrefixLadderWorkload({ ...small, seed: 7 })).toEqual(a);
    expect(sharedPrefixLadderWorkload({ ...small, seed: 8 }).requests.map((r) => r.promptTokenIds)).not.toEqual(
      a.requests.map((r) => r.promptTokenIds),
    );
  });

  test("users of one group share exactly the system prompt; groups share nothing but chance", () => {
    const w = sharedPrefixLadderWorkload(small);
    const users = Array.from({ length: 12 }, (_, i) => prompt(w, i));
    expect(new Set(users.map((p) => p.join(","))).size).toBe(12);
    const bySystem = new Map<string, number[][]>();
    for (const p of users) {
      const key = p.slice(0, 64).join(",");
      bySystem.set(key, [...(bySystem.get(key) ?? []), p]);
    }
    expect(bySystem.size).toBe(4);
    for (const group of bySystem.values()) {
      expect(group.length).toBe(3);
      // The questions differ from their first token (ids drawn from 10,001 values: a tie is unlikely at this seed).
      expect(commonPrefix(group[0]!, group[1]!)).toBe(64);
    }
    const systems = [...bySystem.keys()].map((k) => k.split(",").map(Number));
    expect(commonPrefix(systems[0]!, systems[1]!)).toBeLessThan(4);
  });

  test("the users are shuffled, and every phase walks them from the same start, cycling", () => {
    const w = sharedPrefixLadderWorkload({ ...small, requestsPerRung: 30 });
    const firstPass = Array.from({ length: 12 }, (_, i) => prompt(w, i).join(","));
    // Not group by group: consecutive users do not all share their system prompt.
    const groupOf = (key: string) => key.split(",").slice(0, 64).join(",");
    expect(firstPass.slice(0, 3).map(groupOf).every((g, _, all) => g === all[0])).toBe(false);
    const phases = ladderPhasesOf(w);
    let at = 0;
    for (const p of phases) {
      for (let i = 0; i < p.requests; i++) expect(prompt(w, at + i).join(",")).toBe(firstPass[i % 12]!);
      at += p.requests;
    }
  });

  test("rungs sized by seconds send round(rate x seconds); warm-up rate and count can be set or left out", () => {
    const bySeconds = ladderPhasesOf(
      sharedPrefixLadderWorkload({ ...small, requestsPerRung: undefined, secondsPerRung: 2.5, rates: [0.2, 3, 9] }),
    );
    expect(bySeconds.map((p) => p.requests)).toEqual([12, 1, 8, 23]);
    expect(bySeconds[0]!.rate).toBe(9 / 4);
    const noWarmup = ladderPhasesOf(sharedPrefixLadderWorkload({ ...small, warmupRequests: 0 }));
    expect(noWarmup.map((p) => p.phase)).toEqual(["rung 1 @ 4 req/s", "rung 2 @ 8 req/s", "rung 3 @ 16 req/s"]);
    expect(ladderPhasesOf(sharedPrefixLadderWorkload({ ...small, warmupRequests: 5, warmupRate: 1 }))[0]).toEqual({
      phase: "warmup",
      rate: 1,
      requests: 5,
      rung: false,
    });
  });

  test("bad options are refused with their name and value", () => {
    expect(() => sharedPrefixLadderWorkload({ ...small, rates: [] })).toThrow(/rates must be a non-empty list/);
    expect(() => sharedPrefixLadderWorkload({ ...small, rates: [2, 0] })).toThrow(/rates must be finite.*\[2,0\]/);
    expect(() => sharedPrefixLadderWorkload({ ...small, rates: [2, Infinity] })).toThrow(/rates must be finite/);
    expect(() => sharedPrefixLadderWorkload({ ...small, secondsPerRung: 3 })).toThrow(
      /requestsPerRung \(12\) and secondsPerRung \(3\) both size the rungs/,
    );
    expect(() => sharedPrefixLadderWorkload({ ...small, users: 0 })).toThrow(/users must be a positive integer, got 0/);
    expect(() => sharedPrefixLadderWorkload({ ...small, warmupRequests: -1 })).toThrow(/warmupRequests .* got -1/);
    expect(() => sharedPrefixLadderWorkload({ ...small, warmupRequests: 0, warmupRate: 2 })).toThrow(/warmupRate/);
    expect(() => sharedPrefixLadderWorkload({ ...small, promptsPerGroup: 3 } as never)).toThrow(
      /unknown shared-prefix-ladder option promptsPerGroup/,
    );
  });

  test("the registry builds it by name, with overrides", () => {
    const w = buildWorkload({ name: "shared-prefix-ladder", seed: 3, overrides: small });
    expect(w).toEqual(sharedPrefixLadderWorkload({ ...small, seed: 3 }));
  });
});

describe("--arrival on a workload (workloadArrival)", () => {
  test("the ladder brings its own rates, warm-up first, seeded by the run's seed", () => {
    const w = sharedPrefixLadderWorkload(small);
    const r = workloadArrival(w, undefined, parseArrival("burst", 5), 5);
    expect(r.workload).toBe(w);
    expect(r.arrival).toEqual({ kind: "ladder", rates: [4, 4, 8, 16], seed: 5 });
    expect(r.rungs).toEqual([
      { phase: "warmup", rate: 4, requests: 12 },
      { phase: "rung 1 @ 4 req/s", rate: 4, requests: 12 },
      { phase: "rung 2 @ 8 req/s", rate: 8, requests: 12 },
      { phase: "rung 3 @ 16 req/s", rate: 16, requests: 12 },
    ]);
    expect(arrivalOffsetsMs(r.workload.requests, r.arrival).length).toBe(48);
  });

  test("a rate or a list given to --arrival becomes the ladder's rates; burst, trace or a second source is refused", () => {
    expect(ladderRateOptions(undefined, parseArrival("burst", 0), {})).toEqual({});
    expect(ladderRateOptions("2,4,8", parseArrival("2,4,8", 0), {})).toEqual({ rates: [2, 4, 8] });
    expect(ladderRateOptions("3", parseArrival("3", 0), {})).toEqual({ rates: [3] });
    expect(() => ladderRateOptions("burst", parseArrival("burst", 0), {})).toThrow(/--arrival burst: .* ladder/);
    expect(() => ladderRateOptions("trace", parseArrival("trace", 0), {})).toThrow(/--arrival trace/);
    expect(() => ladderRateOptions("2,4", parseArrival("2,4", 0), { rates: [1] })).toThrow(
      /--arrival 2,4 and --workload-options' rates/,
    );
  });

  test("a ladder on a workload without phases labels its requests by rung, in equal consecutive parts", () => {
    const w = localityWorkload({ numRequests: 10, groups: 2 });
    const r = workloadArrival(w, "1,2,4", parseArrival("1,2,4", 0), 0);
    expect(w.requests.every((q) => q.phase === undefined)).toBe(true);
    expect(r.workload.requests.map((q) => q.phase)).toEqual([
      ...Array(3).fill("rung 1 @ 1 req/s"),
      ...Array(3).fill("rung 2 @ 2 req/s"),
      ...Array(4).fill("rung 3 @ 4 req/s"),
    ]);
    expect(r.rungs!.map((g) => g.requests)).toEqual([3, 3, 4]);
    expect(r.arrival).toEqual({ kind: "ladder", rates: [1, 2, 4], seed: 0 });
  });

  test("a ladder on a phased workload needs one rate per phase, and says so naming --arrival", () => {
    const w = memorySkewWorkload();
    const phases = [...new Set(w.requests.map((q) => q.phase))];
    const rates = phases.map((_, k) => k + 1).join(",");
    const r = workloadArrival(w, rates, parseArrival(rates, 0), 0);
    expect(r.workload).toBe(w);
    expect(r.rungs!.map((g) => g.phase)).toEqual(phases as string[]);
    expect(() => workloadArrival(w, "1,2", parseArrival("1,2", 0), 0)).toThrow(
      /--arrival 1,2 on memory-skew: a ladder of 2 rates needs 2 phases/,
    );
  });

  test("other arrivals pass through unchanged", () => {
    const w = localityWorkload();
    expect(workloadArrival(w, "4", parseArrival("4", 1), 1)).toEqual({
      workload: w,
      arrival: { kind: "poisson", rate: 4, seed: 1 },
    });
  });
});

describe("bun bench e2e's flags for the ladder", () => {
  test("--arrival errors name the flag and value before any engine starts", async () => {
    const { runE2E } = await import("../../../bench/e2e.ts");
    const quiet = () => {};
    await expect(runE2E(["--quick", "--arrival", "2,0,8"], quiet)).rejects.toThrow(
      /--arrival must be .* got "2,0,8"; rate 2 \("0"\) is not one/,
    );
    await expect(runE2E(["--quick", "--workload", "shared-prefix-ladder", "--arrival", "burst"], quiet)).rejects
      .toThrow(/--arrival burst: the shared-prefix-ladder workload is a ladder of Poisson rates/);
    await expect(
      runE2E([
        "--quick",
        "--workload",
        "shared-prefix-ladder",
        "--arrival",
        "2,4",
        "--workload-options",
        '{"rates":[1]}',
      ], quiet),
    ).rejects.toThrow(/--arrival 2,4 and --workload-options' rates both set/);
  });

  test("--help documents the ladder workload and --arrival's list of rates", async () => {
    const { runE2E } = await import("../../../bench/e2e.ts");
    const lines: string[] = [];
    expect(await runE2E(["--help"], (l) => lines.push(l))).toBeNull();
    expect(lines.join("\n")).toContain("shared-prefix-ladder");
    expect(lines.join("\n")).toMatch(/a ladder of rates, e\.g\. 2,4,8/);
  });
});
