// lmpool routing through the GlobalScheduler: hit/miss, capacity feasibility, an overloaded owner
// left by cost, measured speeds, NVLink pair filtering, stale state and dead ranks.
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

test("a hot prefix stays with its owner while its prefill outweighs the owner's queue, and leaves a long queue", () => {
  // A 9,216-token prefix costs ~52 ms to prefill again on the H200 model; the owner's queue decides.
  const hot = promptTokens(3, 16 * 576);
  const route = (numWaiting: number, waitingTokens: number) => {
    const s = cluster(2);
    const load = { numRunning: 0, numWaiting, runningTokens: 0, waitingTokens };
    s.applySnapshot(snapshot(0, { version: 2, entries: chainEntries(hashesOf(hot), 0, 1), load }));
    return s.route(query([...hot, 1, 2, 3]));
  };
  expect(route(1, 1000)).toMatchObject({ rank: 0, reason: "prefix-hit" }); // ~3 ms queued: stay
  expect(route(10, 50_000)).toMatchObject({ rank: 1, reason: "least-cost" }); // ~200 ms queued: leave
});

test("the prefill a hit saves counts once per request that would wait for it", () => {
  // Both ranks queue the same work; the owner also runs 20 sequences that a full prefill would hold up.
  const prompt = promptTokens(4, 16 * 100);
  const s = cluster(2);
  const busy = { numRunning: 20, numWaiting: 0, runningTokens: 20 * 2000, waitingTokens: 0 };
  s.applySnapshot(snapshot(0, { version: 2, entries: chainEntries(hashesOf(prompt), 0, 1), load: busy }));
  s.applySnapshot(snapshot(1, { version: 2, load: busy }));
  expect(s.route(query([...prompt, 9]))).toMatchObject({ rank: 0, reason: "prefix-hit" });
});

test("a cold request goes to the rank measured faster, and to the smaller decode batch", () => {
  const s = cluster(2);
  const modelled = 50_000 * s.config.device.prefillTokenMs;
  s.observeWorkerStats(0, { prefill_ms: 3 * modelled, prefill_tokens: 50_000, prefill_pairs: 0 });
  s.observeWorkerStats(1, { prefill_ms: modelled, prefill_tokens: 50_000, prefill_pairs: 0 });
  expect(s.speeds.prefillRatio(0)).toBeCloseTo(3, 6);
  expect(s.speeds.prefillRatio(1)).toBeCloseTo(1, 6);
  expect(s.speeds.prefillRatio(7)).toBeCloseTo(2, 6); // not reported yet: the mean of the others
  expect(s.route(query(promptTokens(30, 2000))).rank).toBe(1);
  const t = cluster(2);
  t.applySnapshot(
    snapshot(0, { version: 2, load: { numRunning: 40, numWaiting: 0, runningTokens: 80_000, waitingTokens: 0 } }),
  );
  t.applySnapshot(
    snapshot(1, { version: 2, load: { numRunning: 4, numWaiting: 0, runningTokens: 8_000, waitingTokens: 0 } }),
  );
  expect(t.route(query(promptTokens(31, 500))).rank).toBe(1);
});

test("a rank's speed is its steps' time against their whole model, not the share of prefix hits in them", () => {
  // Two ranks of one speed: rank 0 prefilled 100 prefix hits (8 tokens each, one per step), rank 1
  // 10 cold prompts of 1000 tokens. Each step's fixed time and each sequence's own time are priced,
  // so both read as the model's speed; against tokens and pairs alone the hits' rank read as ~50x slower.
  const s = cluster(2);
  const m = s.config.device;
  const timed = (steps: number, tokens: number) => ({
    prefill_ms: steps * (m.stepMs + m.prefillSeqMs) + tokens * m.prefillTokenMs,
    prefill_steps: steps,
    prefill_seqs: steps,
    prefill_tokens: tokens,
    prefill_pairs: 0,
  });
  s.observeWorkerStats(0, timed(100, 800));
  s.observeWorkerStats(1, timed(10, 10_000));
  expect(s.speeds.prefillRatio(0)).toBeCloseTo(1, 6);
  expect(s.speeds.prefillRatio(1)).toBeCloseTo(1, 6);
  // Workers that report no step or sequence counts are still measured, against tokens and pairs.
  const t = cluster(1);
  t.observeWorkerStats(0, { prefill_ms: 2 * 50_000 * m.prefillTokenMs, prefill_tokens: 50_000, prefill_pairs: 0 });
  expect(t.speeds.prefillRatio(0)).toBeCloseTo(2, 6);
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
  // Group dead: every healthy rank is a candidate (2 holds the prefix but queues the two routed above).
  expect([2, 3]).toContain(s.route(query(withSuffix(11), { ingressRank: 0 })).rank);
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
