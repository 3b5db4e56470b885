// The streams' semantics without sockets: a PageTableMirror fed page-table changes, a BlockBook fed
// request chains, and one EventStream per granularity flushed into events, encoded with LMPool's
// encoder and decoded with the independent subscriber decoder. Node: first copy stores, last copy
// removes, a copy or a move between ranks changes nothing. Rank: a copy stores on the destination, a
// move also removes from the source, a restarted rank clears. Parents always precede children, only
// blocks with known tokens are announced, and a remove followed by a re-add inside one batch window
// produces nothing.
import { describe, expect, test } from "bun:test";
import { type BlockHash, prefixBlockHashes, rootHash } from "../../../lib/core/block_hash.ts";
import { BlockBook } from "../../../lib/kv_events/block_book.ts";
import { encodeEventBatch, type KvEvent } from "../../../lib/kv_events/event_batch.ts";
import { wireHash } from "../../../lib/kv_events/event_hash.ts";
import { EventStream } from "../../../lib/kv_events/event_stream.ts";
import { PageTableMirror } from "../../../lib/kv_events/page_table_mirror.ts";
import { RequestChains } from "../../../lib/kv_events/request_chains.ts";
import { BlockSets } from "../../../lib/kv_events/subscriber/block_sets.ts";
import { decodeEventBatch } from "../../../lib/kv_events/subscriber/event_decoder.ts";

const BS = 4;

/** Two ranks, a node stream and a stream per rank, fed like the service feeds them. */
function harness() {
  const book = new BlockBook(64);
  const chains = new RequestChains(book, BS);
  // The streams read the mirror lazily (at flush), so they can be made before it.
  const node: EventStream = new EventStream(
    { holds: (h) => mirror.heldAnywhere(h), all: () => mirror.allHashes(), size: () => mirror.nodeSize },
    BS,
    { clearWhole: false },
  );
  const ranks = new Map<number, EventStream>();
  for (const r of [0, 1]) {
    ranks.set(
      r,
      new EventStream(
        { holds: (h) => mirror.holds(r, h), all: () => mirror.hashesOf(r), size: () => mirror.rankSize(r) },
        BS,
        { clearWhole: true },
      ),
    );
  }
  const mirror: PageTableMirror = new PageTableMirror({
    rankChanged: (r, h) => ranks.get(r)?.touch(h),
    nodeChanged: (h, held) => {
      node.touch(h);
      if (held) book.pin(h);
      else book.unpin(h);
    },
    rankCleared: (r) => {
      ranks.get(r)?.cleared();
      node.cleared();
    },
  });
  book.onRecorded = (h) => {
    if (!mirror.heldAnywhere(h)) return;
    node.touch(h);
    for (const [r, s] of ranks) if (mirror.holds(r, h)) s.touch(h);
  };
  const sets = {
    node: new BlockSets({ blockSize: BS, dataParallelRank: 0 }),
    0: new BlockSets({ blockSize: BS, dataParallelRank: 0 }),
    1: new BlockSets({ blockSize: BS, dataParallelRank: 1 }),
  };
  let seq = 0n;
  /** Flushes every stream through the wire format into its consumer's set; returns the node's and ranks' events. */
  const flush = () => {
    const out: Record<string, KvEvent[]> = {};
    for (const [name, stream, rank] of [["node", node, 0], ["0", ranks.get(0)!, 0], ["1", ranks.get(1)!, 1]] as const) {
      const events = stream.flush(book);
      out[name] = events;
      if (events.length > 0) sets[name].apply(seq++, decodeEventBatch(encodeEventBatch(1.5, events, rank)));
    }
    return out;
  };
  const entries = (hashes: BlockHash[], salt?: string) => ({
    hashes,
    parents: hashes.map((_, i) => (i === 0 ? rootHash(salt) : hashes[i - 1]!)),
  });
  return { book, chains, mirror, flush, sets, entries };
}

