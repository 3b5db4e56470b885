// PrefixCache: the hash -> block map, chain child counts, reference/pin accounting and reclamation.
import { describe, expect, test } from "bun:test";
import { checkBlockInvariants } from "../../../lib/local/block_invariants.ts";
import { BlockPool, BlockState } from "../../../lib/local/block_pool.ts";
import { BlockPublisher } from "../../../lib/local/block_publisher.ts";
import { PrefixCache } from "../../../lib/local/prefix_cache.ts";

const load = { numRunning: 0, numWaiting: 0, runningTokens: 0, waitingTokens: 0 };

function setup(numBlocks: number, enabled = true) {
  let t = 0;
  const pool = new BlockPool(numBlocks);
  const publisher = new BlockPublisher(0, 1);
  const cache = new PrefixCache(pool, publisher, () => ++t, enabled);
  const published = {
    entry: (b: number) => cache.entry(b),
    entries: () => cache.entries(),
    capacity: () => ({ numBlocks, blockSize: 4, numFree: pool.numFree, numReclaimable: cache.numReclaimable }),
  };
  const check = () => checkBlockInvariants({ pool, ...cache.state(), numReserved: 0 });
  /** A block written by one sequence and committed under `hash`: Ready, one reference. */
  const commit = (hash: string, parent: string): number => {
    const b = pool.take(BlockState.Writing);
    pool.refCount[b] = 1;
    pool.state[b] = BlockState.Ready;
    cache.register(b, hash, parent, ++t);
    return b;
  };
  return { pool, publisher, cache, published, check, commit };
}

describe("PrefixCache registration", () => {
  test("a registered block is found by its hash and reported as added", () => {
    const { cache, publisher, published, commit, check } = setup(4);
    const a = commit("h1", "root");
    expect(cache.blockOf("h1")).toBe(a);
    expect(cache.hashOf(a)).toBe("h1");
    expect(cache.entry(a)).toMatchObject({ hash: "h1", parent: "root", block: a, refCount: 1, accessCount: 1 });
    expect(publisher.delta(published, load)!.added.map((e) => e.block)).toEqual([a]);
    check();
  });

  test("a duplicate hash stays private and is freed at its last reference", () => {
    const { pool, cache, commit, check } = setup(4);
    const a = commit("h1", "root");
    const dup = commit("h1", "root");
    expect(cache.blockOf("h1")).toBe(a);
    expect(cache.hashOf(dup)).toBeNull();
    cache.release(dup);
    expect(pool.state[dup]).toBe(BlockState.Free);
    expect(cache.numReclaimable).toBe(0);
    check();
  });

  test("disabled, nothing registers and released blocks go straight to free", () => {
    const { pool, cache, commit, check } = setup(4, false);
    const a = commit("h1", "root");
    expect(cache.blockOf("h1")).toBeUndefined();
    cache.release(a);
    expect(pool.numFree).toBe(4);
    check();
  });
});

describe("PrefixCache references and pins", () => {
  test("a published block is reclaimable exactly when it has no references and no pins", () => {
    const { cache, commit, check } = setup(4);
    const a = commit("h1", "root");
    expect(cache.numReclaimable).toBe(0);
    cache.release(a);
    expect(cache.numReclaimable).toBe(1);
    cache.acquire(a);
    expect(cache.numReclaimable).toBe(0);
    cache.release(a);
    cache.pin(a);
    cache.pin(a);
    expect(cache.numReclaimable).toBe(0);
    cache.unpin(a);
    expect(cache.numReclaimable).toBe(0);
    cache.unpin(a);
    expect(cache.numReclaimable).toBe(1);
    check();
  });

  test("a release counts as a use but not an access; releasing an unreferenced block throws", () => {
    const { cache, commit } = setup(4);
    const a = commit("h1", "root");
    const before = cache.entry(a).lastAccess;
    cache.release(a);
    expect(cache.entry(a).lastAccess).toBeGreaterThan(before);
    expect(cache.accessCount(a)).toBe(1);
    expect(() => cache.release(a)).toThrow(/block \d released with refCount=0/);
  });
});

describe("PrefixCache reclamation", () => {
  test("ensureFree takes leaves only, least frequently then least recently used, and unpublishes them", () => {
    const { pool, cache, publisher, published, commit, check } = setup(4);
    const p = commit("p", "root");
    const c = commit("c", "p");
    const x = commit("x", "root");
    const y = commit("y", "root");
    for (const b of [p, c, x, y]) cache.release(b);
    cache.acquire(y);
    cache.touch(y, 100, true); // y: two accesses
    cache.release(y);
    publisher.snapshot(published, load);
    expect(cache.ensureFree(1)).toBe(true);
    expect(pool.state[c]).toBe(BlockState.Free); // a leaf with one access, older than x
    expect(cache.ensureFree(2)).toBe(true);
    expect(pool.state[p]).toBe(BlockState.Free); // its child gone, p became a leaf
    expect(cache.ensureFree(3)).toBe(true);
    expect(pool.state[x]).toBe(BlockState.Free);
    expect(cache.blockOf("y")).toBe(y);
    expect(publisher.delta(published, load)!.removed.map((r) => r.hash).sort()).toEqual(["c", "p", "x"]);
    check();
  });

  test("ensureFree refuses, reclaiming nothing, when free plus reclaimable is short", () => {
    const { pool, cache, commit, check } = setup(3);
    const a = commit("a", "root");
    commit("b", "root");
    cache.release(a);
    expect(cache.ensureFree(3)).toBe(false);
    expect(pool.numFree).toBe(1);
    expect(cache.blockOf("a")).toBe(a);
    check();
  });

  test("a parent whose cached child is live is never reclaimed", () => {
    const { cache, commit, check } = setup(2);
    const p = commit("p", "root");
    commit("c", "p");
    cache.release(p);
    expect(cache.numReclaimable).toBe(1);
    expect(cache.ensureFree(1)).toBe(false);
    expect(cache.blockOf("p")).toBe(p);
    check();
  });

  test("pinned and referenced blocks are never reclaimed", () => {
    const { cache, commit, check } = setup(2);
    const a = commit("a", "root");
    const b = commit("b", "root");
    cache.release(a);
    cache.pin(a);
    expect(cache.ensureFree(1)).toBe(false);
    cache.unpin(a);
    expect(cache.ensureFree(1)).toBe(true);
    expect(cache.blockOf("a")).toBeUndefined();
    expect(cache.blockOf("b")).toBe(b);
    check();
  });

  test("reclaimSuffix frees a chain from its tail and stops at the first block that is not a free leaf", () => {
    const { pool, cache, commit, check } = setup(4);
    const chain = [commit("a", "root"), commit("b", "a"), commit("c", "b")];
    cache.release(chain[2]!);
    cache.release(chain[0]!);
    expect(cache.reclaimSuffix(chain)).toEqual([chain[2]!]); // b is still referenced
    cache.release(chain[1]!);
    expect(cache.reclaimSuffix(chain)).toEqual([]); // its tail is no longer published
    expect(cache.reclaimSuffix(chain.slice(0, 2))).toEqual([chain[1]!, chain[0]!]);
    expect(pool.numFree).toBe(4);
    expect(() => cache.reclaimSuffix([9])).toThrow(RangeError);
    check();
  });
});
