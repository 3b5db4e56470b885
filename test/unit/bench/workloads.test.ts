// Workloads: deterministic from their seed, with the reference's counts and trace shares.
import { describe, expect, test } from "bun:test";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { profileTrace } from "../../../bench/trace_profile.ts";
import { workloadDataPath } from "../../../bench/workloads/data_files.ts";
import { loadSkewWorkload } from "../../../bench/workloads/load_skew.ts";
import { localityWorkload } from "../../../bench/workloads/locality.ts";
import { memorySkewWorkload } from "../../../bench/workloads/memory_skew.ts";
import { multiTurnWorkload } from "../../../bench/workloads/multi_turn.ts";
import { randomLengthsWorkload, readRandom256 } from "../../../bench/workloads/random_lengths.ts";
import { buildWorkload } from "../../../bench/workloads/registry.ts";
import { sharedPrefixWorkload } from "../../../bench/workloads/shared_prefix.ts";
import type { Workload } from "../../../bench/workloads/types.ts";

const ids = (w: Workload) => w.requests.map((r) => r.promptTokenIds as number[]);
const commonPrefix = (a: number[], b: number[]) => {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
};

describe("locality", () => {
  const built = [1, 3, 5].map((scale) => localityWorkload({ scale }));
  test("192 requests, 16 groups of 12, 8 output tokens, run settings", () => {
    for (const w of built) {
      expect(w.requests.length).toBe(192);
      expect(w.requests.every((r) => r.maxTokens === 8 && r.ignoreEos)).toBe(true);
      expect(w.settings).toEqual({ maxInFlight: 16, kvBlocksPerGpu: 384, blockSize: 256 });
      // Group the requests by their first 64 tokens (the group header lives there).
      const groups = new Map<string, number[][]>();
      for (const p of ids(w)) {
        groups.set(p.slice(0, 64).join(","), [...(groups.get(p.slice(0, 64).join(",")) ?? []), p]);
      }
      expect(groups.size).toBe(16);
      expect([...groups.values()].every((g) => g.length === 12)).toBe(true);
    }
  });
  test("the longest shared prefixes reach 1,911 / 5,655 / 9,399 tokens", () => {
    const longest = built.map((w) => {
      let best = 0;
      const p = ids(w);
      for (let i = 0; i < p.length; i++) {
        for (let j = i + 1; j < p.length; j++) {
          if (p[i]![0] === p[j]![0] && p[i]![1] === p[j]![1]) best = Math.max(best, commonPrefix(p[i]!, p[j]!));
        }
      }
      return best;
    });
    // Two requests may share a few question tokens by chance beyond the prefix, never 5 in a row.
    expect(longest.map((n, k) => n - [1911, 5655, 9399][k]!).every((d) => d >= 0 && d < 5)).toBe(true);
  });
  test("trace profile: request share 176/192, token share within the reference's 86-91% band", () => {
    const shares = built.map((w) => profileTrace(w.requests, 256));
    for (const p of shares) {
      expect(p.shareableRequests).toBe(176);
      expect(p.requestShare).toBeCloseTo(0.9167, 4);
      expect(p.tokenShare).toBeGreaterThan(0.85);
      expect(p.tokenShare).toBeLessThan(0.9138 + 0.005);
    }
  });
  test("deterministic from the seed", () => {
    expect(ids(localityWorkload({ scale: 1, seed: 7 }))).toEqual(ids(localityWorkload({ scale: 1, seed: 7 })));
    expect(ids(localityWorkload({ scale: 1, seed: 7 }))).not.toEqual(ids(localityWorkload({ scale: 1, seed: 8 })));
  });
  test("bad options are RangeErrors naming them", () => {
    expect(() => localityWorkload({ scale: 0 })).toThrow(/scale must be a positive integer, got 0/);
    expect(() => localityWorkload({ groups: 300 })).toThrow(/groups \(300\)/);
  });
});

describe("load skew", () => {
  const w = loadSkewWorkload();
  test("3 warm-ups then 189 revisits of the 3 groups, with a phase barrier", () => {
    expect(w.requests.filter((r) => r.phase === "warmup").length).toBe(3);
    expect(w.requests.filter((r) => r.phase === "revisit").length).toBe(189);
    expect(w.requests.slice(0, 3).every((r) => r.phase === "warmup")).toBe(true);
    expect(w.settings.phaseBarrier).toBe(true);
    const heads = new Set(ids(w).map((p) => p.slice(0, 256).join(",")));
    expect(heads.size).toBe(3);
  });
  test("trace profile close to the reference's 98.44% / 97.15%", () => {
    const p = profileTrace(w.requests, 256);
    expect(p.requestShare).toBeCloseTo(189 / 192, 10);
    expect(Math.abs(p.tokenShare - 0.9715)).toBeLessThan(0.003);
  });
  test("deterministic from the seed", () => {
    expect(ids(loadSkewWorkload({ seed: 3 }))).toEqual(ids(loadSkewWorkload({ seed: 3 })));
  });
});

describe("memory skew", () => {
  const w = memorySkewWorkload();
  test("6 session warm-ups, 30 anchor/cold pressure requests, 36 session reuses", () => {
    expect(w.requests.map((r) => r.phase)).toEqual([
      ...Array(6).fill("warmup"),
      ...Array(30).fill("pressure"),
      ...Array(36).fill("reuse"),
    ]);
    const sessions = new Set(w.requests.filter((r) => r.phase === "reuse").map((r) => r.sessionId));
    expect(sessions.size).toBe(6);
    // Every pressure request starts with one session's first block and continues with cold tokens.
    const warm = ids(w).slice(0, 6);
    for (const p of ids(w).slice(6, 36)) {
      const anchored = warm.map((s) => commonPrefix(s, p));
      expect(Math.max(...anchored)).toBeGreaterThanOrEqual(256);
      expect(Math.max(...anchored)).toBeLessThan(300);
    }
  });
  test("sessions and pressure exceed two GPUs' 384-block budgets", () => {
    const blocks = ids(w).slice(0, 36).reduce((n, p) => n + Math.ceil(p.length / 256), 0);
    expect(blocks).toBeGreaterThan(2 * 384);
  });
  test("trace profile close to the reference's 91.67% / 72.29%", () => {
    const p = profileTrace(w.requests, 256);
    expect(p.shareableRequests).toBe(66);
    expect(Math.abs(p.tokenShare - 0.7229)).toBeLessThan(0.005);
  });
});

