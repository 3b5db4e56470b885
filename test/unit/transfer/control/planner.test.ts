// Foreground planning over a real page table: a prefix copy asks only for the missing blocks from
// the partner holding the longest prefix; an offload moves the coldest whole unreferenced chains to
// a partner with room to cover a block shortage, where room is free blocks plus cached ones colder
// than the chain moved; each gate (shortage, source, validity, capacity, hotter cache, missing parent,
// minimum batch, cost ratio) refuses with its own reason; busy ranks' phase waits count in the cost.
import { describe, expect, test } from "bun:test";
import type { BlockEntry } from "../../../../lib/core/block_snapshot.ts";
import { GlobalScheduler } from "../../../../lib/global/global_scheduler.ts";
import { type RouteQuery, RoutingContext } from "../../../../lib/global/routing_context.ts";
import { NvlinkTopology } from "../../../../lib/global/topology.ts";
import { resolveTransferConfig, type TransferConfig } from "../../../../lib/transfer/control/transfer_config.ts";
import { TransferCostModel } from "../../../../lib/transfer/control/transfer_cost_model.ts";
import {
  type PlannerEnv,
  planOffload,
  planPrefixCopy,
  queuedPrefillTokens,
} from "../../../../lib/transfer/control/transfer_planner.ts";
import { chainEntries, hashesOf, promptTokens, snapshot } from "../../global/page_table_fixture.ts";

const shared = promptTokens(1, 800); // 50 blocks
const H = hashesOf(shared);

function scheduler(pairs: [number, number][] = [[0, 1]]): GlobalScheduler {
  return new GlobalScheduler({ topology: new NvlinkTopology(3, pairs) });
}

function env(
  s: GlobalScheduler,
  q: RouteQuery,
  o: {
    config?: Partial<TransferConfig> | "force";
    blockBytes?: number;
    inbound?: Set<string>;
    moving?: Set<string>;
    inboundBlocks?: Map<number, number>;
  } = {},
): PlannerEnv {
  // No room kept for the ranks' own next prompts, unless a test asks.
  const config = resolveTransferConfig({
    targetReserveShare: 0,
    ...(o.config === "force" ? { mode: "force" as const } : o.config),
  });
  return {
    ctx: new RoutingContext(q, s.blocks, s.reservations, s.topology, s.config),
    config,
    cost: new TransferCostModel(config),
    blockBytes: () => o.blockBytes ?? 0,
    inbound: (r, h) => o.inbound?.has(`${r}:${h}`) ?? false,
    movingOut: (r, h) => o.moving?.has(`${r}:${h}`) ?? false,
    inboundBlocks: (r) => o.inboundBlocks?.get(r) ?? 0,
  };
}

const query = (tokens: number[]): RouteQuery => ({
  requestId: "q",
  blockHashes: hashesOf(tokens),
  promptTokens: tokens.length,
  maxTokens: 8,
});

