// The global page table: atomic snapshots, exact-base deltas, stale epochs/versions, dead ranks,
// prefix matching, placements, in-flight markers, and the equality helper.
import { expect, test } from "bun:test";
import type { BlockDelta } from "../../../lib/core/block_snapshot.ts";
import { GlobalBlockManager } from "../../../lib/global/global_block_manager.ts";
import { diffPageTable } from "../../../lib/global/page_table_diff.ts";
import { chainEntries, hashesOf, IDLE, promptTokens, snapshot } from "./page_table_fixture.ts";

const chainA = hashesOf(promptTokens(1, 160)); // 10 blocks
const chainB = hashesOf(promptTokens(2, 96)); // 6 blocks

function delta(rank: number, base: number, o: Partial<BlockDelta> = {}): BlockDelta {
  return {
    rank,
    epoch: 1,
    baseVersion: base,
    version: base + 1,
    capacity: { numBlocks: 1000, blockSize: 16, numFree: 990, numReclaimable: 10 },
    load: IDLE,
    added: [],
    removed: [],
    touched: [],
    ...o,
  };
}

test("a snapshot replaces the rank's slice atomically", () => {
  const g = new GlobalBlockManager();
  expect(g.applySnapshot(snapshot(0, { entries: chainEntries(chainA) }))).toEqual({ applied: true });
  expect(g.matchPrefix(0, chainA).blocks).toBe(10);
  expect(g.applySnapshot(snapshot(0, { version: 2, entries: chainEntries(chainB) })).applied).toBe(true);
  expect(g.matchPrefix(0, chainA).blocks).toBe(0);
  expect(g.matchPrefix(0, chainB).blocks).toBe(6);
  expect(g.table(0)!.size).toBe(6);
});

test("stale versions and epochs are rejected; a newer epoch replaces the slice", () => {
  const g = new GlobalBlockManager();
  g.applySnapshot(snapshot(0, { epoch: 2, version: 5, entries: chainEntries(chainA) }));
  const sameVersion = g.applySnapshot(snapshot(0, { epoch: 2, version: 5 }));
  expect(sameVersion.applied ? "" : sameVersion.reason).toBe("stale_version");
  const oldEpoch = g.applySnapshot(snapshot(0, { epoch: 1, version: 99 }));
  expect(oldEpoch.applied ? "" : oldEpoch.reason).toBe("stale_epoch");
  expect(oldEpoch.applied ? "" : oldEpoch.message).toContain("epoch 1 < current 2");
  expect(g.matchPrefix(0, chainA).blocks).toBe(10); // untouched by the rejections
  expect(g.applySnapshot(snapshot(0, { epoch: 3, version: 1, entries: chainEntries(chainB) })).applied).toBe(true);
  expect(g.table(0)!.epoch).toBe(3);
  expect(g.matchPrefix(0, chainA).blocks).toBe(0);
  const staleDelta = g.applyDelta({ ...delta(0, 1), epoch: 2 });
  expect(staleDelta.applied ? "" : staleDelta.reason).toBe("stale_epoch");
});

test("a delta applies only on exactly its base version, else asks once for a full snapshot", () => {
  const g = new GlobalBlockManager();
  g.applySnapshot(snapshot(0, { version: 3, entries: chainEntries(chainA.slice(0, 4)) }));
  const add = chainEntries(chainA).slice(4, 6);
  expect(g.applyDelta(delta(0, 3, { added: add })).applied).toBe(true);
  expect(g.matchPrefix(0, chainA).blocks).toBe(6);
  expect(g.table(0)!.version).toBe(4);
  const gap = g.applyDelta(delta(0, 5, { added: chainEntries(chainA).slice(6, 7) }));
  expect(gap).toMatchObject({ applied: false, reason: "base_mismatch", requestSnapshot: true });
  const again = g.applyDelta(delta(0, 6));
  expect(again).toMatchObject({ applied: false, reason: "base_mismatch", requestSnapshot: false });
  expect(g.matchPrefix(0, chainA).blocks).toBe(6);
  const dup = g.applyDelta(delta(0, 3));
  expect(dup).toMatchObject({ applied: false, reason: "stale_version" });
  expect(g.applySnapshot(snapshot(0, { version: 7, entries: chainEntries(chainA) })).applied).toBe(true);
  expect(g.applyDelta(delta(0, 9))).toMatchObject({ applied: false, reason: "base_mismatch", requestSnapshot: true });
});

