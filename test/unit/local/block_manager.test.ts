// Block manager: hash chaining and salts, references, readiness, reclamation order, generations.
import { describe, expect, test } from "bun:test";
import { prefixBlockHashes } from "../../../lib/core/block_hash.ts";
import { BlockManager } from "../../../lib/local/block_manager.ts";
import { makeSeq, prefill, range } from "./fixtures.ts";

const BS = 4;

function manager(numBlocks: number, enablePrefixCaching = true): BlockManager {
  let t = 0;
  return new BlockManager({ numBlocks, blockSize: BS, enablePrefixCaching, now: () => ++t });
}

describe("prefix lookup", () => {
  test("sequence hashes chain the salt root and match prefixBlockHashes", () => {
    const s = makeSeq(range(10), BS, { salt: "tenant-a" });
    expect(s.blockHashes).toEqual(prefixBlockHashes(range(10), BS, "tenant-a"));
    expect(s.blockHashes).not.toEqual(prefixBlockHashes(range(10), BS));
    s.appendToken(10, 0, 0);
    s.appendToken(11, 0, 0);
    expect(s.blockHashes).toEqual(prefixBlockHashes(range(12), BS, "tenant-a"));
  });

  test("a second request reuses the complete blocks of the first, up to the first difference", () => {
    const bm = manager(16);
    const a = makeSeq(range(13), BS);
    expect(prefill(bm, a)).toBe(true);
    const b = makeSeq([...range(8), 99, 98, 97, 96, 95], BS);
    const hit = bm.lookupPrefix(b);
    expect(hit).toEqual(a.blockTable.slice(0, 2));
    expect(prefill(bm, b)).toBe(true);
    expect(b.numCachedTokens).toBe(8);
    expect(b.blockTable.slice(0, 2)).toEqual(a.blockTable.slice(0, 2));
    expect(bm.blockInfo(a.blockTable[0]!).refCount).toBe(2);
    expect(bm.blockInfo(a.blockTable[2]!).refCount).toBe(1);
    expect(bm.prefixHitTokens).toBe(8);
    expect(bm.prefixQueryTokens).toBe(26);
    bm.checkInvariants({ liveBlockTables: [a.blockTable, b.blockTable] });
  });

  test("different cache salts never share blocks; equal salts do", () => {
    const bm = manager(16);
    const a = makeSeq(range(9), BS, { salt: "x" });
    prefill(bm, a);
    expect(bm.lookupPrefix(makeSeq(range(9), BS, { salt: "y" }))).toEqual([]);
    expect(bm.lookupPrefix(makeSeq(range(9), BS))).toEqual([]);
    expect(bm.lookupPrefix(makeSeq(range(9), BS, { salt: "x" }))).toEqual(a.blockTable.slice(0, 2));
  });

  test("the last token is always recomputed: a block-aligned prompt hits one block less", () => {
    const bm = manager(16);
    const a = makeSeq(range(8), BS);
    prefill(bm, a);
    expect(bm.lookupPrefix(makeSeq(range(8), BS))).toHaveLength(1);
    expect(bm.lookupPrefix(makeSeq(range(9), BS))).toHaveLength(2);
  });

  test("without prefix caching nothing is shared and released blocks go straight to free", () => {
    const bm = manager(8, false);
    const a = makeSeq(range(9), BS);
    prefill(bm, a);
    expect(bm.lookupPrefix(makeSeq(range(9), BS))).toEqual([]);
    bm.free(a);
    expect(bm.numFreeBlocks).toBe(8);
    expect(bm.numReclaimableBlocks).toBe(0);
    bm.checkInvariants({ drained: true });
  });
});

