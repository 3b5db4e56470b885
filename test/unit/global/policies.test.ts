// Each routing policy's choice on constructed page-table states.
import { expect, test } from "bun:test";
import type { RankLoad } from "../../../lib/core/block_snapshot.ts";
import { GlobalScheduler } from "../../../lib/global/global_scheduler.ts";
import { createPolicy } from "../../../lib/global/policies/policy_registry.ts";
import { DEFAULT_ROUTING_CONFIG, type PolicyName } from "../../../lib/global/routing_config.ts";
import type { RouteQuery } from "../../../lib/global/routing_context.ts";
import { chainEntries, hashesOf, IDLE, promptTokens, snapshot } from "./page_table_fixture.ts";

const doc = promptTokens(1, 160); // 10 blocks
let n = 0;
const ask = (tokens: number[], o: Partial<RouteQuery> = {}): RouteQuery => ({
  requestId: `p${n++}`,
  blockHashes: hashesOf(tokens),
  promptTokens: tokens.length,
  maxTokens: 16,
  ...o,
});
const load = (numRunning: number, numWaiting = 0): RankLoad => ({
  numRunning,
  numWaiting,
  runningTokens: numRunning * 100,
  waitingTokens: numWaiting * 100,
});

function sched(policy: PolicyName, ranks: Parameters<typeof snapshot>[1][]): GlobalScheduler {
  const s = new GlobalScheduler({ config: { policy } });
  ranks.forEach((o, r) => s.applySnapshot(snapshot(r, o)));
  return s;
}

/** Routes without leaving a reservation behind, so each call sees the constructed state. */
function pick(s: GlobalScheduler, q: RouteQuery) {
  const d = s.route(q);
  s.release(q.requestId);
  return d;
}

test("unknown policy names are a RangeError listing the valid ones", () => {
  expect(() => createPolicy("random", DEFAULT_ROUTING_CONFIG)).toThrow(
    /"random".*lmpool, round-robin, least-loaded, prefix-only, cache-aware, weighted-scorers, session-affinity/,
  );
  expect(() => new GlobalScheduler({ config: { policy: "fastest" as PolicyName } })).toThrow(RangeError);
  expect(new GlobalScheduler().policy.name).toBe("lmpool");
});

test("round-robin cycles over healthy ranks and skips dead ones", () => {
  const s = sched("round-robin", [{}, {}, {}]);
  expect([0, 1, 2, 3].map(() => pick(s, ask(doc)).rank)).toEqual([0, 1, 2, 0]);
  s.dropRank(2);
  expect([0, 1, 2].map(() => pick(s, ask(doc)).rank)).toEqual([1, 0, 1]);
});

test("least-loaded picks the fewest outstanding requests regardless of cache", () => {
  const s = sched("least-loaded", [{ load: load(3) }, { load: load(1, 1) }, {
    load: load(4),
    entries: chainEntries(hashesOf(doc)),
  }]);
  expect(pick(s, ask(doc)).rank).toBe(1);
  s.route(ask(doc)); // one pending request on rank 1: 3 vs 3, and rank 1 has more queued work
  expect(pick(s, ask(doc)).rank).toBe(0);
});

test("least-loaded breaks full ties by turn, not by rank index", () => {
  const s = sched("least-loaded", [{}, {}, {}]);
  expect([0, 1, 2, 3].map(() => pick(s, ask(doc)).rank)).toEqual([0, 1, 2, 0]);
  s.dropRank(1);
  expect([0, 1, 2].map(() => pick(s, ask(doc)).rank)).toEqual([2, 0, 2]);
});

test("prefix-only takes the longest match even on a loaded rank; ties go to the less loaded", () => {
  const h = hashesOf(doc);
  const s = sched("prefix-only", [{ entries: chainEntries(h.slice(0, 4)) }, {
    load: load(50),
    entries: chainEntries(h.slice(0, 7)),
  }, { entries: chainEntries(h.slice(0, 7)), load: load(10) }]);
  expect(pick(s, ask(doc))).toMatchObject({ rank: 2, matchedBlocks: 7, reason: "prefix-hit" });
  expect(pick(s, ask(promptTokens(9, 64))).reason).toBe("prefix-miss");
});

test("cache-aware: imbalance goes to the shortest queue", () => {
  const s = sched("cache-aware", [{ load: load(100), entries: chainEntries(hashesOf(doc)) }, { load: load(10) }, {
    load: load(30),
  }]);
  expect(pick(s, ask(doc))).toMatchObject({ rank: 1, reason: "balance" });
});

