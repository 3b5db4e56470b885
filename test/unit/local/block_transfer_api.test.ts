// Block manager: reservations for incoming transfers, source pins for outgoing ones, move release.
import { describe, expect, test } from "bun:test";
import { prefixBlockHashes } from "../../../lib/core/block_hash.ts";
import { BlockManager } from "../../../lib/local/block_manager.ts";
import { makeSeq, prefill, range } from "./fixtures.ts";

const BS = 4;
const load = { numRunning: 0, numWaiting: 0, runningTokens: 0, waitingTokens: 0 };

function chainEntries(blocks: number[], tokens: number[], salt?: string) {
  const hashes = prefixBlockHashes(tokens, BS, salt);
  const root = salt ? makeSeq(range(1), BS, { salt }).rootHash : "";
  return blocks.map((block, i) => ({ block, hash: hashes[i]!, parent: i === 0 ? root : hashes[i - 1]! }));
}

describe("reservations", () => {
  test("reserved blocks are invisible until published, then serve prefix hits", () => {
    const bm = new BlockManager({ numBlocks: 6, blockSize: BS });
    const blocks = bm.reserve(2)!;
    expect(blocks).toHaveLength(2);
    expect(bm.numReservedBlocks).toBe(2);
    expect(bm.numFreeBlocks).toBe(4);
    expect(bm.blockInfo(blocks[0]!).state).toBe("Reserved");
    const probe = makeSeq(range(9), BS);
    expect(bm.lookupPrefix(probe)).toEqual([]);
    expect(bm.snapshot(load).entries).toEqual([]);
    bm.checkInvariants();

    expect(bm.publishReserved(chainEntries(blocks, range(8)))).toEqual(blocks);
    expect(bm.numReservedBlocks).toBe(0);
    expect(bm.numReclaimableBlocks).toBe(2);
    expect(bm.lookupPrefix(probe)).toEqual(blocks);
    expect(bm.snapshot(load).entries.map((e) => e.block).sort()).toEqual([...blocks].sort());
    prefill(bm, probe);
    expect(probe.numCachedTokens).toBe(8);
    bm.free(probe);
    bm.checkInvariants({ drained: true });
  });

  test("a salted chain published by a transfer serves only the same salt", () => {
    const bm = new BlockManager({ numBlocks: 4, blockSize: BS });
    const blocks = bm.reserve(1)!;
    bm.publishReserved(chainEntries(blocks, range(4), "t1"));
    expect(bm.lookupPrefix(makeSeq(range(5), BS, { salt: "t1" }))).toEqual(blocks);
    expect(bm.lookupPrefix(makeSeq(range(5), BS))).toEqual([]);
  });

  test("releasing a reservation (abort) returns every block to free", () => {
    const bm = new BlockManager({ numBlocks: 4, blockSize: BS });
    const blocks = bm.reserve(3)!;
    expect(bm.reserve(2)).toBeNull();
    bm.releaseReserved(blocks);
    expect(bm.numFreeBlocks).toBe(4);
    bm.checkInvariants({ drained: true });
    expect(() => bm.releaseReserved(blocks)).toThrow(/block \d: it is Free, expected Reserved/);
  });

  test("publishing a hash already cached here frees the redundant copy", () => {
    const bm = new BlockManager({ numBlocks: 6, blockSize: BS });
    const a = makeSeq(range(5), BS);
    prefill(bm, a);
    const blocks = bm.reserve(2)!;
    expect(bm.publishReserved(chainEntries(blocks, range(8)))).toEqual([blocks[1]!]);
    expect(bm.blockInfo(blocks[0]!).state).toBe("Free");
    expect(bm.lookupPrefix(makeSeq(range(9), BS))).toEqual([a.blockTable[0]!, blocks[1]!]);
    bm.checkInvariants({ liveBlockTables: [a.blockTable] });
  });

  test("reservation can reclaim cached entries but never live blocks", () => {
    const bm = new BlockManager({ numBlocks: 4, blockSize: BS });
    const a = makeSeq(range(5), BS);
    const b = makeSeq(range(5, 100), BS);
    prefill(bm, a);
    prefill(bm, b);
    bm.free(b); // 1 reclaimable + 1 free back
    expect(bm.reserve(3)).toBeNull();
    expect(bm.reserve(2)).toHaveLength(2);
    expect(bm.lookupPrefix(makeSeq(range(5, 100), BS))).toEqual([]);
    bm.checkInvariants({ liveBlockTables: [a.blockTable] });
  });

  test("a reservation reclaims cold cache in reclaim order but keeps the pinned parent of the incoming chain", () => {
    const bm = new BlockManager({ numBlocks: 4, blockSize: BS });
    const p = makeSeq(range(5), BS); // one complete block: the parent, cached first (the coldest leaf)
    prefill(bm, p);
    bm.free(p);
    const f = makeSeq(range(12, 100), BS); // three complete blocks, cached after it
    prefill(bm, f);
    bm.free(f);
    expect([bm.numFreeBlocks, bm.numReclaimableBlocks]).toEqual([0, 4]);
    const parent = bm.cachedBlockOf(p.blockHashes[0]!)!;
    const kept = bm.pinCached([p.blockHashes[0]!, p.blockHashes[0]!, "not cached here"]);
    expect(kept).toEqual([parent]);
    expect(bm.numReclaimableBlocks).toBe(3);
    const blocks = bm.reserve(2)!;
    expect(blocks).toHaveLength(2);
    // f's chain went from its tail; the parent stayed.
    expect(bm.cachedBlockOf(p.blockHashes[0]!)).toBe(parent);
    expect(f.blockHashes.map((h) => bm.cachedBlockOf(h) !== undefined)).toEqual([true, false, false]);
    expect(bm.reserve(2)).toBeNull(); // the pinned parent is never taken
    const incoming = chainEntries([parent, ...blocks], range(12)).slice(1);
    expect(bm.publishReserved(incoming)).toEqual(blocks);
    bm.unpinSource(kept);
    expect(bm.lookupPrefix(makeSeq(range(13), BS))).toEqual([parent, ...blocks]);
    bm.checkInvariants({ drained: true });
    expect(bm.numFreeBlocks + bm.numReclaimableBlocks).toBe(4);
  });
});

