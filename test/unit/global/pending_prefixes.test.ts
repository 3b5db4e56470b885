// Pending prefixes: a prompt routed to a rank counts, for the lmpool cost, as blocks that rank will
// hold by the time a request routed behind it prefills there; it stops counting when the rank
// publishes the prompt's last block, when the request ends, when the rank dies or after the TTL.
import { expect, test } from "bun:test";
import { GlobalScheduler } from "../../../lib/global/global_scheduler.ts";
import { PendingPrefixes } from "../../../lib/global/pending_prefixes.ts";
import { chainEntries, deltaBase, hashesOf, IDLE, promptTokens, snapshot } from "./page_table_fixture.ts";

test("PendingPrefixes matches leading blocks per rank and forgets through settle, end, dropRank and expire", () => {
  const p = new PendingPrefixes();
  p.add("a", 0, ["h1", "h2", "h3"], 0);
  p.add("b", 0, ["h1", "h2"], 5);
  p.add("c", 1, ["h1", "x2"], 10);
  expect([p.match(0, ["h1", "h2", "h3", "h4"]), p.match(1, ["h1", "h2"]), p.match(2, ["h1"])]).toEqual([3, 1, 0]);
  // The asking request's own prompt is no prefix ahead of it: "a" alone pends h3 on rank 0.
  expect([p.match(0, ["h1", "h2", "h3"], "a"), p.match(0, ["h1", "h2"], "b"), p.match(1, ["h1"], "a")]).toEqual([
    2,
    2,
    1,
  ]);
  p.settle(0, (h) => h === "h3" || h === "x2"); // only rank 0's prompts settle on rank 0's report
  expect([p.match(0, ["h1", "h2", "h3"]), p.match(1, ["h1", "x2"]), p.size]).toEqual([2, 2, 2]);
  p.add("b", 0, ["h1"], 6); // re-added: replaces, never counts twice
  p.end("b");
  p.end("b");
  expect([p.match(0, ["h1"]), p.size]).toEqual([0, 1]);
  p.add("d", 0, ["h1"], 20);
  p.expire(15, 10); // "c" (routed at 10) is not older than the TTL yet
  expect(p.size).toBe(2);
  p.expire(25, 10);
  expect([p.size, p.match(1, ["h1"]), p.match(0, ["h1"])]).toEqual([1, 0, 1]);
  p.dropRank(0);
  expect([p.size, p.match(0, ["h1"])]).toEqual([0, 0]);
  p.add("e", 0, [], 30); // no complete block: nothing pending
  expect(p.size).toBe(0);
});

test("simultaneous requests of one cold prefix follow the first to its rank, which they find cached there", () => {
  const s = new GlobalScheduler();
  s.applySnapshot(snapshot(0));
  s.applySnapshot(snapshot(1));
  const shared = (id: string, k: number) => {
    const t = promptTokens(1, 1600, k, 16);
    return { requestId: id, blockHashes: hashesOf(t), promptTokens: t.length, maxTokens: 8 };
  };
  const cold = (id: string, k: number) => {
    const t = promptTokens(k, 1616);
    return { requestId: id, blockHashes: hashesOf(t), promptTokens: t.length, maxTokens: 8 };
  };
  // Each rank has one cold prefill queued, "a" on one of them.
  const other = s.route(cold("c", 3)).rank;
  const first = s.route(shared("a", 1)).rank;
  expect(first).toBe(1 - other);
  // Nothing is published yet: only the pending prompt says the prefix will be on a's rank once "b"
  // runs there. Priced cold, both ranks would cost the same and the tie would go to rank 0.
  expect(s.route(shared("b", 2)).rank).toBe(first);
  // The reservation prices the follower's prefill as the hit it will be.
  expect(s.reservations.get("b")!.tokens).toBe(16);
  expect(s.reservations.get("a")!.tokens).toBe(1616);
  // Ended requests stop counting.
  s.release("a");
  s.release("b");
  expect(s.pending.size).toBe(1);
  // Publishing the last block of "c" settles it.
  s.applyDelta({
    ...deltaBase(other),
    baseVersion: 1,
    version: 2,
    load: IDLE,
    added: chainEntries(hashesOf(promptTokens(3, 1616)), 0, 1),
  });
  expect(s.pending.size).toBe(0);
});
