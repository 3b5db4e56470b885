// The rank-bitset index agrees with per-rank prefix walks through random snapshots, deltas and drops,
// for a few low ranks, for every rank of one word (0..31) and for ranks spread up to the limit; each
// rank's table keeps its leaves on the way.
import { expect, test } from "bun:test";
import type { BlockEntry } from "../../../lib/core/block_snapshot.ts";
import { BlockIndex, MAX_INDEXED_RANKS } from "../../../lib/global/block_index.ts";
import { GlobalBlockManager } from "../../../lib/global/global_block_manager.ts";
import { chainEntries, hashesOf, promptTokens, snapshot } from "./page_table_fixture.ts";

function prng(seed: number) {
  let s = seed;
  return () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
}

/** Random snapshots, deltas and drops on `ranks`; after each, every chain's match on every rank is checked. */
function checkRandomUpdates(ranks: readonly number[], steps: number, seed: number): void {
  const rand = prng(seed);
  const chains = Array.from({ length: 6 }, (_, k) => hashesOf(promptTokens(k, 16 * 12)));
  const g = new GlobalBlockManager();
  const version = new Map(ranks.map((r) => [r, 1]));
  const held = new Map(ranks.map((r) => [r, new Map<string, BlockEntry>()]));
  for (const r of ranks) g.applySnapshot(snapshot(r));
  for (let step = 0; step < steps; step++) {
    const r = ranks[Math.floor(rand() * ranks.length)]!;
    const table = held.get(r)!;
    const op = rand();
    if (op < 0.1) {
      g.dropRank(r);
      table.clear();
      version.set(r, 1);
      g.applySnapshot(snapshot(r, { epoch: step + 2 }));
    } else if (op < 0.25) {
      const c = chains[Math.floor(rand() * chains.length)]!;
      const entries = chainEntries(c.slice(0, 1 + Math.floor(rand() * c.length)), 0, rand() < 0.5 ? 0 : 1);
      table.clear();
      for (const e of entries) table.set(e.hash, e);
      version.set(r, version.get(r)! + 1);
      g.applySnapshot(snapshot(r, { epoch: g.table(r)!.epoch, version: version.get(r)!, entries }));
    } else {
      const c = chains[Math.floor(rand() * chains.length)]!;
      const i = Math.floor(rand() * c.length);
      const h = c[i]!;
      const cur = table.get(h);
      const base = {
        rank: r,
        epoch: g.table(r)!.epoch,
        baseVersion: version.get(r)!,
        version: version.get(r)! + 1,
        capacity: g.table(r)!.capacity,
        load: g.table(r)!.load,
        added: [] as BlockEntry[],
        removed: [] as { hash: string; block: number; generation: number }[],
        touched: [] as { hash: string; block: number; refCount: number; lastAccess: number; accessCount: number }[],
      };
      if (cur && rand() < 0.5) base.removed.push({ hash: h, block: cur.block, generation: cur.generation });
      else if (cur) {
        base.touched.push({
          hash: h,
          block: cur.block,
          refCount: cur.refCount ? 0 : 1,
          lastAccess: step,
          accessCount: 2,
        });
      } else {
        base.added.push({
          hash: h,
          parent: i ? c[i - 1]! : "",
          block: 500 + step,
          generation: 1,
          refCount: rand() < 0.5 ? 0 : 2,
          lastAccess: step,
          accessCount: 1,
        });
      }
      expect(g.applyDelta(base).applied).toBe(true);
      version.set(r, version.get(r)! + 1);
      for (const x of base.removed) table.delete(x.hash);
      for (const x of base.added) table.set(x.hash, x);
      for (const x of base.touched) table.set(x.hash, { ...table.get(x.hash)!, refCount: x.refCount });
    }
    const span = g.rankSpan();
    expect(span).toBe(Math.max(...ranks) + 1);
    for (const r of ranks) {
      const t = g.table(r)!;
      expect([...t.leaves].sort()).toEqual([...t.entries.keys()].filter((h) => t.isLeaf(h)).sort());
    }
    const blocks = new Int32Array(span);
    const idle = new Int32Array(span);
    for (const c of chains) {
      // As a request's hashes arrive: equal strings, never the index's own.
      g.matchAll(step % 2 ? JSON.parse(JSON.stringify(c)) : c, blocks, idle);
      for (let k = 0; k < span; k++) {
        // Reference from our own model of the rank (zero for a rank that does not exist).
        const mine = held.get(k);
        let n = 0;
        let free = 0;
        while (mine && n < c.length && mine.has(c[n]!)) free += mine.get(c[n++]!)!.refCount === 0 ? 1 : 0;
        expect([k, blocks[k], idle[k]]).toEqual([k, n, free]);
        expect(g.matchPrefix(k, c)).toEqual({ blocks: n, reclaimable: free });
      }
      for (const h of c) {
        expect(g.placements(h).map((p) => p.rank)).toEqual(ranks.filter((k) => held.get(k)!.has(h)));
      }
    }
  }
}

