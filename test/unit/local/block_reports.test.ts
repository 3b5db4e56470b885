// Block manager: versioned snapshots and deltas for the control plane, and the invariant check.
import { describe, expect, test } from "bun:test";
import type { BlockEntry, BlockSnapshot } from "../../../lib/core/block_snapshot.ts";
import type { BlockDelta } from "../../../lib/core/block_snapshot.ts";
import { BlockManager } from "../../../lib/local/block_manager.ts";
import { makeSeq, prefill, range } from "./fixtures.ts";

const BS = 4;
const load = { numRunning: 1, numWaiting: 0, runningTokens: 9, waitingTokens: 0 };

/** What a control plane would do: apply a delta on top of exactly its base version. */
function apply(view: Map<string, BlockEntry>, version: number, d: BlockDelta): number {
  expect(d.baseVersion).toBe(version);
  for (const r of d.removed) {
    expect(view.get(r.hash)?.block).toBe(r.block);
    view.delete(r.hash);
  }
  for (const e of d.added) view.set(e.hash, e);
  for (const t of d.touched) {
    const e = view.get(t.hash)!;
    expect(e.block).toBe(t.block);
    view.set(t.hash, { ...e, refCount: t.refCount, lastAccess: t.lastAccess, accessCount: t.accessCount });
  }
  return d.version;
}

function asMap(s: BlockSnapshot): Map<string, BlockEntry> {
  return new Map(s.entries.map((e) => [e.hash, e]));
}

describe("snapshots and deltas", () => {
  test("versions increase by one per report; deltas chain onto the previous version", () => {
    const bm = new BlockManager({ numBlocks: 8, blockSize: BS, rank: 3, epoch: 77 });
    const s0 = bm.snapshot(load);
    expect(s0).toMatchObject({ rank: 3, epoch: 77, version: 1, entries: [] });
    expect(s0.capacity).toEqual({ numBlocks: 8, blockSize: BS, numFree: 8, numReclaimable: 0 });
    expect(bm.takeDelta(load)).toBeNull(); // nothing changed
    const a = makeSeq(range(9), BS);
    prefill(bm, a);
    const d1 = bm.takeDelta(load)!;
    expect(d1).toMatchObject({ rank: 3, epoch: 77, baseVersion: 1, version: 2 });
    expect(d1.added.map((e) => e.block).sort()).toEqual(a.blockTable.slice(0, 2).sort());
    expect(d1.added[0]!.refCount).toBe(1);
    expect(d1.added.find((e) => e.block === a.blockTable[1])!.parent).toBe(a.blockHashes[0]!);
    expect(d1.capacity.numFree).toBe(5);
    bm.free(a);
    const d2 = bm.takeDelta({ ...load, numRunning: 0 })!;
    expect(d2.version).toBe(3);
    expect(d2.touched.map((t) => t.refCount)).toEqual([0, 0]);
    expect(d2.capacity.numReclaimable).toBe(2);
    // Load alone changing still produces a delta.
    expect(bm.takeDelta(load)!.version).toBe(4);
  });

  test("applying every delta to the first snapshot reproduces the latest snapshot", () => {
    const bm = new BlockManager({ numBlocks: 6, blockSize: BS });
    const view = asMap(bm.snapshot(load));
    let version = bm.version;
    const live: ReturnType<typeof makeSeq>[] = [];
    for (let i = 0; i < 12; i++) {
      const s = makeSeq(range(5 + (i % 3) * 4, (i % 4) * 100), BS);
      if (prefill(bm, s)) live.push(s);
      if (live.length > 1 || i % 2) bm.free(live.shift()!);
      const d = bm.takeDelta(load);
      if (d) version = apply(view, version, d);
    }
    const full = bm.snapshot(load);
    expect(full.version).toBe(version + 1);
    expect(new Map([...view].map(([h, e]) => [h, { ...e }]))).toEqual(asMap(full));
  });

  test("a block reclaimed and republished within one delta appears in removed and added", () => {
    const bm = new BlockManager({ numBlocks: 2, blockSize: BS });
    const a = makeSeq(range(5), BS);
    prefill(bm, a);
    bm.free(a);
    bm.snapshot(load);
    const b = makeSeq(range(5, 100), BS);
    prefill(bm, b); // reclaims a's block, publishes its own
    const d = bm.takeDelta(load)!;
    expect(d.removed).toHaveLength(1);
    expect(d.added).toHaveLength(1);
    expect(d.removed[0]!.hash).toBe(a.blockHashes[0]!);
    expect(d.added[0]!.hash).toBe(b.blockHashes[0]!);
    if (d.added[0]!.block === d.removed[0]!.block) expect(d.added[0]!.generation).toBe(d.removed[0]!.generation + 1);
  });

  test("a block published and reclaimed between reports is never mentioned", () => {
    const bm = new BlockManager({ numBlocks: 2, blockSize: BS });
    bm.snapshot(load);
    const a = makeSeq(range(5), BS);
    prefill(bm, a);
    bm.free(a);
    expect(bm.reserve(2)).toHaveLength(2);
    const d = bm.takeDelta(load)!;
    expect(d.added).toEqual([]);
    expect(d.removed).toEqual([]);
  });
});

describe("invariants", () => {
  test("a clean workload passes; drained requires zero references", () => {
    const bm = new BlockManager({ numBlocks: 8, blockSize: BS });
    const a = makeSeq(range(9), BS);
    prefill(bm, a);
    bm.checkInvariants({ liveBlockTables: [a.blockTable] });
    expect(() => bm.checkInvariants({ drained: true })).toThrow(/after draining, block \d still has refCount=1/);
    expect(() => bm.checkInvariants({ liveBlockTables: [] })).toThrow(/refCount=1 but 0 live block-table entries/);
    bm.free(a);
    bm.checkInvariants({ drained: true, liveBlockTables: [] });
  });

  test("corruption is reported by name", () => {
    const bm = new BlockManager({ numBlocks: 4, blockSize: BS });
    const a = makeSeq(range(5), BS);
    prefill(bm, a);
    bm.pool.refCount[a.blockTable[1]!] = 0; // a Writing block nobody holds
    expect(() => bm.checkInvariants()).toThrow(
      /block \d \(Writing, refCount=0, pinCount=0\) is being written by nobody/,
    );
    bm.pool.refCount[a.blockTable[1]!] = 1;
    bm.pool.refCount[a.blockTable[0]!] = 0; // published, unreferenced, but not counted reclaimable
    expect(() => bm.checkInvariants()).toThrow(/numReclaimable is 0, counted 1/);
  });

  test("reservations outstanding fail the drained check", () => {
    const bm = new BlockManager({ numBlocks: 4, blockSize: BS });
    const r = bm.reserve(1)!;
    expect(() => bm.checkInvariants({ drained: true })).toThrow(/1 blocks are still reserved/);
    bm.releaseReserved(r);
    bm.checkInvariants({ drained: true });
  });
});
