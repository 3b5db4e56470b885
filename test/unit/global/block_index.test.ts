// The bitmask index agrees with per-rank prefix walks through random snapshots, deltas and drops.
import { expect, test } from "bun:test";
import type { BlockEntry } from "../../../lib/core/block_snapshot.ts";
import { MAX_INDEXED_RANKS } from "../../../lib/global/block_index.ts";
import { GlobalBlockManager } from "../../../lib/global/global_block_manager.ts";
import { chainEntries, hashesOf, promptTokens, snapshot } from "./page_table_fixture.ts";

function prng(seed: number) {
  let s = seed;
  return () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
}

test("matchAll equals matchPrefix on every rank after random updates", () => {
  const rand = prng(7);
  const chains = Array.from({ length: 6 }, (_, k) => hashesOf(promptTokens(k, 16 * 12)));
  const g = new GlobalBlockManager();
  const version = [1, 1, 1, 1];
  const held: Map<string, BlockEntry>[] = [0, 1, 2, 3].map(() => new Map());
  for (let r = 0; r < 4; r++) g.applySnapshot(snapshot(r));
  const blocks = new Int32Array(MAX_INDEXED_RANKS);
  const idle = new Int32Array(MAX_INDEXED_RANKS);
  for (let step = 0; step < 300; step++) {
    const r = Math.floor(rand() * 4);
    const table = held[r]!;
    const op = rand();
    if (op < 0.1) {
      g.dropRank(r);
      table.clear();
      version[r] = 1;
      g.applySnapshot(snapshot(r, { epoch: step + 2 }));
    } else if (op < 0.25) {
      const c = chains[Math.floor(rand() * chains.length)]!;
      const entries = chainEntries(c.slice(0, 1 + Math.floor(rand() * c.length)), 0, rand() < 0.5 ? 0 : 1);
      table.clear();
      for (const e of entries) table.set(e.hash, e);
      g.applySnapshot(snapshot(r, { epoch: g.table(r)!.epoch, version: ++version[r]!, entries }));
    } else {
      const c = chains[Math.floor(rand() * chains.length)]!;
      const i = Math.floor(rand() * c.length);
      const h = c[i]!;
      const cur = table.get(h);
      const base = {
        rank: r,
        epoch: g.table(r)!.epoch,
        baseVersion: version[r]!,
        version: version[r]! + 1,
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
      } else {base.added.push({
          hash: h,
          parent: i ? c[i - 1]! : "",
          block: 500 + step,
          generation: 1,
          refCount: rand() < 0.5 ? 0 : 2,
          lastAccess: step,
          accessCount: 1,
        });}
      expect(g.applyDelta(base).applied).toBe(true);
      version[r]!++;
      for (const x of base.removed) table.delete(x.hash);
      for (const x of base.added) table.set(x.hash, x);
      for (const x of base.touched) table.set(x.hash, { ...table.get(x.hash)!, refCount: x.refCount });
    }
    for (const c of chains) {
      g.matchAll(c, g.healthyMask(), blocks, idle);
      for (let k = 0; k < 4; k++) {
        const m = g.matchPrefix(k, c);
        // Reference from our own model of the rank.
        let n = 0;
        let free = 0;
        while (n < c.length && held[k]!.has(c[n]!)) free += held[k]!.get(c[n++]!)!.refCount === 0 ? 1 : 0;
        expect([blocks[k], idle[k]]).toEqual([n, free]);
        expect(m).toEqual({ blocks: n, reclaimable: free });
      }
      for (const h of c) {
        expect(g.placements(h).map((p) => p.rank)).toEqual([0, 1, 2, 3].filter((k) => held[k]!.has(h)));
      }
    }
  }
});

test("ranks beyond the index width are rejected", () => {
  expect(() => new GlobalBlockManager().applySnapshot(snapshot(MAX_INDEXED_RANKS))).toThrow(RangeError);
});