test("matchAll equals matchPrefix on ranks 0..3 after random updates", () => {
  checkRandomUpdates([0, 1, 2, 3], 300, 7);
});

test("matchAll equals matchPrefix on every rank of the first word (0..31)", () => {
  checkRandomUpdates(Array.from({ length: 32 }, (_, r) => r), 400, 11);
});

test("matchAll equals matchPrefix on ranks spread over several words, up to rank 255", () => {
  checkRandomUpdates([0, 5, 31, 32, 63, 64, 130, 200, MAX_INDEXED_RANKS - 1], 400, 13);
});

test("a rank beyond 31 widens the index without changing the lower ranks' matches", () => {
  const chain = hashesOf(promptTokens(1, 16 * 10));
  const index = new BlockIndex();
  chain.slice(0, 7).forEach((h, i) => index.add(3, h, i % 2 === 0, ""));
  chain.slice(0, 4).forEach((h) => index.add(31, h, false, ""));
  const before = [new Int32Array(32), new Int32Array(32)] as const;
  index.matchAll(chain, ...before);
  expect(index.rankWidth).toBe(32);
  chain.forEach((h) => index.add(200, h, true, ""));
  expect(index.rankWidth).toBe(224);
  const after = [new Int32Array(201), new Int32Array(201)] as const;
  index.matchAll(chain, ...after);
  expect([...after[0].subarray(0, 32)]).toEqual([...before[0]]);
  expect([...after[1].subarray(0, 32)]).toEqual([...before[1]]);
  expect([after[0][3], after[1][3], after[0][31], after[1][31]]).toEqual([7, 4, 4, 0]);
  expect([after[0][200], after[1][200]]).toEqual([10, 10]);
  expect(index.holderRanks(chain[5]!)).toEqual([3, 200]);
  chain.forEach((h) => index.remove(200, h));
  index.matchAll(chain, ...after);
  expect([...after[0]]).toEqual([...before[0], ...new Array(169).fill(0)]);
});

test("a walk finds where a query leaves the hinted path, at any depth and across branches", () => {
  const trunk = hashesOf(promptTokens(7, 16 * 40));
  const g = new GlobalBlockManager();
  g.applySnapshot(snapshot(0, { entries: chainEntries(trunk) }));
  // Branches off the trunk at several depths; the last published is the trunk's hinted child there.
  const branches = [3, 17, 39].map((at, k) => hashesOf([...promptTokens(7, 16 * at), ...promptTokens(20 + k, 16 * 6)]));
  branches.forEach((b, k) => {
    expect(g.applySnapshot(snapshot(k + 1, { entries: chainEntries(b, 0, k % 2) })).applied).toBe(true);
  });
  const queries = [
    ...branches,
    ...branches.map((b) => b.slice(0, b.length - 2)),
    // Each branch's prefix, then blocks no rank has.
    ...[3, 17, 39].map((at, k) =>
      hashesOf([...promptTokens(7, 16 * at), ...promptTokens(20 + k, 16 * 2), ...promptTokens(90, 16 * 5)])
    ),
    ...[1, 2, 5, 12, 33, 40].map((n) => hashesOf([...promptTokens(7, 16 * n), ...promptTokens(91, 16 * 3)])),
    trunk,
  ];
  const blocks = new Int32Array(4);
  const idle = new Int32Array(4);
  for (let round = 0; round < 2; round++) {
    for (const q of queries) {
      g.matchAll(JSON.parse(JSON.stringify(q)), blocks, idle);
      for (let r = 0; r < 4; r++) {
        const want = g.matchPrefix(r, q);
        expect([r, blocks[r], idle[r]]).toEqual([r, want.blocks, want.reclaimable]);
      }
    }
  }
});

