// The reclaim forecast counts the cached blocks a rank's own dependency-safe LFU-then-LRU
// reclamation frees before it reaches a block at least as hot as a threshold: strictly colder
// blocks only, never one above a hotter, live or kept block; and it agrees with a brute-force
// simulation of that reclamation on random forests.
import { describe, expect, test } from "bun:test";
import type { BlockEntry } from "../../../../lib/core/block_snapshot.ts";
import { type Hotness, isColder, ReclaimForecast } from "../../../../lib/transfer/control/reclaim_forecast.ts";
import { RankTable } from "../../../../lib/global/rank_table.ts";
import { chainEntries, hashesOf, promptTokens, snapshot } from "../../global/page_table_fixture.ts";

const keyed = (entries: BlockEntry[], accessCount: number, lastAccess: number) =>
  entries.map((e) => ({ ...e, accessCount, lastAccess }));
const chain = (seed: number, n: number, first: number) => chainEntries(hashesOf(promptTokens(seed, n * 16)), first);
const tableOf = (entries: BlockEntry[]) => new RankTable(snapshot(0, { entries }));
const idle = (e: BlockEntry) => e.refCount === 0;

describe("ReclaimForecast", () => {
  test("counts only blocks strictly colder, by access count and then by last access", () => {
    const old = keyed(chain(1, 3, 0), 1, 10);
    const recent = keyed(chain(2, 2, 10), 1, 50);
    const frequent = keyed(chain(3, 4, 20), 3, 0);
    const f = new ReclaimForecast(tableOf([...old, ...recent, ...frequent]), idle);
    expect(f.reclaimable).toBe(9);
    expect(f.colderThan({ accessCount: 1, lastAccess: 10 })).toBe(0); // as hot as `old`: not colder
    expect(f.colderThan({ accessCount: 1, lastAccess: 11 })).toBe(3);
    expect(f.colderThan({ accessCount: 1, lastAccess: 1e9 })).toBe(5);
    expect(f.colderThan({ accessCount: 2, lastAccess: -1 })).toBe(5); // fewer accesses win over recency
    expect(f.colderThan({ accessCount: 4, lastAccess: 0 })).toBe(9);
  });

  test("a cold block above a hotter, live or kept block never counts: leaves go first", () => {
    const hashes = hashesOf(promptTokens(4, 3 * 16));
    const root = keyed(chainEntries(hashes.slice(0, 1), 0), 1, 0);
    const branch = [hashes[1]!, hashes[2]!].map((h, i) => ({
      ...root[0]!,
      hash: h,
      parent: hashes[0]!,
      block: 1 + i,
      lastAccess: 5,
    }));
    // root (coldest) has two children: one cold, one hot.
    const hot = { ...branch[1]!, accessCount: 9 };
    const f = new ReclaimForecast(tableOf([...root, branch[0]!, hot]), idle);
    expect(f.colderThan({ accessCount: 1, lastAccess: 100 })).toBe(1); // only the cold child
    expect(f.colderThan({ accessCount: 10, lastAccess: 0 })).toBe(3);
    const live = new ReclaimForecast(tableOf([...root, branch[0]!, { ...branch[1]!, refCount: 1 }]), idle);
    expect(live.reclaimable).toBe(1);
    expect(live.colderThan({ accessCount: 10, lastAccess: 0 })).toBe(1);
    const kept = new ReclaimForecast(tableOf([...root, ...branch]), (e) => e.hash !== hashes[0]);
    expect(kept.colderThan({ accessCount: 10, lastAccess: 0 })).toBe(2);
  });

  test("agrees with a simulated LFU-then-LRU leaf-first reclamation on random forests", () => {
    let seed = 17;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    for (let round = 0; round < 50; round++) {
      const entries: BlockEntry[] = [];
      for (let i = 0; i < 40; i++) {
        const parent = i > 0 && rand() < 0.8 ? entries[Math.floor(rand() * i)]!.hash : "";
        entries.push({
          hash: `h${round}-${i}`,
          parent,
          block: i,
          generation: 1,
          refCount: rand() < 0.1 ? 1 : 0,
          accessCount: 1 + Math.floor(rand() * 3),
          lastAccess: Math.floor(rand() * 20),
        });
      }
      const f = new ReclaimForecast(tableOf(entries), idle);
      for (let t = 0; t < 5; t++) {
        const hot: Hotness = { accessCount: 1 + Math.floor(rand() * 4), lastAccess: Math.floor(rand() * 20) };
        expect(f.colderThan(hot)).toBe(simulate(entries, hot));
      }
    }
  });
});

/** Reclaims the coldest unreferenced leaf while it is colder than `hot`; returns how many went. */
function simulate(entries: readonly BlockEntry[], hot: Hotness): number {
  const left = new Map(entries.map((e) => [e.hash, e]));
  let n = 0;
  for (;;) {
    const parents = new Set([...left.values()].map((e) => e.parent));
    const leaves = [...left.values()].filter((e) => e.refCount === 0 && !parents.has(e.hash));
    if (leaves.length === 0) return n;
    const coldest = leaves.reduce((a, b) => (isColder(b, a) ? b : a));
    if (!isColder(coldest, hot)) return n;
    left.delete(coldest.hash);
    n++;
  }
}