describe("prefix copy", () => {
  function setUp() {
    const s = scheduler();
    s.applySnapshot(snapshot(0, { entries: chainEntries(H, 100) }));
    s.applySnapshot(snapshot(1, { entries: chainEntries(H.slice(0, 10), 200) }));
    s.applySnapshot(snapshot(2, { entries: chainEntries(H, 300) }));
    return s;
  }

  test("copies exactly the missing blocks from the direct partner, with their generations", () => {
    const s = setUp();
    const v = planPrefixCopy(env(s, query([...shared, ...promptTokens(5, 0, 5, 100)])), 1, true);
    if (!v.ok) throw new Error(v.detail);
    expect(v.plan).toMatchObject({
      kind: "prefix-copy",
      mode: "copy",
      src: 0,
      dst: 1,
      requestId: "q",
      estimateSource: "fallback",
    });
    expect(v.plan.blocks.map((b) => b.hash)).toEqual(H.slice(10, 50));
    expect(v.plan.blocks[0]).toEqual({ hash: H[10]!, parent: H[9]!, srcBlock: 110, generation: 1 });
    expect(v.plan.savedMs).toBeCloseTo(40 * 16 * 0.02, 10);
  });

  test("the block holding the last prompt token is never asked for", () => {
    const v = planPrefixCopy(env(setUp(), query(shared)), 1, true);
    expect(v.ok && v.plan.blocks.length).toBe(39);
  });

  test("gates: no shortage, no direct partner, infeasible target, arriving blocks, leaving blocks, minimum batch, cost", () => {
    const s = setUp();
    const q = query([...shared, 1, 2, 3]);
    const reason = (v: ReturnType<typeof planPrefixCopy>) => (v.ok ? "ok" : v.reason);
    expect(reason(planPrefixCopy(env(s, q), 0, true))).toBe("no_shortage");
    // Rank 2 holds everything but is no NVLink partner of rank 1.
    const noPair = scheduler([]);
    for (const snap of s.blocks.toSnapshots()) noPair.applySnapshot(snap);
    expect(reason(planPrefixCopy(env(noPair, q), 1, true))).toBe("no_source");
    expect(reason(planPrefixCopy(env(s, q), 1, false))).toBe("target_capacity");
    expect(reason(planPrefixCopy(env(s, q, { inbound: new Set(H.slice(10).map((h) => `1:${h}`)) }), 1, true))).toBe(
      "inbound",
    );
    const partial = planPrefixCopy(env(s, q, { inbound: new Set([`1:${H[20]}`]) }), 1, true);
    expect(partial.ok && partial.plan.blocks.map((b) => b.hash)).toEqual(H.slice(10, 20));
    expect(reason(planPrefixCopy(env(s, q, { moving: new Set([`0:${H[10]}`]) }), 1, true))).toBe("source_invalid");
    expect(reason(planPrefixCopy(env(s, q, { config: { minBatchBlocks: 41 } }), 1, true))).toBe("min_batch");
    // 1 GB per block at the 370 GB/s direct-path fallback: 2.7 ms per block, far more than 0.32 ms of prefill.
    expect(reason(planPrefixCopy(env(s, q, { blockBytes: 1e9 }), 1, true))).toBe("cost");
    expect(reason(planPrefixCopy(env(s, q, { blockBytes: 1e9, config: "force" }), 1, true))).toBe("ok");
    expect(reason(planPrefixCopy(env(s, q, { config: { foregroundMaxBlocks: 5 } }), 1, true))).toBe("ok");
  });
});

describe("phase waits in the cost gate", () => {
  test("a copy admitted while both ranks idle is skipped for cost when the destination reports a long step wait", () => {
    const s = scheduler();
    s.applySnapshot(snapshot(0, { entries: chainEntries(H, 100) }));
    s.applySnapshot(snapshot(1, { entries: chainEntries(H.slice(0, 10), 200) }));
    const q = query([...shared, 1, 2, 3]);
    // 40 blocks of 29 MB (Qwen3-8B-like) at 370 GB/s: ~3.2 ms of link time against 40 x 16 x 0.02 = 12.8 ms of prefill.
    const e = env(s, q, { blockBytes: 29_360_128 });
    const idle = planPrefixCopy(e, 1, true);
    if (!idle.ok) throw new Error(idle.detail);
    expect(idle.plan.waitMs).toBe(0);
    expect(idle.plan.estimatedMs).toBeLessThan(12.8 / 2);
    // The destination steps 25 ms prefills: 2 x 12.5 (prepare, execute) + 12.5 (publish) of waits.
    e.cost.observeStepWait(1, 12.5);
    const busy = planPrefixCopy(e, 1, true);
    expect(busy).toMatchObject({ ok: false, reason: "cost" });
    expect(!busy.ok && busy.detail).toMatch(/37\.500 ms of it phase waits/);
    // A short wait still admits, and the plan carries the wait its estimate used.
    e.cost.observeStepWait(1, 0.5);
    const short = planPrefixCopy(e, 1, true);
    if (!short.ok) throw new Error(short.detail);
    expect(short.plan.waitMs).toBe(1.5);
    expect(short.plan.estimatedMs).toBeCloseTo(idle.plan.estimatedMs + 1.5, 10);
  });

  test("prefill queued on the destination (a burst of routes its report does not show yet) counts as a wait", () => {
    const s = scheduler();
    s.applySnapshot(snapshot(0, { entries: chainEntries(H, 100) }));
    s.applySnapshot(snapshot(1, { entries: chainEntries(H.slice(0, 10), 200) }));
    const q = query([...shared, 1, 2, 3]);
    const ctx = new RoutingContext(q, s.blocks, s.reservations, s.topology, s.config);
    const e = {
      ...env(s, q, { blockBytes: 29_360_128 }),
      ctx,
      queuedPrefillTokens: (r: number) => queuedPrefillTokens(ctx, r),
    };
    // The request's own reservation on rank 1 is what the copy spares: it is no queue.
    s.reservations.reserve("q", 1, 41, 41 * 16, 0);
    expect(queuedPrefillTokens(ctx, 1)).toBe(0);
    const idle = planPrefixCopy(e, 1, true);
    if (!idle.ok) throw new Error(idle.detail);
    expect(idle.plan.waitMs).toBe(0);
    // Two more requests routed to rank 1: 1200 tokens of prefill, capped by a 1000-token step budget,
    // at 0.02 ms per token: a 20 ms step, half of it expected per phase: 3 x 10 ms of waits.
    s.reservations.reserve("a", 1, 40, 700, 0);
    s.reservations.reserve("b", 1, 40, 500, 0);
    e.cost.observeStepBudget(1, 1000);
    expect(queuedPrefillTokens(ctx, 1)).toBe(1200);
    expect(e.cost.queueWaitMs(1, 1200)).toBeCloseTo(10, 10);
    const busy = planPrefixCopy(e, 1, true);
    expect(busy).toMatchObject({ ok: false, reason: "cost" });
    expect(!busy.ok && busy.detail).toMatch(/30\.000 ms of it phase waits/);
    // A reported wait above the queue's wins.
    e.cost.observeStepWait(1, 15);
    expect(e.cost.phaseWaitMs(0, 1, e.queuedPrefillTokens)).toBeCloseTo(45, 10);
  });

  test("an offload move carries its estimate's wait; a busy source makes it skip for cost", () => {
    const s = scheduler();
    const cold = chainEntries(hashesOf(promptTokens(11, 3 * 16)), 0).map((e) => ({ ...e, accessCount: 4 }));
    s.applySnapshot(snapshot(1, { entries: cold, numBlocks: 64, free: 0 }));
    s.applySnapshot(snapshot(0, { numBlocks: 64 }));
    s.reservations.reserve("pending", 1, 3, 0, 0);
    const e = env(s, query([9, 9, 9]));
    e.cost.observeStepWait(0, 0.1); // the destination is stepping short decodes
    const v = planOffload(e, 1);
    if (!v.ok) throw new Error(v.detail);
    expect(v.plan.waitMs).toBeCloseTo(0.3, 10);
    e.cost.observeStepWait(1, 20); // the source is busy with long steps
    expect(planOffload(e, 1)).toMatchObject({ ok: false, reason: "cost" });
  });
});