test("child hints never change a match: branches, children published before parents, freed and reused slots", () => {
  const trunk = hashesOf(promptTokens(3, 16 * 10));
  const branch = hashesOf([...promptTokens(3, 16 * 5), ...promptTokens(4, 16 * 4)]);
  expect(branch.slice(0, 5)).toEqual(trunk.slice(0, 5));
  const other = hashesOf(promptTokens(5, 16 * 8));
  const g = new GlobalBlockManager();
  // Rank 0 lists its chain leaf first, so no parent is indexed when its child arrives.
  g.applySnapshot(snapshot(0, { entries: chainEntries(trunk).reverse() }));
  g.applySnapshot(snapshot(1, { entries: chainEntries(branch, 0, 1) }));
  const expectWalks = () => {
    for (const c of [trunk, branch, other, trunk.slice(0, 7), branch]) {
      const span = g.rankSpan();
      const blocks = new Int32Array(span);
      const idle = new Int32Array(span);
      g.matchAll(c, blocks, idle);
      for (let r = 0; r < span; r++) {
        expect([r, blocks[r], idle[r]]).toEqual([r, g.matchPrefix(r, c).blocks, g.matchPrefix(r, c).reclaimable]);
      }
    }
  };
  expectWalks();
  expectWalks();
  expect(g.applySnapshot(snapshot(0, { version: 2, entries: chainEntries(trunk.slice(0, 6)) })).applied).toBe(true);
  // The freed slots of trunk[6..9] go to another chain's blocks.
  g.applySnapshot(snapshot(2, { entries: chainEntries(other) }));
  expectWalks();
  expect(g.applySnapshot(snapshot(0, { version: 3, entries: chainEntries(trunk) })).applied).toBe(true);
  expectWalks();
  const blocks = new Int32Array(3);
  const idle = new Int32Array(3);
  g.matchAll(branch, blocks, idle);
  expect([...blocks, ...idle]).toEqual([5, 9, 0, 5, 0, 0]);
});

test("rank 200 routes like rank 0 did", () => {
  const chain = hashesOf(promptTokens(2, 16 * 8));
  const g = new GlobalBlockManager();
  g.applySnapshot(snapshot(0, { entries: chainEntries(chain.slice(0, 2)) }));
  g.applySnapshot(snapshot(200, { entries: chainEntries(chain.slice(0, 6), 0, 1) }));
  expect(g.healthyRanks()).toEqual([0, 200]);
  expect(g.rankSpan()).toBe(201);
  expect(g.matchPrefix(200, chain)).toEqual({ blocks: 6, reclaimable: 0 });
  const blocks = new Int32Array(201);
  const idle = new Int32Array(201);
  g.matchAll(chain, blocks, idle);
  expect([blocks[0], idle[0], blocks[200], idle[200]]).toEqual([2, 2, 6, 0]);
  expect(g.dropRank(200)).toBe(true);
  expect(g.rankSpan()).toBe(1);
});

test("ranks beyond the index width are rejected", () => {
  expect(MAX_INDEXED_RANKS).toBeGreaterThanOrEqual(256);
  expect(() => new GlobalBlockManager().applySnapshot(snapshot(MAX_INDEXED_RANKS))).toThrow(RangeError);
  expect(() => new GlobalBlockManager().applySnapshot(snapshot(-1))).toThrow(RangeError);
  expect(() => new BlockIndex().add(MAX_INDEXED_RANKS, "ab", true, "")).toThrow(/rank must be an integer in 0\.\.255/);
});
