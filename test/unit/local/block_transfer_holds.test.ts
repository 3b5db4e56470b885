// TransferHolds: reservations for incoming transfers and pins for outgoing ones.
import { describe, expect, test } from "bun:test";
import { checkBlockInvariants } from "../../../lib/local/block_invariants.ts";
import { BlockPool, BlockState } from "../../../lib/local/block_pool.ts";
import { BlockPublisher } from "../../../lib/local/block_publisher.ts";
import { PrefixCache } from "../../../lib/local/prefix_cache.ts";
import { TransferHolds } from "../../../lib/local/transfer_holds.ts";

function setup(numBlocks: number) {
  let t = 0;
  const pool = new BlockPool(numBlocks);
  const cache = new PrefixCache(pool, new BlockPublisher(0, 1), () => ++t, true);
  const holds = new TransferHolds(pool, cache, () => ++t);
  const check = (drained = false) =>
    checkBlockInvariants({ pool, ...cache.state(), numReserved: holds.numReserved }, { drained });
  /** A published, unreferenced cache entry under `hash`. */
  const cached = (hash: string, parent = "root"): number => {
    const [b] = holds.reserve(1)!;
    holds.publishReserved([{ block: b!, hash, parent }]);
    return b!;
  };
  return { pool, cache, holds, check, cached };
}

describe("TransferHolds reservations", () => {
  test("reserved blocks are Reserved, counted, and invisible until published", () => {
    const { pool, cache, holds, check } = setup(4);
    const r = holds.reserve(2)!;
    expect(r).toHaveLength(2);
    expect(r.map((b) => pool.state[b])).toEqual([BlockState.Reserved, BlockState.Reserved]);
    expect(holds.numReserved).toBe(2);
    check();
    expect(holds.publishReserved([{ block: r[0]!, hash: "h", parent: "root" }])).toEqual([r[0]!]);
    expect(cache.blockOf("h")).toBe(r[0]!);
    expect(cache.numReclaimable).toBe(1);
    expect(holds.numReserved).toBe(1);
    holds.releaseReserved([r[1]!]);
    expect(holds.numReserved).toBe(0);
    check(true);
  });

  test("a reservation that does not fit is null and changes nothing; a bad count is a RangeError", () => {
    const { pool, holds, cached } = setup(3);
    cached("a");
    expect(holds.reserve(4)).toBeNull();
    expect(pool.numFree).toBe(2);
    expect(() => holds.reserve(-1)).toThrow(/reserve count must be a non-negative integer, got -1/);
    expect(() => holds.reserve(1.5)).toThrow(RangeError);
  });

  test("a reservation reclaims unreferenced cache entries when too few blocks are free", () => {
    const { cache, holds, check, cached } = setup(2);
    cached("a");
    cached("b");
    expect(holds.reserve(1)).toHaveLength(1);
    expect([cache.blockOf("a"), cache.blockOf("b")].filter((b) => b !== undefined)).toHaveLength(1);
    check();
  });

  test("a moved block is reclaimed before older entries that were used here; a copied one after them", () => {
    const { cache, holds, check, cached } = setup(3);
    cached("old"); // published first: the least recent of equal use
    const [m] = holds.reserve(1)!;
    holds.publishReserved([{ block: m!, hash: "moved", parent: "root", moved: true }]);
    cached("copied");
    expect(cache.accessCount(cache.blockOf("moved")!)).toBe(0);
    expect(holds.reserve(1)).toHaveLength(1);
    expect(["old", "moved", "copied"].filter((h) => cache.blockOf(h) !== undefined)).toEqual(["old", "copied"]);
    expect(holds.reserve(1)).toHaveLength(1);
    expect(["old", "copied"].filter((h) => cache.blockOf(h) !== undefined)).toEqual(["copied"]);
    check();
  });

  test("a received copy of a hash already cached is freed, not published", () => {
    const { pool, holds, check, cached } = setup(3);
    const a = cached("a");
    const [r] = holds.reserve(1)!;
    expect(holds.publishReserved([{ block: r!, hash: "a", parent: "root" }])).toEqual([]);
    expect(pool.state[r!]).toBe(BlockState.Free);
    expect(pool.state[a]).toBe(BlockState.Ready);
    check(true);
  });

  test("publishing or releasing a block that is not reserved is a RangeError that changes nothing", () => {
    const { holds, check, cached } = setup(4);
    const a = cached("a");
    const [r] = holds.reserve(1)!;
    expect(() => holds.publishReserved([{ block: r!, hash: "h", parent: "a" }, { block: a, hash: "h2", parent: "a" }]))
      .toThrow(
        /cannot publish block \d: it is Ready, expected Reserved/,
      );
    expect(holds.numReserved).toBe(1);
    expect(() => holds.releaseReserved([3])).toThrow(
      /cannot release a reservation of block 3: it is Free, expected Reserved/,
    );
    expect(() => holds.releaseReserved([7])).toThrow(/block id 7 is outside 0..3/);
    holds.releaseReserved([r!]);
    check(true);
  });
});

describe("TransferHolds pins", () => {
  test("pinSource pins current published blocks all or nothing; a stale generation pins none", () => {
    const { pool, cache, holds, check, cached } = setup(4);
    const a = cached("a");
    const b = cached("b");
    const gen = (x: number) => pool.generation[x]!;
    expect(holds.pinSource([{ block: a, generation: gen(a) }, { block: b, generation: gen(b) + 1 }])).toBe(false);
    expect([pool.pinCount[a], pool.pinCount[b]]).toEqual([0, 0]);
    expect(holds.pinSource([{ block: a, generation: gen(a) }, { block: b, generation: gen(b) }])).toBe(true);
    expect([pool.pinCount[a], pool.pinCount[b]]).toEqual([1, 1]);
    expect(cache.numReclaimable).toBe(0);
    holds.unpin([a, b]);
    expect(cache.numReclaimable).toBe(2);
    check(true);
  });

  test("pinSource refuses an unpublished block", () => {
    const { pool, holds } = setup(4);
    const [r] = holds.reserve(1)!;
    expect(holds.pinSource([{ block: r!, generation: pool.generation[r!]! }])).toBe(false);
    expect(() => holds.pinSource([{ block: -1, generation: 0 }])).toThrow(RangeError);
  });

  test("pinCached pins each cached hash once and skips unknown ones", () => {
    const { pool, holds, check, cached } = setup(4);
    const a = cached("a");
    expect(holds.pinCached(["a", "zz", "a"])).toEqual([a]);
    expect(pool.pinCount[a]).toBe(1);
    expect(holds.reserve(4)).toBeNull(); // the pinned entry cannot be reclaimed
    holds.unpin([a]);
    check(true);
  });

  test("unpinning a block that is not pinned is a RangeError that releases no pin", () => {
    const { pool, holds, cached } = setup(4);
    const a = cached("a");
    const b = cached("b");
    holds.pinCached(["a"]);
    expect(() => holds.unpin([a, b])).toThrow(/block \d is not pinned/);
    expect(pool.pinCount[a]).toBe(1);
  });
});
