// The control plane's transfer policy loop in-process (real workers of the cluster fixture behind
// the link): a route with a prefix shortage waits for its foreground copy, a concurrent route for
// the same prefix joins that plan instead of copying twice, and a placement pass copies a hot
// chain ahead of demand and grants the lease routing then honours.
import { afterEach, expect, test } from "bun:test";
import { GlobalScheduler, type RouteDecision } from "../../../lib/global/global_scheduler.ts";
import type { RouteQuery } from "../../../lib/global/routing_context.ts";
import { NvlinkTopology } from "../../../lib/global/topology.ts";
import { resolveTransferConfig, type TransferConfig } from "../../../lib/global/transfer_config.ts";
import { TransferService } from "../../../lib/global/transfer_service.ts";
import type { TransferPhaseMessage } from "../../../lib/local/transfer_executor.ts";
import { cachePrompt, makeCluster, tokens, type TestCluster } from "./cluster_fixture.ts";

const clusters: TestCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.close();
});

async function setUp(config: Partial<TransferConfig>) {
  const scheduler = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]) });
  const c = await makeCluster({ table: scheduler.blocks, numBlocks: 48 });
  clusters.push(c);
  const service = new TransferService({
    scheduler,
    config: resolveTransferConfig({ mode: "force", ...config }),
    idPrefix: "s",
    log: () => {},
    link: async (rank, m) => c.workers[rank]!.executor.handle(m as TransferPhaseMessage),
  });
  for (const w of c.workers) service.observeWorkerStats(w.rank, { kv_block_bytes: w.kv.blockBytes, prefill_tokens: 0, prefill_ms: 0 });
  return { scheduler, c, service };
}

const query = (id: string, t: number[]): RouteQuery => ({ requestId: id, blockHashes: [], promptTokens: t.length, maxTokens: 4 });

test("a route with a prefix shortage waits for the copy; a second route for the prefix joins it", async () => {
  const { c, service } = await setUp({ background: false });
  const prompt = tokens(33); // 8 full blocks
  const hashes = cachePrompt(c.workers[0]!, prompt, 1);
  c.report();
  const decision: RouteDecision = { rank: 1, reason: "round-robin", matchedBlocks: 0, feasible: true, reservedBlocks: 10 };
  const q1 = { ...query("a", prompt), blockHashes: hashes };
  const first = service.afterRoute(q1, decision);
  const second = service.afterRoute({ ...q1, requestId: "b" }, decision);
  expect(first).toBeDefined();
  expect(second).toBeDefined();
  await Promise.all([first, second]);
  expect(hashes.every((h) => c.workers[1]!.bm.cachedBlockOf(h) !== undefined)).toBe(true);
  expect(service.counters()).toMatchObject({ transfer_started: 1, "transfer_prefix-copy_completed": 1, transfer_blocks: 8 });
  // Nothing missing any more: the reply is immediate.
  expect(service.afterRoute({ ...q1, requestId: "c" }, { ...decision, matchedBlocks: 8 })).toBeUndefined();
  expect(service.afterRoute({ ...q1, requestId: "d" }, { ...decision, rank: 0, matchedBlocks: 8 })).toBeUndefined();
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("a placement pass copies a hot chain to the idle partner and grants a lease routing honours", async () => {
  const { scheduler, c, service } = await setUp({ foreground: false, hotnessThreshold: 3, minLoadSkewTokens: 0, minLoadSkewRatio: 0 });
  const prompt = tokens(41); // 10 full blocks
  const hashes = cachePrompt(c.workers[0]!, prompt, 2);
  c.report();
  const ask = (id: string) => {
    const d = scheduler.route({ ...query(id, [...prompt, 1, 2]), blockHashes: hashes });
    service.afterRoute({ ...query(id, prompt), blockHashes: hashes }, d);
    scheduler.release(id);
    service.onRelease(id);
    return d;
  };
  expect(ask("a").rank).toBe(0);
  expect(service.placementPass()).toEqual([]); // one access: not hot yet
  expect(ask("b").rank).toBe(0);
  const [plan] = service.placementPass();
  expect(plan).toMatchObject({ kind: "background", src: 0, dst: 1 });
  expect(plan!.blocks.map((b) => b.hash)).toEqual(hashes.slice(0, 8)); // the per-chain cap
  expect(service.placementPass()).toEqual([]); // pair busy, then cooling down
  expect((await service.coordinator.outcome(plan!.planId))!.status).toBe("completed");
  await new Promise((r) => setTimeout(r, 0));
  expect(service.leases.size).toBe(1);
  expect(ask("c")).toMatchObject({ rank: 1, reason: "lease" });
  expect(service.counters()).toMatchObject({ transfer_background_completed: 1, lease_routes: 1 });
});