test("an inconsistent delta changes nothing", () => {
  const g = new GlobalBlockManager();
  const entries = chainEntries(chainA.slice(0, 3));
  g.applySnapshot(snapshot(0, { entries }));
  const wrongGen = g.applyDelta(
    delta(0, 1, { added: chainEntries(chainB), removed: [{ hash: chainA[2]!, block: 2, generation: 7 }] }),
  );
  expect(wrongGen).toMatchObject({ applied: false, reason: "inconsistent", requestSnapshot: true });
  expect(wrongGen.applied ? "" : wrongGen.message).toContain("gen 7");
  expect(g.matchPrefix(0, chainB).blocks).toBe(0);
  expect(g.matchPrefix(0, chainA).blocks).toBe(3);
  expect(g.table(0)!.version).toBe(1);
  const g2 = new GlobalBlockManager();
  g2.applySnapshot(snapshot(0, { entries }));
  expect(
    g2.applyDelta(
      delta(0, 1, { touched: [{ hash: chainB[0]!, block: 0, refCount: 1, lastAccess: 0, accessCount: 2 }] }),
    ).applied,
  ).toBe(false);
  expect(g2.applyDelta(delta(0, 1, { added: [entries[0]!] })).applied).toBe(false);
});

test("removed, added and touched blocks update entries, refCounts and leaves", () => {
  const g = new GlobalBlockManager();
  g.applySnapshot(snapshot(0, { entries: chainEntries(chainA.slice(0, 3)) }));
  expect(g.table(0)!.isLeaf(chainA[2]!)).toBe(true);
  expect(g.table(0)!.isLeaf(chainA[1]!)).toBe(false);
  const r = g.applyDelta(
    delta(0, 1, {
      removed: [{ hash: chainA[2]!, block: 2, generation: 1 }],
      added: [{
        hash: chainA[2]!,
        parent: chainA[1]!,
        block: 40,
        generation: 3,
        refCount: 1,
        lastAccess: 5,
        accessCount: 1,
      }],
      touched: [{ hash: chainA[0]!, block: 0, refCount: 2, lastAccess: 9, accessCount: 4 }],
    }),
  );
  expect(r.applied).toBe(true);
  expect(g.placements(chainA[2]!)).toEqual([{ rank: 0, block: 40, generation: 3, refCount: 1 }]);
  expect(g.table(0)!.entries.get(chainA[0]!)).toMatchObject({ refCount: 2, lastAccess: 9, accessCount: 4 });
  g.applyDelta(delta(0, 2, { removed: [{ hash: chainA[2]!, block: 40, generation: 3 }] }));
  expect(g.table(0)!.isLeaf(chainA[1]!)).toBe(true);
});

test("prefix matching stops at the first missing block; placements list every rank", () => {
  const g = new GlobalBlockManager();
  const holey = chainEntries(chainA).filter((_, i) => i !== 4);
  g.applySnapshot(snapshot(0, { entries: holey }));
  g.applySnapshot(snapshot(1, { entries: chainEntries(chainA.slice(0, 2), 100, 1) }));
  expect(g.matchPrefix(0, chainA)).toEqual({ blocks: 4, reclaimable: 4 });
  expect(g.matchPrefix(1, chainA)).toEqual({ blocks: 2, reclaimable: 0 });
  expect(g.matchPrefix(2, chainA)).toEqual({ blocks: 0, reclaimable: 0 });
  expect(g.placements(chainA[1]!).map((p) => [p.rank, p.block])).toEqual([[0, 1], [1, 101]]);
  expect(g.placements(chainA[5]!).map((p) => p.rank)).toEqual([0]);
});

