// Admitted prefills: a request the worker admitted counts as prefill ahead on its rank until the
// rank publishes the prompt's last complete block, the request ends or the rank dies; routing
// waits behind it although the rank's load reports it as running.
import { expect, test } from "bun:test";
import { AdmittedPrefills } from "../../../lib/global/admitted_prefills.ts";
import { GlobalScheduler } from "../../../lib/global/global_scheduler.ts";
import { chainEntries, deltaBase, hashesOf, IDLE, promptTokens, snapshot } from "./page_table_fixture.ts";

test("AdmittedPrefills keeps per-rank totals exact through admit, settle, end and dropRank", () => {
  const p = new AdmittedPrefills();
  p.admit("a", 0, 100, "h1");
  p.admit("b", 0, 50, "h2");
  p.admit("c", 1, 70, "h3");
  p.admit("z", 1, 0, "h4"); // nothing to compute: nothing admitted
  expect([p.tokens(0), p.requests(0), p.tokens(1), p.requests(1), p.size]).toEqual([150, 2, 70, 1, 3]);
  p.settle(0, (h) => h === "h1" || h === "h3"); // only rank 0's prefills settle on rank 0's report
  expect([p.tokens(0), p.requests(0), p.tokens(1), p.requests(1)]).toEqual([50, 1, 70, 1]);
  p.admit("b", 0, 60, "h2"); // re-admitted: replaces, never adds twice
  expect(p.tokens(0)).toBe(60);
  p.end("b");
  p.end("b");
  expect([p.tokens(0), p.requests(0)]).toEqual([0, 0]);
  p.dropRank(1);
  expect([p.tokens(1), p.requests(1), p.size]).toEqual([0, 0, 0]);
  expect(() => p.admit("x", 0, -1, "h")).toThrow(RangeError);
});

const running = { numRunning: 1, numWaiting: 0, runningTokens: 1600, waitingTokens: 0 };

test("an admitted prefill holds its rank until the prompt's last block is published", () => {
  const s = new GlobalScheduler();
  s.applySnapshot(snapshot(0));
  s.applySnapshot(snapshot(1));
  const prompt = promptTokens(7, 1600);
  const first = s.route({ requestId: "cold", blockHashes: hashesOf(prompt), promptTokens: 1600, maxTokens: 8 });
  const r = first.rank, other = 1 - r;
  // The idle rank reports the admission as its step starts: running, nothing waiting, nothing published.
  s.applyDelta({ ...deltaBase(r), baseVersion: 1, version: 2, load: running }, {
    queued: ["cold"],
    allocated: ["cold"],
  });
  expect(s.reservations.size).toBe(0);
  expect([s.prefills.tokens(r), s.prefills.requests(r)]).toEqual([1600, 1]);
  // The other rank runs one decoding sequence: by load the two look alike, yet only one is prefilling.
  s.applySnapshot(snapshot(other, { version: 2, load: running }));
  const next = () => ({ requestId: "next", blockHashes: [], promptTokens: 15, maxTokens: 8 });
  expect(s.route(next()).rank).toBe(other);
  // The step publishes the prompt's blocks: the prefill is done and no longer waited for.
  const hashes = hashesOf(prompt);
  s.applyDelta({
    ...deltaBase(r),
    baseVersion: 2,
    version: 3,
    load: running,
    added: chainEntries(hashes, 0, 1),
  });
  expect([s.prefills.tokens(r), s.prefills.requests(r)]).toEqual([0, 0]);
});

test("an admitted prefill ends with its request and with its rank", () => {
  const s = new GlobalScheduler();
  s.applySnapshot(snapshot(0));
  const q = (id: string, k: number) => {
    const t = promptTokens(k, 320);
    return { requestId: id, blockHashes: hashesOf(t), promptTokens: t.length, maxTokens: 8 };
  };
  s.route(q("a", 1));
  s.route(q("b", 2));
  s.applyDelta({ ...deltaBase(0), baseVersion: 1, version: 2, load: IDLE }, { allocated: ["a", "b"] });
  expect(s.prefills.requests(0)).toBe(2);
  s.release("a");
  expect([s.prefills.tokens(0), s.prefills.requests(0)]).toEqual([320, 1]);
  s.dropRank(0);
  expect(s.prefills.size).toBe(0);
  // A prompt shorter than a block has no block to wait for: it is not followed.
  s.applySnapshot(snapshot(0, { epoch: 2 }));
  s.route({ requestId: "short", blockHashes: [], promptTokens: 10, maxTokens: 8 });
  s.applyDelta({ ...deltaBase(0), epoch: 2, baseVersion: 1, version: 2, load: IDLE }, { allocated: ["short"] });
  expect(s.prefills.size).toBe(0);
});