describe("source pins", () => {
  test("a pin holds the current generation; a stale generation is refused", () => {
    const bm = new BlockManager({ numBlocks: 4, blockSize: BS });
    const a = makeSeq(range(9), BS);
    prefill(bm, a);
    bm.free(a);
    const b0 = bm.cachedBlockOf(a.blockHashes[0]!)!;
    const b1 = bm.cachedBlockOf(a.blockHashes[1]!)!;
    const refs = [b0, b1].map((block) => ({ block, generation: bm.blockInfo(block).generation }));
    expect(bm.pinSource([{ block: b0, generation: refs[0]!.generation + 1 }])).toBe(false);
    expect(bm.pinSource([{ block: 3, generation: 0 }])).toBe(false); // never published
    expect(bm.pinSource(refs)).toBe(true);
    expect(bm.numReclaimableBlocks).toBe(0);
    expect(bm.reserve(3)).toBeNull(); // pinned blocks are not reclaimed
    expect(bm.reserve(2)).toHaveLength(2);
    bm.unpinSource([b0, b1]);
    expect(bm.numReclaimableBlocks).toBe(2);
    expect(() => bm.unpinSource([b0])).toThrow(/not pinned/);
    bm.checkInvariants();
  });

  test("after reuse, a ref to the old use is stale", () => {
    const bm = new BlockManager({ numBlocks: 2, blockSize: BS });
    const a = makeSeq(range(5), BS);
    prefill(bm, a);
    const b0 = a.blockTable[0]!;
    const old = { block: b0, generation: bm.blockInfo(b0).generation };
    bm.free(a);
    bm.reserve(2); // reclaims b0
    expect(bm.pinSource([old])).toBe(false);
  });

  test("move release frees an unreferenced suffix and stops at a live or inner block", () => {
    const bm = new BlockManager({ numBlocks: 8, blockSize: BS });
    const a = makeSeq(range(13), BS);
    prefill(bm, a);
    const chain = a.blockTable.slice(0, 3);
    const b = makeSeq(range(9), BS); // holds the first two blocks
    prefill(bm, b);
    bm.free(a);
    expect(bm.reclaimSuffix(chain)).toEqual([chain[2]!]);
    bm.free(b);
    expect(bm.reclaimSuffix(chain.slice(0, 1))).toEqual([]); // chain[1] still cached: chain[0] is inner
    expect(bm.reclaimSuffix(chain.slice(0, 2))).toEqual([chain[1]!, chain[0]!]);
    bm.checkInvariants({ drained: true });
    expect(bm.numFreeBlocks).toBe(8);
  });
});