test("cache-aware: a large absolute gap under the relative threshold is not imbalance", () => {
  const s = sched("cache-aware", [{ load: load(200), entries: chainEntries(hashesOf(doc)) }, { load: load(150) }]);
  expect(pick(s, ask(doc))).toMatchObject({ rank: 0, reason: "cache-hit" });
});

test("cache-aware: match rate above 0.3 goes to the best match, else to the smallest tree", () => {
  const h = hashesOf(doc);
  const ranks = [{ entries: chainEntries(hashesOf(promptTokens(5, 320))) }, { entries: chainEntries(h.slice(0, 4)) }, {
    entries: chainEntries(hashesOf(promptTokens(6, 96))),
  }];
  const s = sched("cache-aware", ranks);
  expect(pick(s, ask(doc))).toMatchObject({ rank: 1, reason: "cache-hit" }); // 64/160 = 0.4
  const bigTree = [...chainEntries(h.slice(0, 3)), ...chainEntries(hashesOf(promptTokens(7, 160)), 50)];
  const t = sched("cache-aware", [ranks[0], { entries: bigTree }, ranks[2]]);
  expect(pick(t, ask(doc))).toMatchObject({ rank: 2, reason: "smallest-tree" }); // 48/160 = 0.3: not above
});

test("weighted scorers: prefix 3, queue 2, KV utilization 2", () => {
  // rank 0: prefix 1, queue worst (0), KV 80% free -> 3 + 0 + 1.6 = 4.6; rank 1: 0 + 2 + 2 = 4.
  const full = chainEntries(hashesOf(doc), 0, 1);
  const s = sched("weighted-scorers", [{ load: load(0, 4), entries: full, numBlocks: 50, free: 40 }, {
    numBlocks: 50,
  }]);
  expect(pick(s, ask(doc))).toMatchObject({ rank: 0, reason: "weighted-score" });
  // At 50% free on rank 0: 3 + 0 + 1 = 4 < rank 1's 4 only by tie -> fewer outstanding wins.
  const t = sched("weighted-scorers", [{ load: load(0, 4), entries: full, numBlocks: 20, free: 10 }, {
    numBlocks: 50,
  }]);
  expect(pick(t, ask(doc)).rank).toBe(1);
  // At 40% free: 3 + 0 + 0.8 = 3.8 < 4.
  const u = sched("weighted-scorers", [{ load: load(0, 4), entries: full, numBlocks: 25, free: 10 }, {
    numBlocks: 50,
  }]);
  expect(pick(u, ask(doc)).rank).toBe(1);
});

test("session affinity sticks to the first rank, moves when it dies, and forgets the least recent", () => {
  const s = new GlobalScheduler({ config: { policy: "session-affinity", sessionAffinity: { maxSessions: 2 } } });
  s.applySnapshot(snapshot(0));
  s.applySnapshot(snapshot(1, { entries: chainEntries(hashesOf(doc)) }));
  expect(pick(s, ask(doc, { sessionId: "a" }))).toMatchObject({ rank: 1, reason: "session-new" });
  expect(pick(s, ask(promptTokens(7, 64), { sessionId: "a" }))).toMatchObject({ rank: 1, reason: "session" });
  expect(pick(s, ask(promptTokens(8, 64))).reason).toBe("least-cost"); // no session: lmpool
  pick(s, ask(promptTokens(9, 64), { sessionId: "b" }));
  pick(s, ask(promptTokens(9, 64), { sessionId: "c" })); // evicts "a"
  expect(pick(s, ask(promptTokens(10, 64), { sessionId: "a" })).reason).toBe("session-new");
  const c = pick(s, ask(promptTokens(11, 64), { sessionId: "c" }));
  expect(c.reason).toBe("session");
  s.dropRank(c.rank);
  expect(pick(s, ask(promptTokens(12, 64), { sessionId: "c" }))).toMatchObject({
    rank: 1 - c.rank,
    reason: "session-new",
  });
});

test("every policy routes only to healthy ranks", () => {
  for (
    const p of [
      "lmpool",
      "round-robin",
      "least-loaded",
      "prefix-only",
      "cache-aware",
      "weighted-scorers",
      "session-affinity",
    ] as PolicyName[]
  ) {
    const s = sched(p, [{}, { entries: chainEntries(hashesOf(doc)) }, { load: IDLE }]);
    s.dropRank(1);
    for (let i = 0; i < 4; i++) expect([0, 2]).toContain(pick(s, ask(doc, { sessionId: "s" })).rank);
  }
});