const tokens = (n: number, from = 1) => Array.from({ length: n }, (_, i) => from + i);
const wire = (hs: BlockHash[]) => hs.map(wireHash);

describe("node and per-rank streams", () => {
  test("a chain is stored parents first in one run; a copy to the other rank stores only on that rank", () => {
    const h = harness();
    const prompt = tokens(13); // 3 full blocks and a partial one
    const hashes = prefixBlockHashes(prompt, BS);
    h.chains.start("a", prompt, undefined, hashes);
    const { parents } = h.entries(hashes);
    h.mirror.applyDelta(0, 1, hashes, parents, []);
    const first = h.flush();
    expect(first.node).toEqual([{
      type: "BlockStored",
      blockHashes: wire(hashes),
      parentBlockHash: null,
      tokenIds: prompt.slice(0, 12),
      blockSize: BS,
    }]);
    expect(first["0"]).toEqual(first.node!);
    expect(first["1"]).toEqual([]);
    // A copy of the first two blocks to rank 1: nothing on the node stream, a store on rank 1's.
    h.mirror.applyDelta(1, 1, hashes.slice(0, 2), parents.slice(0, 2), []);
    const copy = h.flush();
    expect(copy.node).toEqual([]);
    expect(copy["1"]!.map((e) => e.type)).toEqual(["BlockStored"]);
    expect([...h.sets[1].blocks.keys()]).toEqual(wire(hashes.slice(0, 2)));
    expect(h.sets.node.blocks.size).toBe(3);
  });

  test("a move: the node stream sees nothing even when the source's removal comes first; per rank it is a remove and a store", () => {
    const h = harness();
    const prompt = tokens(8, 100);
    const hashes = prefixBlockHashes(prompt, BS);
    h.chains.start("a", prompt, undefined, hashes);
    const { parents } = h.entries(hashes);
    h.mirror.applyDelta(0, 1, hashes, parents, []);
    h.flush();
    // Source releases first, destination publishes second, both within one batch window.
    h.mirror.applyDelta(0, 1, [], [], [hashes[1]!]);
    h.mirror.applyDelta(1, 1, [hashes[1]!], [parents[1]!], []);
    h.mirror.applyDelta(1, 1, [hashes[0]!], [parents[0]!], []);
    const moved = h.flush();
    expect(moved.node).toEqual([]);
    expect(moved["0"]!.map((e) => e.type)).toEqual(["BlockRemoved"]);
    expect(moved["1"]!.map((e) => e.type)).toEqual(["BlockStored"]);
    expect(h.sets[1].blocks.size).toBe(2);
    expect(h.sets[0].blocks.size).toBe(1);
  });

  test("the last copy's eviction removes on the node; a rank that restarts clears its own stream", () => {
    const h = harness();
    const p1 = tokens(8, 200);
    const hs = prefixBlockHashes(p1, BS);
    h.chains.start("a", p1, undefined, hs);
    const { parents } = h.entries(hs);
    h.mirror.applyDelta(0, 1, hs, parents, []);
    h.mirror.applyDelta(1, 1, hs, parents, []);
    h.flush();
    h.mirror.applyDelta(0, 1, [], [], [hs[1]!]); // evicted on rank 0 only
    expect(h.flush().node).toEqual([]);
    h.mirror.drop(1); // rank 1 restarted: its stream clears; the node removes what no rank holds now
    const lost = h.flush();
    expect(lost["1"]).toEqual([{ type: "AllBlocksCleared" }]);
    expect(lost.node).toEqual([{ type: "BlockRemoved", blockHashes: [wireHash(hs[1]!)] }]);
    expect(h.sets[1].blocks.size).toBe(0);
    h.mirror.drop(0); // the node's whole cache is gone
    expect(h.flush().node).toEqual([{ type: "AllBlocksCleared" }]);
    expect(h.sets.node.blocks.size).toBe(0);
  });

  test("an output block waits for its tokens (a request that did not stream) and for its parent", () => {
    const h = harness();
    const prompt = tokens(6, 300);
    h.chains.start("a", prompt);
    const output = tokens(6, 400); // blocks 1 and 2 are prompt + output tokens
    const all = prefixBlockHashes([...prompt, ...output], BS);
    const { parents } = h.entries(all);
    h.mirror.applyDelta(0, 1, all, parents, []); // published before the launcher knows the output
    const early = h.flush();
    expect(early.node!.length).toBe(1);
    expect((early.node![0] as { blockHashes: bigint[] }).blockHashes).toEqual([wireHash(all[0]!)]);
    h.chains.output("a", output);
    const late = h.flush();
    expect(late.node).toEqual([{
      type: "BlockStored",
      blockHashes: wire(all.slice(1)),
      parentBlockHash: wireHash(all[0]!),
      tokenIds: [...prompt, ...output].slice(4, 12),
      blockSize: BS,
    }]);
    h.chains.end("a");
    expect(h.book.size).toBe(3); // still held on rank 0: pinned
  });

  test("a salted sequence's first block carries its salt in extra_keys; branches start runs of their own", () => {
    const h = harness();
    const a = tokens(8, 500);
    const b = [...tokens(4, 500), ...tokens(4, 900)];
    const ha = prefixBlockHashes(a, BS, "tenant-1");
    const hb = prefixBlockHashes(b, BS, "tenant-1");
    h.chains.start("a", a, "tenant-1");
    h.chains.start("b", b, "tenant-1");
    expect(hb[0]).toBe(ha[0]!);
    const ea = h.entries(ha, "tenant-1");
    h.mirror.applyDelta(0, 1, [...ha, hb[1]!], [...ea.parents, hb[0]!], []);
    const events = h.flush().node!;
    expect(events).toEqual([
      {
        type: "BlockStored",
        blockHashes: wire(ha),
        parentBlockHash: null,
        tokenIds: a,
        blockSize: BS,
        extraKeys: [["tenant-1"], null],
      },
      {
        type: "BlockStored",
        blockHashes: [wireHash(hb[1]!)],
        parentBlockHash: wireHash(hb[0]!),
        tokenIds: b.slice(4),
        blockSize: BS,
      },
    ]);
  });

  test("a full state equal to what the mirror holds (a restarted control plane) changes nothing", () => {
    const h = harness();
    const p = tokens(8, 600);
    const hs = prefixBlockHashes(p, BS);
    h.chains.start("a", p, undefined, hs);
    const { parents } = h.entries(hs);
    h.mirror.applyFull(0, 7, hs, parents);
    h.flush();
    h.mirror.applyFull(0, 7, hs, parents);
    expect(h.flush()).toEqual({ node: [], 0: [], 1: [] });
    // The same rank with a new epoch lost everything first.
    h.mirror.applyFull(0, 8, hs.slice(0, 1), parents.slice(0, 1));
    const restarted = h.flush();
    expect(restarted["0"]!.map((e) => e.type)).toEqual(["AllBlocksCleared", "BlockStored"]);
    expect(restarted.node).toEqual([{ type: "BlockRemoved", blockHashes: [wireHash(hs[1]!)] }]);
  });
});

test("the book keeps unpinned entries up to its bound, oldest out first", () => {
  const book = new BlockBook(2);
  for (const h of ["a", "b", "c"]) book.record(h, { parent: "", tokens: [1], first: true });
  expect([book.get("a"), book.get("b") !== undefined, book.get("c") !== undefined]).toEqual([undefined, true, true]);
  book.pin("d");
  book.record("d", { parent: "", tokens: [2], first: true });
  book.record("e", { parent: "", tokens: [3], first: true });
  expect(book.get("d")).toBeDefined(); // pinned entries are never dropped
  expect(book.get("b")).toBeUndefined();
});