describe("readiness", () => {
  test("a block is findable only after the step that fills it is committed", () => {
    const bm = manager(8);
    const a = makeSeq(range(9), BS);
    expect(bm.allocateSlots(a, 9, [])).toBe(true);
    expect(a.blockTable).toHaveLength(3);
    expect(bm.blockInfo(a.blockTable[0]!).state).toBe("Writing");
    expect(bm.lookupPrefix(makeSeq(range(9), BS))).toEqual([]);
    // First chunk computed: only block 0 is complete.
    a.numComputedTokens = 5;
    bm.commitComputed(a);
    expect(bm.blockInfo(a.blockTable[0]!).state).toBe("Ready");
    expect(bm.blockInfo(a.blockTable[1]!).state).toBe("Writing");
    expect(bm.lookupPrefix(makeSeq(range(9), BS))).toEqual([a.blockTable[0]!]);
    a.numComputedTokens = 9;
    bm.commitComputed(a);
    expect(bm.lookupPrefix(makeSeq(range(9), BS))).toEqual(a.blockTable.slice(0, 2));
    // The partial third block is never published.
    expect(bm.blockInfo(a.blockTable[2]!).hash).toBeNull();
  });

  test("a decoded token completes a block only once its K/V is computed by the next step", () => {
    const bm = manager(8);
    const a = makeSeq(range(7), BS);
    prefill(bm, a);
    a.appendToken(7, 0, 0); // fills block 1 (tokens 4..7); token 7's K/V is not written yet
    expect(a.blockHashes).toHaveLength(2);
    bm.commitComputed(a);
    expect(bm.blockInfo(a.blockTable[1]!).state).toBe("Writing");
    expect(bm.allocateSlots(a, 1)).toBe(true);
    a.numComputedTokens += 1;
    bm.commitComputed(a);
    expect(bm.blockInfo(a.blockTable[1]!).state).toBe("Ready");
    expect(bm.lookupPrefix(makeSeq(range(9), BS))).toEqual(a.blockTable.slice(0, 2));
  });

  test("a duplicate of an already cached hash stays private and is freed on release", () => {
    const bm = manager(8);
    const a = makeSeq(range(5), BS);
    const b = makeSeq(range(5), BS);
    bm.allocateSlots(a, 5, []);
    bm.allocateSlots(b, 5, []); // admitted before a's block was ready: computes its own copy
    a.numComputedTokens = b.numComputedTokens = 5;
    bm.commitComputed(a);
    bm.commitComputed(b);
    expect(bm.cachedBlockOf(a.blockHashes[0]!)).toBe(a.blockTable[0]!);
    expect(bm.blockInfo(b.blockTable[0]!).hash).toBeNull();
    bm.free(b);
    expect(bm.numFreeBlocks).toBe(6);
    bm.free(a);
    expect(bm.numReclaimableBlocks).toBe(1);
    bm.checkInvariants({ drained: true });
  });
});

describe("reference counts and allocation failure", () => {
  test("freeing keeps complete blocks as reclaimable entries; a hit revives them", () => {
    const bm = manager(8);
    const a = makeSeq(range(9), BS);
    prefill(bm, a);
    const [b0, b1] = a.blockTable;
    bm.free(a);
    expect(bm.numReclaimableBlocks).toBe(2);
    expect(bm.numFreeBlocks).toBe(6);
    bm.checkInvariants({ drained: true });
    const c = makeSeq(range(10), BS);
    prefill(bm, c);
    expect(c.blockTable.slice(0, 2)).toEqual([b0!, b1!]);
    expect(bm.numReclaimableBlocks).toBe(0);
    expect(bm.blockInfo(b0!).accessCount).toBe(2);
    bm.checkInvariants({ liveBlockTables: [c.blockTable] });
  });

  test("a failed allocation changes nothing the sequence or the cache holds", () => {
    const bm = manager(4);
    const a = makeSeq(range(9), BS);
    prefill(bm, a);
    bm.free(a); // 2 reclaimable, 2 free
    const b = makeSeq([...range(8), 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62], BS); // hits 2, needs 4 more
    const cached = bm.lookupPrefix(b);
    expect(cached).toHaveLength(2);
    expect(bm.allocateSlots(b, b.numTokens - 8, cached)).toBe(false);
    expect(b.blockTable).toEqual([]);
    expect(bm.numReclaimableBlocks).toBe(2);
    expect(bm.numFreeBlocks).toBe(2);
    expect(bm.blockInfo(cached[0]!).refCount).toBe(0);
    bm.checkInvariants({ drained: true });
  });
});