test("a dropped rank leaves the table and its epoch is retired", () => {
  const g = new GlobalBlockManager();
  g.applySnapshot(snapshot(0, { epoch: 4, entries: chainEntries(chainA) }));
  g.applySnapshot(snapshot(1, { epoch: 1, entries: chainEntries(chainA) }));
  expect(g.dropRank(0)).toBe(true);
  expect(g.healthyRanks()).toEqual([1]);
  expect(g.placements(chainA[0]!).map((p) => p.rank)).toEqual([1]);
  const late = g.applySnapshot(snapshot(0, { epoch: 4, version: 9, entries: chainEntries(chainA) }));
  expect(late).toMatchObject({ applied: false, reason: "retired_epoch" });
  expect(g.applyDelta(delta(0, 1))).toMatchObject({ applied: false, reason: "retired_epoch" });
  expect(g.applySnapshot(snapshot(0, { epoch: 5 })).applied).toBe(true);
  expect(g.healthyRanks()).toEqual([0, 1]);
  expect(g.dropRank(0, 4)).toBe(false); // a late death notice of the old incarnation
  expect(g.healthyRanks()).toEqual([0, 1]);
});

test("in-flight markers lock reclaimable blocks until their plan ends", () => {
  const g = new GlobalBlockManager();
  g.applySnapshot(snapshot(0, { entries: chainEntries(chainA) }));
  g.lockInFlight("p1", 0, chainA.slice(0, 3));
  g.lockInFlight("p2", 0, chainA.slice(2, 4));
  expect(g.isInFlight(0, chainA[2]!)).toBe(true);
  expect(g.inFlightReclaimable(0)).toBe(4);
  g.unlockInFlight("p1");
  expect(g.isInFlight(0, chainA[0]!)).toBe(false);
  expect(g.isInFlight(0, chainA[2]!)).toBe(true);
  g.unlockInFlight("p1"); // idempotent
  g.unlockInFlight("p2");
  expect(g.inFlightReclaimable(0)).toBe(0);
});

test("diffPageTable finds no difference after rebuilding from the snapshots, and names each one otherwise", () => {
  const snaps = [
    snapshot(0, { entries: chainEntries(chainA) }),
    snapshot(1, { epoch: 3, entries: chainEntries(chainB, 50, 1) }),
  ];
  const g = new GlobalBlockManager();
  for (const s of snaps) g.applySnapshot(s);
  expect(diffPageTable(g, snaps)).toEqual({ equal: true, differences: [] });
  const changed = [snaps[0]!, {
    ...snaps[1]!,
    entries: snaps[1]!.entries.map((e, i) => (i === 2 ? { ...e, generation: 9 } : e)).slice(0, 5),
  }];
  const d = diffPageTable(g, changed);
  expect(d.equal).toBe(false);
  expect(d.differences.some((x) => x.includes("generation is 1 in the table, 9 in the snapshot"))).toBe(true);
  expect(d.differences.some((x) => x.includes(`block ${chainB[5]} is in the table but not the snapshot`))).toBe(true);
  expect(diffPageTable(g, [snaps[0]!]).differences).toEqual(["rank 1 is in the table but has no snapshot"]);
});

test("a snapshot listing a hash twice is rejected", () => {
  const g = new GlobalBlockManager();
  const e = chainEntries(chainA.slice(0, 2));
  expect(g.applySnapshot(snapshot(0, { entries: [...e, e[1]!] }))).toMatchObject({
    applied: false,
    reason: "inconsistent",
  });
  expect(g.isHealthy(0)).toBe(false);
});

test("a rank dropped without retiring may report the same epoch again; toSnapshots round-trips", () => {
  const g = new GlobalBlockManager();
  const s0 = snapshot(0, { epoch: 2, version: 4, entries: chainEntries(chainA) });
  g.applySnapshot(s0);
  g.dropRank(0, undefined, { retire: false });
  expect(g.isHealthy(0)).toBe(false);
  expect(g.applySnapshot(s0).applied).toBe(true);
  const copy = new GlobalBlockManager();
  for (const s of g.toSnapshots()) copy.applySnapshot(s);
  expect(diffPageTable(copy, [s0], { strict: true }).equal).toBe(true);
});
