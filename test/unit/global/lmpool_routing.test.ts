// lmpool routing through the GlobalScheduler: hit/miss, capacity feasibility, overloaded-owner
// bypass and bounded spill, NVLink pair filtering, stale state and dead ranks.
import { expect, test } from "bun:test";
import { CapacityError } from "../../../lib/core/errors.ts";
import { GlobalScheduler, NoHealthyRankError } from "../../../lib/global/global_scheduler.ts";
import type { RouteQuery } from "../../../lib/global/routing_context.ts";
import { NvlinkTopology } from "../../../lib/global/topology.ts";
import { chainEntries, hashesOf, promptTokens, snapshot } from "./page_table_fixture.ts";

let qid = 0;
function query(tokens: number[], o: Partial<RouteQuery> = {}): RouteQuery {
  return { requestId: `q${qid++}`, blockHashes: hashesOf(tokens), promptTokens: tokens.length, maxTokens: 32, ...o };
}

function cluster(n: number, opts: ConstructorParameters<typeof GlobalScheduler>[0] = {}): GlobalScheduler {
  const s = new GlobalScheduler(opts);
  for (let r = 0; r < n; r++) s.applySnapshot(snapshot(r));
  return s;
}

const shared = promptTokens(1, 800); // 50 blocks of system prompt
const withSuffix = (k: number) => promptTokens(1, 800, k, 100);

test("a cached prefix attracts the request (hit); an unknown prompt goes to the least-cost rank (miss)", () => {
  const s = cluster(4);
  s.applySnapshot(snapshot(2, { version: 2, entries: chainEntries(hashesOf(shared)) }));
  const q = query(withSuffix(1));
  expect(s.route(q)).toMatchObject({ rank: 2, reason: "prefix-hit", matchedBlocks: 50, feasible: true });
  expect(s.release(q.requestId)).toBe(true);
  const miss = s.route(query(promptTokens(99, 300)));
  expect(miss.matchedBlocks).toBe(0);
  expect(miss.reason).toBe("least-cost");
  expect(miss.rank).toBe(0);
});

test("pending reservations spread cold requests over idle ranks", () => {
  const s = cluster(4);
  const ranks = [0, 1, 2, 3, 4, 5, 6, 7].map((k) => s.route(query(promptTokens(200 + k, 320))).rank);
  expect(ranks.slice(0, 4).sort()).toEqual([0, 1, 2, 3]);
  expect(ranks.slice(4).sort()).toEqual([0, 1, 2, 3]);
});

test("a capacity-infeasible prefix owner is skipped; nothing feasible routes with feasible=false", () => {
  const s = cluster(2);
  const held = chainEntries(hashesOf(shared), 0, 1); // all referenced: not reclaimable
  s.applySnapshot(snapshot(1, { version: 2, numBlocks: 60, free: 2, entries: held }));
  const d = s.route(query(withSuffix(2))); // needs 7 + 1 new blocks on rank 1, has 2
  expect(d.rank).toBe(0);
  expect(d.reason).toBe("least-cost");
  s.applySnapshot(
    snapshot(0, { version: 2, numBlocks: 60, free: 3, entries: chainEntries(hashesOf(promptTokens(5, 800)), 0, 1) }),
  );
  const none = s.route(query(withSuffix(3)));
  expect(none.feasible).toBe(false);
  expect(none.reason).toBe("infeasible");
  expect(() => s.route(query(promptTokens(7, 16 * 70)))).toThrow(CapacityError);
});

test("reclaimable blocks make a rank feasible, at a reclaim-pressure cost", () => {
  const cached = (k: number, n: number) => chainEntries(hashesOf(promptTokens(k, 16 * n)), 100, 0);
  const s = cluster(2);
  s.applySnapshot(snapshot(0, { version: 2, numBlocks: 60, free: 0, entries: cached(3, 40) })); // evicts to fit
  s.applySnapshot(snapshot(1, { version: 2, numBlocks: 60, free: 0, entries: cached(4, 5) })); // too few to evict
  const d = s.route(query(promptTokens(9, 16 * 8))); // 9 new blocks
  expect(d).toMatchObject({ rank: 0, feasible: true });
  const t = cluster(2);
  t.applySnapshot(snapshot(0, { version: 2, numBlocks: 60, free: 0, entries: cached(3, 40) }));
  t.applySnapshot(snapshot(1, { version: 2, numBlocks: 60, free: 20, entries: cached(4, 5) }));
  expect(t.route(query(promptTokens(10, 16 * 8))).rank).toBe(1); // no eviction needed there
});

test("an overloaded prefix owner is bypassed by cost", () => {
  const s = cluster(2);
  s.applySnapshot(
    snapshot(1, {
      version: 2,
      entries: chainEntries(hashesOf(shared)),
      load: { numRunning: 8, numWaiting: 20, runningTokens: 8000, waitingTokens: 30000 },
    }),
  );
  const d = s.route(query(withSuffix(4)));
  expect(d.rank).toBe(0);
  expect(d.matchedBlocks).toBe(0);
});