describe("offload", () => {
  const chain = (seed: number, n: number, first: number, access: number, refCount = 0): BlockEntry[] =>
    chainEntries(hashesOf(promptTokens(seed, n * 16)), first, refCount).map((e) => ({
      ...e,
      accessCount: access,
      lastAccess: first,
    }));

  function setUp(dstFree = 100) {
    const s = scheduler();
    const cold = chain(11, 3, 0, 1); // coldest
    const warm = chain(12, 4, 10, 5);
    const live = chain(13, 2, 20, 9, 1); // referenced: never a victim
    const mine = chain(1, 2, 30, 1); // the query's own prefix: it will be reused
    s.applySnapshot(snapshot(1, { entries: [...cold, ...warm, ...live, ...mine], numBlocks: 64, free: 5 }));
    s.applySnapshot(snapshot(0, { numBlocks: 200, free: dstFree }));
    s.reservations.reserve("pending", 1, 12, 0, 0); // 12 blocks wanted, 5 free: short by 7
    return { s, cold, warm };
  }

  test("moves the coldest whole unreferenced chains, root first, to the partner with room", () => {
    const { s, cold, warm } = setUp();
    const v = planOffload(env(s, query(promptTokens(1, 800)), { config: "force" }), 1);
    if (!v.ok) throw new Error(v.detail);
    expect(v.plan).toMatchObject({ kind: "offload", mode: "move", src: 1, dst: 0 });
    expect(v.plan.blocks.map((b) => b.srcBlock)).toEqual([...cold, ...warm].map((e) => e.block));
  });

  test("only as much as the shortage, within the target's room; refusals name their reason", () => {
    const { s, cold } = setUp(5);
    const v = planOffload(env(s, query(promptTokens(1, 800)), { config: "force" }), 1);
    expect(v.ok && v.plan.blocks.map((b) => b.srcBlock)).toEqual(cold.map((e) => e.block));
    expect(planOffload(env(s, query(promptTokens(1, 800)), { config: "force" }), 0)).toMatchObject({
      ok: false,
      reason: "no_shortage",
    });
    // Blocks running plans bring to the target take its free blocks: 5 free, 3 arriving, no room
    // for the 3-block chain.
    const arriving = planOffload(
      env(setUp(5).s, query(promptTokens(1, 800)), { config: "force", inboundBlocks: new Map([[0, 3]]) }),
      1,
    );
    expect(arriving).toMatchObject({ ok: false, reason: "target_capacity" });
    // ...and so does the room it keeps for its own next prompts: 2% of its 200 blocks is 4.
    const keeping = planOffload(
      env(setUp(5).s, query(promptTokens(1, 800)), { config: { mode: "force", targetReserveShare: 0.02 } }),
      1,
    );
    expect(keeping).toMatchObject({ ok: false, reason: "target_capacity" });
    const none = setUp(2).s;
    expect(planOffload(env(none, query(promptTokens(1, 800)), { config: "force" }), 1)).toMatchObject({
      ok: false,
      reason: "target_capacity",
    });
    // Benefit counts discounted reuse: the cold chains were used once or five times, at 0.02 ms per token.
    expect(planOffload(env(setUp().s, query(promptTokens(1, 800)), { blockBytes: 1e9 }), 1)).toMatchObject({
      ok: false,
      reason: "cost",
    });
  });

  test("a chain whose parent stays behind (live) moves only if the target already has the parent", () => {
    const s = scheduler();
    const base = chain(21, 2, 0, 1, 1); // live root part
    const tail = chainEntries(hashesOf(promptTokens(21, 5 * 16)), 0).slice(2).map((e, i) => ({
      ...e,
      block: 10 + i,
      accessCount: 1,
    }));
    s.applySnapshot(snapshot(1, { entries: [...base, ...tail], numBlocks: 64, free: 0 }));
    s.applySnapshot(snapshot(0, { numBlocks: 64 }));
    s.reservations.reserve("pending", 1, 3, 0, 0);
    expect(planOffload(env(s, query([9, 9, 9]), { config: "force" }), 1)).toMatchObject({ ok: false });
    s.applySnapshot(
      snapshot(0, { version: 2, numBlocks: 64, entries: chainEntries(hashesOf(promptTokens(21, 2 * 16)), 40) }),
    );
    const v = planOffload(env(s, query([9, 9, 9]), { config: "force" }), 1);
    expect(v.ok && v.plan.blocks.map((b) => b.srcBlock)).toEqual([10, 11, 12]);
  });
});