describe("reclamation", () => {
  /** Which of `blocks` lose their hash while `fn` runs, in order of loss (one reclaim per call). */
  function reclaimOrder(bm: BlockManager, blocks: number[], steps: number): number[] {
    const order: number[] = [];
    for (let i = 0; i < steps; i++) {
      const cachedBefore = blocks.filter((b) => bm.blockInfo(b).hash !== null);
      expect(bm.reserve(1)).toHaveLength(1);
      for (const b of cachedBefore) if (bm.blockInfo(b).hash === null) order.push(b);
    }
    return order;
  }

  test("leaves go first even when an ancestor is older (received chain, published root first)", () => {
    const bm = manager(3);
    const hashes = prefixBlockHashes(range(12), BS);
    const blocks = bm.reserve(3)!;
    bm.publishReserved(blocks.map((block, i) => ({ block, hash: hashes[i]!, parent: i === 0 ? "" : hashes[i - 1]! })));
    expect(bm.numReclaimableBlocks).toBe(3);
    expect(reclaimOrder(bm, blocks, 3)).toEqual([blocks[2]!, blocks[1]!, blocks[0]!]);
    bm.checkInvariants();
  });

  test("a request's chain is reclaimed from its tail", () => {
    const bm = manager(4);
    const a = makeSeq(range(13), BS); // 3 complete blocks + 1 partial
    prefill(bm, a);
    const chain = a.blockTable.slice(0, 3);
    bm.free(a);
    expect(bm.reserve(1)).toHaveLength(1); // the free one
    expect(reclaimOrder(bm, chain, 3)).toEqual([chain[2]!, chain[1]!, chain[0]!]);
  });

  test("among leaves the least frequently used goes first, then the least recently used", () => {
    const bm = manager(6);
    const hot = makeSeq(range(5, 100), BS);
    const warm = makeSeq(range(5, 200), BS);
    const cold = makeSeq(range(5, 300), BS);
    // hot: used three times but released longest ago; cold and warm: used once, cold released first.
    for (let i = 0; i < 3; i++) {
      const again = makeSeq(range(5, 100), BS);
      prefill(bm, again);
      bm.free(again);
    }
    for (const s of [warm, cold]) prefill(bm, s);
    for (const s of [cold, warm]) bm.free(s);
    const [hotB, warmB, coldB] = [
      bm.cachedBlockOf(hot.blockHashes[0]!)!,
      bm.cachedBlockOf(warm.blockHashes[0]!)!,
      bm.cachedBlockOf(cold.blockHashes[0]!)!,
    ];
    expect(bm.blockInfo(hotB).accessCount).toBe(3);
    expect(bm.reserve(bm.numFreeBlocks)).not.toBeNull();
    expect(reclaimOrder(bm, [hotB, warmB, coldB], 3)).toEqual([coldB, warmB, hotB]);
  });

  test("reclaimed blocks get a new generation when reused", () => {
    const bm = manager(2);
    const a = makeSeq(range(5), BS);
    prefill(bm, a);
    const b0 = a.blockTable[0]!;
    const gen = bm.blockInfo(b0).generation;
    bm.free(a);
    const b = makeSeq(range(8, 500), BS);
    prefill(bm, b);
    expect(b.blockTable).toContain(b0);
    expect(bm.blockInfo(b0).generation).toBe(gen + 1);
  });

  test("a block whose cached child is live is not reclaimed", () => {
    const bm = manager(5);
    const a = makeSeq(range(5), BS);
    const b = makeSeq(range(9), BS);
    bm.allocateSlots(a, 5, []);
    bm.allocateSlots(b, 9, []); // computes its own copy of block 0, then block 1 chained to it
    a.numComputedTokens = 5;
    b.numComputedTokens = 9;
    bm.commitComputed(a); // a's block 0 is the published one
    bm.commitComputed(b); // b's block 1 publishes with parent = block 0's hash
    const published0 = a.blockTable[0]!;
    bm.free(a);
    expect(bm.numReclaimableBlocks).toBe(1);
    // 0 free blocks remain (a's partial freed: 1 free). Asking for 2 cannot reclaim block 0 (its child is live).
    expect(bm.numFreeBlocks).toBe(1);
    expect(bm.reserve(2)).toBeNull();
    expect(bm.blockInfo(published0).hash).not.toBeNull();
    bm.free(b);
    expect(bm.reserve(3)).toHaveLength(3);
    bm.checkInvariants();
  });
});