describe("shared prefix (SGLang generated-shared-prefix)", () => {
  test("SGLang's defaults: 64 groups x 16 prompts, 2048 + 128 tokens, 256 output", () => {
    const w = sharedPrefixWorkload();
    expect(w.requests.length).toBe(1024);
    expect(w.requests.every((r) => r.promptTokenIds!.length === 2176 && r.maxTokens === 256)).toBe(true);
    expect(new Set(ids(w).map((p) => p.slice(0, 2048).join(","))).size).toBe(64);
    expect(profileTrace(w.requests, 256).requestShare).toBeCloseTo(15 / 16, 10);
  });
  test("small parameters", () => {
    const w = sharedPrefixWorkload({
      groups: 2,
      promptsPerGroup: 3,
      systemPromptTokens: 8,
      questionTokens: 2,
      outputTokens: 5,
      shuffle: false,
    });
    expect(w.requests.length).toBe(6);
    expect(ids(w)[0]!.slice(0, 8)).toEqual(ids(w)[2]!.slice(0, 8));
    expect(ids(w)[0]!.slice(0, 8)).not.toEqual(ids(w)[3]!.slice(0, 8));
  });
});

describe("random lengths", () => {
  test("seed 0 reproduces the published random-256.jsonl token for token", () => {
    const file = readRandom256();
    const gen = randomLengthsWorkload();
    expect(file.requests.length).toBe(256);
    expect(file.requests.reduce((n, r) => n + r.promptTokenIds!.length, 0)).toBe(142_827);
    expect(file.requests.reduce((n, r) => n + r.maxTokens, 0)).toBe(133_966);
    expect(ids(gen)).toEqual(ids(file));
    expect(gen.requests.map((r) => r.maxTokens)).toEqual(file.requests.map((r) => r.maxTokens));
    expect(gen.requests.every((r) => r.ignoreEos && r.temperature === 0.6)).toBe(true);
  });
  test("another seed gives another workload within the same bounds", () => {
    const w = randomLengthsWorkload({ seed: 1, numRequests: 32 });
    expect(ids(w)).not.toEqual(ids(randomLengthsWorkload({ numRequests: 32 })));
    for (const r of w.requests) {
      expect(r.promptTokenIds!.length).toBeGreaterThanOrEqual(100);
      expect(r.promptTokenIds!.length).toBeLessThanOrEqual(1024);
      expect(Math.max(...r.promptTokenIds!)).toBeLessThanOrEqual(10000);
    }
  });
});

describe("multi-turn", () => {
  test("each turn extends the previous prompt and answer of its session", () => {
    const w = multiTurnWorkload({ sessions: 3, turns: 4, systemPromptTokens: 20, userTokens: [3, 5], answerTokens: 6 });
    expect(w.requests.length).toBe(12);
    for (let s = 0; s < 3; s++) {
      const turns = w.requests.filter((r) => r.sessionId === `session-${s}`);
      expect(turns.length).toBe(4);
      for (let t = 1; t < 4; t++) {
        const prev = turns[t - 1]!.promptTokenIds!;
        const cur = turns[t]!.promptTokenIds!;
        expect(cur.slice(0, prev.length)).toEqual(prev);
        expect(cur.length - prev.length).toBeGreaterThanOrEqual(6 + 3);
        expect(cur.length - prev.length).toBeLessThanOrEqual(6 + 5);
      }
    }
  });
});

describe("registry", () => {
  test("builds by name and rejects an unknown one", () => {
    expect(buildWorkload({ name: "locality", scale: 3 }).name).toBe("locality-3x");
    expect(buildWorkload({ name: "locality", overrides: { numRequests: 4, groups: 2 } }).requests.length).toBe(4);
    expect(() => buildWorkload({ name: "nope" })).toThrow(/unknown workload "nope"/);
  });
  test("a file path or generator options a workload would not read are refused, not dropped", () => {
    expect(() => buildWorkload({ name: "locality", path: "x.jsonl" })).toThrow(
      'a workload file (x.jsonl) is read by the jsonl and mooncake workloads only, not by "locality"',
    );
    expect(() => buildWorkload({ name: "random-256", overrides: { numRequests: 4 } })).toThrow(
      "the random-256 workload is read from a file; generator options do not apply to it, got numRequests",
    );
    expect(() => buildWorkload({ name: "jsonl" })).toThrow("the jsonl workload needs a file path (--workload-file)");
    expect(buildWorkload({ name: "random-256", seed: 0 }).requests.length).toBe(256);
  });
});

describe("data files", () => {
  test("ship inside the repository: found beside the workload modules, with nothing needed outside the clone", () => {
    const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
    expect(workloadDataPath("random-256.jsonl")).toBe(join(repo, "bench", "workloads", "data", "random-256.jsonl"));
  });
  test("a missing one names the file and where it looked", () => {
    expect(() => workloadDataPath("nope.jsonl")).toThrow(
      /^workload data file "nope.jsonl" not found at .*bench\/workloads\/data\/nope\.jsonl$/,
    );
  });
});