test("bounded spill: the owner's cost still wins but its load gap triggers a spill, unless the extra prefill exceeds the bound", () => {
  const cfg = { cost: { missingPrefillWeight: 4 } };
  const busy = { numRunning: 0, numWaiting: 10, runningTokens: 0, waitingTokens: 10000 };
  const small = promptTokens(1, 16 * 200); // 3200 cached tokens: extra prefill 3200 <= 4096
  const s = cluster(2, { config: cfg });
  s.applySnapshot(snapshot(1, { version: 2, entries: chainEntries(hashesOf(small)), load: busy }));
  const spill = s.route(query(promptTokens(1, 16 * 200, 5, 100)));
  expect(spill).toMatchObject({ rank: 0, reason: "spill" });
  const big = promptTokens(1, 16 * 300); // 4800 cached tokens: extra prefill beyond the bound
  const t = cluster(2, { config: cfg });
  t.applySnapshot(snapshot(1, { version: 2, entries: chainEntries(hashesOf(big)), load: busy }));
  expect(t.route(query(promptTokens(1, 16 * 300, 6, 100)))).toMatchObject({ rank: 1, reason: "prefix-hit" });
  const calm = cluster(2, { config: { cost: { missingPrefillWeight: 4, spillLoadGapTokens: 20000 } } });
  calm.applySnapshot(snapshot(1, { version: 2, entries: chainEntries(hashesOf(small)), load: busy }));
  expect(calm.route(query(promptTokens(1, 16 * 200, 7, 100))).rank).toBe(1);
});

test("shared-prefix spill: a hot prefix whose prefill outweighs the owner's queue leaves a twice-as-busy owner once live requests share it", () => {
  // Load skew at GPU scale: a 9,216-token prefix, 11 running requests on its owner, 5 on the partner.
  const hot = promptTokens(3, 16 * 576);
  const running = (n: number) => ({
    numRunning: n,
    numWaiting: 0,
    runningTokens: n * (16 * 576 + 12),
    waitingTokens: 0,
  });
  const route = (sharers: number, partnerRunning = 5, cost = {}) => {
    const s = cluster(2, { config: { cost } });
    s.applySnapshot(snapshot(0, { version: 2, entries: chainEntries(hashesOf(hot), 0, sharers), load: running(11) }));
    s.applySnapshot(snapshot(1, { version: 2, load: running(partnerRunning) }));
    return s.route(query([...hot, 1, 2, 3]));
  };
  // Queue work ~5,427 vs ~2,467: the 9,216-token prefill is more than the gap, beyond the 4,096 bound.
  expect(route(0)).toMatchObject({ rank: 0, reason: "prefix-hit" });
  // Five live requests share it: 9,216 / 6 = 1,536 amortized, under the gap and the bound.
  expect(route(5)).toMatchObject({ rank: 1, reason: "spill" });
  expect(route(5, 6).rank).toBe(0); // 5,427 < 2 x 2,960: the owner is not twice as busy
  expect(route(1).rank).toBe(0); // 4,608 amortized: more than the gap
  expect(route(5, 5, { spillMaxSharers: 0 }).rank).toBe(0); // disabled
});

test("candidates are the ingress rank and its NVLink partners only", () => {
  const topology = NvlinkTopology.fromPairs("0-1,2-3", 4);
  const s = cluster(4, { topology });
  s.applySnapshot(snapshot(2, { version: 2, entries: chainEntries(hashesOf(shared)) }));
  const fromZero = s.route(query(withSuffix(8), { ingressRank: 0 }));
  expect([0, 1]).toContain(fromZero.rank);
  expect(fromZero.matchedBlocks).toBe(0);
  expect(s.route(query(withSuffix(9), { ingressRank: 3 })).rank).toBe(2);
  expect(s.route(query(withSuffix(10))).rank).toBe(2); // no ingress: every healthy rank
  s.dropRank(0);
  s.dropRank(1);
  expect(s.route(query(withSuffix(11), { ingressRank: 0 })).rank).toBe(2); // group dead: all healthy
});

test("equal costs prefer the ingress rank over its partner", () => {
  const s = cluster(2, { topology: NvlinkTopology.fromPairs("0-1", 2) });
  expect(s.route(query(promptTokens(12, 64), { ingressRank: 1 })).rank).toBe(1);
});

test("a rejected stale snapshot does not steer routing", () => {
  const s = cluster(2);
  s.applySnapshot(snapshot(1, { epoch: 2, version: 1 }));
  const r = s.applySnapshot(snapshot(1, { epoch: 1, version: 50, entries: chainEntries(hashesOf(shared)) }));
  expect(r.applied).toBe(false);
  expect(s.route(query(withSuffix(13))).matchedBlocks).toBe(0);
  expect(s.counters().rejected_stale_epoch).toBe(1);
});

test("a dead rank is never chosen and its reservations go; no rank at all is a typed error", () => {
  const s = cluster(2);
  s.applySnapshot(snapshot(1, { version: 2, entries: chainEntries(hashesOf(shared)) }));
  const d = s.route(query(withSuffix(14)));
  expect(d.rank).toBe(1);
  expect(s.dropRank(1)).toEqual([`q${qid - 1}`]);
  expect(s.route(query(withSuffix(15))).rank).toBe(0);
  s.dropRank(0);
  expect(() => s.route(query(withSuffix(16)))).toThrow(NoHealthyRankError);
});
