// BlockUsage: access counts, recency and the reclaim candidates keyed by them.
import { describe, expect, test } from "bun:test";
import { BlockUsage } from "../../../lib/local/block_usage.ts";
import { ReclaimOrder } from "../../../lib/local/reclaim_order.ts";

describe("BlockUsage", () => {
  test("begin starts one access at now; touch counts an access only when asked", () => {
    const u = new BlockUsage(4);
    u.begin(2, 100);
    expect([u.accessCount(2), u.lastAccess(2)]).toEqual([1, 100]);
    u.touch(2, 150, true);
    expect([u.accessCount(2), u.lastAccess(2)]).toEqual([2, 150]);
    u.touch(2, 160, false);
    expect([u.accessCount(2), u.lastAccess(2)]).toEqual([2, 160]);
    u.begin(2, 200); // published again: the old counts do not carry over
    expect([u.accessCount(2), u.lastAccess(2)]).toEqual([1, 200]);
  });

  test("a candidate carries the current key and goes stale at the block's next use", () => {
    const u = new BlockUsage(2);
    u.begin(0, 5);
    const c = u.candidate(0, 7);
    expect(c).toMatchObject({ block: 0, generation: 7, accessCount: 1 });
    expect(u.unchangedSince(c)).toBe(true);
    u.touch(0, 5, false); // same clock reading: still a new use
    expect(u.unchangedSince(c)).toBe(false);
    expect(u.unchangedSince(u.candidate(0, 7))).toBe(true);
  });

  test("uses within one clock reading still order: the earlier one is reclaimed first", () => {
    const u = new BlockUsage(3);
    for (const b of [2, 0, 1]) u.begin(b, 42);
    const order = new ReclaimOrder();
    for (const b of [0, 1, 2]) order.push(u.candidate(b, 1));
    const popped = [0, 1, 2].map(() => order.pop(() => true)!.block);
    expect(popped).toEqual([2, 0, 1]);
  });

  test("fewer accesses come before older use", () => {
    const u = new BlockUsage(2);
    u.begin(0, 1);
    u.begin(1, 2);
    u.touch(0, 3, true); // block 0: 2 accesses, more recent
    const order = new ReclaimOrder();
    order.push(u.candidate(0, 1));
    order.push(u.candidate(1, 1));
    expect(order.pop(() => true)!.block).toBe(1);
  });
});