describe("offload into a partner's cache (offloadIntoColderCache)", () => {
  const keyed = (seed: number, n: number, first: number, accessCount: number, lastAccess: number): BlockEntry[] =>
    chainEntries(hashesOf(promptTokens(seed, n * 16)), first).map((e) => ({ ...e, accessCount, lastAccess }));
  const moved = keyed(11, 3, 0, 1, 100); // the cold chain rank 1 must move: used once, at 100

  /** Rank 1 is 3 blocks short and holds `moved`; its partner rank 0 has no free block, only `cache`. */
  function setUp(cache: BlockEntry[]) {
    const s = scheduler();
    s.applySnapshot(snapshot(1, { entries: moved, numBlocks: 64, free: 0 }));
    s.applySnapshot(snapshot(0, { entries: cache, numBlocks: cache.length, free: 0 }));
    s.reservations.reserve("pending", 1, 3, 0, 0);
    return s;
  }
  const offload = (s: GlobalScheduler) =>
    planOffload(env(s, query([9, 9, 9]), { config: { mode: "force", offloadIntoColderCache: true } }), 1);

  test("by default a partner's cache is no room, however cold: only its free blocks are", () => {
    const s = setUp(keyed(21, 8, 40, 1, 0)); // 8 blocks, all colder than the moved chain
    expect(offload(s).ok).toBe(true);
    expect(planOffload(env(s, query([9, 9, 9]), { config: "force" }), 1)).toMatchObject({
      ok: false,
      reason: "target_capacity",
    });
  });

  test("a partner without free blocks makes room by reclaiming cache colder than the moved chain", () => {
    const s = setUp([...keyed(21, 4, 40, 1, 50), ...keyed(22, 4, 50, 1, 500)]); // 4 colder blocks, 4 newer
    const v = offload(s);
    if (!v.ok) throw new Error(v.detail);
    expect(v.plan).toMatchObject({ kind: "offload", mode: "move", src: 1, dst: 0 });
    expect(v.plan.blocks.map((b) => b.srcBlock)).toEqual(moved.map((e) => e.block));
    // Requests routed to the partner beyond its free blocks: it reclaims its cache for them, so
    // none of it is room any more, however cold.
    s.reservations.reserve("there", 0, 1, 0, 0);
    expect(offload(s)).toMatchObject({ ok: false, reason: "target_capacity" });
  });

  test("a partner short of free blocks itself offers no cache, however cold", () => {
    const s = setUp(keyed(21, 8, 40, 1, 0)); // 8 blocks, all colder than the moved chain
    expect(offload(s).ok).toBe(true);
    s.reservations.reserve("there", 0, 1, 0, 0);
    expect(offload(s)).toMatchObject({ ok: false, reason: "target_capacity" });
  });

  test("never evicts cache as hot or hotter: fewer accesses count before recency", () => {
    expect(offload(setUp(keyed(21, 8, 40, 1, 100)))).toMatchObject({ ok: false, reason: "target_hotter" }); // as hot
    expect(offload(setUp(keyed(21, 8, 40, 2, 0)))).toMatchObject({ ok: false, reason: "target_hotter" }); // older, used more
    expect(offload(setUp(keyed(21, 8, 40, 1, 99))).ok).toBe(true);
    // Cold blocks under a hot leaf cannot go first (reclamation takes leaves): they are no room either.
    const underHot = keyed(21, 8, 40, 1, 0).map((e, i) => (i === 7 ? { ...e, accessCount: 5 } : e));
    expect(offload(setUp(underHot))).toMatchObject({ ok: false, reason: "target_hotter" });
    // A live partner cache is no room at all.
    expect(offload(setUp(keyed(21, 8, 40, 1, 0).map((e) => ({ ...e, refCount: 1 }))))).toMatchObject({
      ok: false,
      reason: "target_capacity",
    });
  });

  test("each chain displaces only cache colder than itself: the coldest chains take the free blocks", () => {
    const s = scheduler();
    const tiny = keyed(12, 1, 10, 1, 10); // colder than everything on the partner
    s.applySnapshot(snapshot(1, { entries: [...tiny, ...moved], numBlocks: 64, free: 0 }));
    s.reservations.reserve("pending", 1, 4, 0, 0);
    const between = keyed(21, 3, 40, 1, 50); // hotter than `tiny`, colder than `moved`
    s.applySnapshot(snapshot(0, { entries: between, numBlocks: 4, free: 1 }));
    const v = offload(s);
    expect(v.ok && v.plan.blocks.map((b) => b.srcBlock)).toEqual([...tiny, ...moved].map((e) => e.block));
    // Without the free block, `tiny` could only evict hotter cache: `moved` goes alone.
    s.applySnapshot(snapshot(0, { version: 2, entries: between, numBlocks: 3, free: 0 }));
    const w = offload(s);
    expect(w.ok && w.plan.blocks.map((b) => b.srcBlock)).toEqual(moved.map((e) => e.block));
  });

  test("the parent a chain hangs from on the partner is kept, never counted as room", () => {
    const s = scheduler();
    const hashes = hashesOf(promptTokens(31, 5 * 16));
    const base = chainEntries(hashes.slice(0, 2), 0, 1); // live on rank 1: the tail hangs from it
    const tail = chainEntries(hashes, 0).slice(2).map((e, i) => ({ ...e, block: 10 + i, lastAccess: 100 }));
    s.applySnapshot(snapshot(1, { entries: [...base, ...tail], numBlocks: 64, free: 0 }));
    s.reservations.reserve("pending", 1, 3, 0, 0);
    const parent = keyed(31, 2, 40, 1, 0); // the oldest cache on rank 0
    s.applySnapshot(snapshot(0, { entries: [...parent, ...keyed(32, 2, 50, 1, 10)], numBlocks: 4, free: 0 }));
    expect(offload(s)).toMatchObject({ ok: false, reason: "target_capacity" }); // 2 colder blocks besides the parent
    s.applySnapshot(
      snapshot(0, { version: 2, entries: [...parent, ...keyed(32, 3, 50, 1, 10)], numBlocks: 5, free: 0 }),
    );
    const v = offload(s);
    expect(v.ok && v.plan.blocks.map((b) => b.srcBlock)).toEqual([10, 11, 12]);
    // Without the parent there, the chain cannot go at all.
    s.applySnapshot(snapshot(0, { version: 3, entries: keyed(32, 8, 50, 1, 10), numBlocks: 8, free: 0 }));
    expect(offload(s)).toMatchObject({ ok: false, reason: "target_parent" });
  });
});
