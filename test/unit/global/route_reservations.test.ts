// Route reservations: concurrent routes cannot spend the same free blocks; worker reports,
// request ends, dead ranks and the TTL release them.
import { expect, test } from "bun:test";
import { VirtualClock } from "../../../lib/core/virtual_clock.ts";
import { GlobalScheduler } from "../../../lib/global/global_scheduler.ts";
import { RouteReservations } from "../../../lib/global/route_reservations.ts";
import { hashesOf, IDLE, promptTokens, snapshot } from "./page_table_fixture.ts";

const q = (id: string, blocks: number) => {
  const t = promptTokens(Number(id.replace(/\D/g, "")) + 500, blocks * 16 - 8);
  return { requestId: id, blockHashes: hashesOf(t), promptTokens: t.length, maxTokens: 8 };
};

test("the second concurrent request does not reuse the first one's free blocks", () => {
  const s = new GlobalScheduler();
  s.applySnapshot(snapshot(0, { numBlocks: 20, free: 12 }));
  s.applySnapshot(snapshot(1, { numBlocks: 20, free: 0 }));
  const a = s.route(q("r1", 10)); // 10 prompt blocks + 1 decode reserve
  expect(a).toMatchObject({ rank: 0, reservedBlocks: 11, feasible: true });
  expect(s.reservations.reservedBlocks(0)).toBe(11);
  const b = s.route(q("r2", 10));
  expect(b.feasible).toBe(false); // rank 0 has 1 unreserved block left
  s.release("r2");
  s.release("r1");
  expect(s.reservations.reservedBlocks(0)).toBe(0);
  expect(s.route(q("r3", 10)).feasible).toBe(true);
});

test("a worker report of queued then allocated requests releases pending work, then blocks", () => {
  const s = new GlobalScheduler();
  s.applySnapshot(snapshot(0, { numBlocks: 100 }));
  s.route(q("r1", 4));
  expect(s.reservations.pendingRequests(0)).toBe(1);
  expect(s.reservations.pendingTokens(0)).toBe(56);
  const load = { numRunning: 0, numWaiting: 1, runningTokens: 0, waitingTokens: 56 };
  const base = {
    rank: 0,
    epoch: 1,
    capacity: { numBlocks: 100, blockSize: 16, numFree: 100, numReclaimable: 0 },
    added: [],
    removed: [],
    touched: [],
  };
  s.applyDelta({ ...base, baseVersion: 1, version: 2, load }, { queued: ["r1"] });
  expect(s.reservations.pendingRequests(0)).toBe(0);
  expect(s.reservations.reservedBlocks(0)).toBe(5);
  // A rejected delta's ids are ignored (a full snapshot will list them again).
  s.applyDelta({ ...base, baseVersion: 7, version: 8, load: IDLE }, { allocated: ["r1"] });
  expect(s.reservations.reservedBlocks(0)).toBe(5);
  s.applyDelta({ ...base, baseVersion: 2, version: 3, capacity: { ...base.capacity, numFree: 95 }, load: IDLE }, {
    allocated: ["r1"],
  });
  expect(s.reservations.size).toBe(0);
  // Ids reported by another rank do not release this rank's reservation.
  s.applySnapshot(snapshot(1));
  s.route({ ...q("r2", 4), ingressRank: 0 });
  const r2 = s.reservations.get("r2")!;
  s.applySnapshot(snapshot(r2.rank === 0 ? 1 : 0, { version: 9 }), { allocated: ["r2"] });
  expect(s.reservations.get("r2")).toBeDefined();
});

test("reservations expire after the TTL and die with their rank", () => {
  const clock = new VirtualClock({ startMs: 1000 });
  const s = new GlobalScheduler({ config: { reservationTtlMs: 500 }, clock });
  s.applySnapshot(snapshot(0));
  s.applySnapshot(snapshot(1));
  s.route(q("r1", 2));
  clock.advanceSync(100);
  s.route(q("r2", 2));
  clock.advanceSync(450); // r1 is 550 ms old, r2 450 ms
  s.route(q("r3", 2));
  expect(s.reservations.get("r1")).toBeUndefined();
  expect(s.reservations.get("r2")).toBeDefined();
  expect(s.counters().reservations_expired).toBe(1);
  const onRank = s.reservations.get("r3")!.rank;
  const dropped = s.dropRank(onRank);
  expect(dropped).toContain("r3");
  expect(s.reservations.get("r3")).toBeUndefined();
});

test("RouteReservations keeps per-rank totals exact through every transition", () => {
  const r = new RouteReservations();
  r.reserve("a", 0, 3, 30, 0);
  r.reserve("b", 0, 2, 20, 0);
  r.reserve("c", 1, 4, 40, 0);
  r.markQueued(0, ["a", "c"]); // c is on rank 1: ignored here
  expect([r.reservedBlocks(0), r.pendingTokens(0), r.pendingRequests(0)]).toEqual([5, 20, 1]);
  r.reserve("b", 1, 1, 10, 1); // re-route moves b
  expect([r.reservedBlocks(0), r.pendingTokens(0), r.pendingRequests(0)]).toEqual([3, 0, 0]);
  expect([r.reservedBlocks(1), r.pendingTokens(1), r.pendingRequests(1)]).toEqual([5, 50, 2]);
  r.markAllocated(0, ["a"]);
  expect(r.release("a")).toBe(false);
  expect(r.reservedBlocks(0)).toBe(0);
  expect(() => r.reserve("x", 0, -1, 0, 0)).toThrow(RangeError);
});
