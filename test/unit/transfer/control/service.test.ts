// The control plane's transfer policy loop in-process (real workers of the cluster fixture behind
// the link): a route with a prefix shortage waits for its foreground copy, a concurrent route for
// the same prefix joins that plan instead of copying twice, a copy that does not finish in time
// releases the route after a short bound (never longer than the prefill it saves) and learns its
// cost, a plan expected to end too late is not waited for, and a placement pass copies a hot chain
// ahead of demand and grants the lease routing then honours. Workers' step_wait_ms prices phase
// waits, and a completed plan teaches only the time beyond the wait its estimate predicted.
import { afterEach, expect, test } from "bun:test";
import { GlobalScheduler, type RouteDecision } from "../../../../lib/global/global_scheduler.ts";
import type { RouteQuery } from "../../../../lib/global/routing_context.ts";
import { NvlinkTopology } from "../../../../lib/global/topology.ts";
import { resolveTransferConfig, type TransferConfig } from "../../../../lib/transfer/control/transfer_config.ts";
import { TransferService } from "../../../../lib/transfer/control/transfer_service.ts";
import type { TransferFaultHook, TransferPhaseMessage } from "../../../../lib/transfer/worker/transfer_executor.ts";
import { cachePrompt, candidateOf, makeCluster, type TestCluster, tokens } from "../cluster_fixture.ts";

const clusters: TestCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.close();
});

async function setUp(config: Partial<TransferConfig>, faults?: (rank: number) => TransferFaultHook | undefined) {
  const scheduler = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]) });
  const c = await makeCluster({ table: scheduler.blocks, numBlocks: 48, faults });
  clusters.push(c);
  const service = new TransferService({
    scheduler,
    config: resolveTransferConfig({ mode: "force", targetReserveShare: 0, ...config }),
    idPrefix: "s",
    log: () => {},
    link: async (rank, m) => c.workers[rank]!.executor.handle(m as TransferPhaseMessage),
  });
  for (const w of c.workers) {
    service.observeWorkerStats(w.rank, { kv_block_bytes: w.kv.blockBytes, prefill_tokens: 0, prefill_ms: 0 });
  }
  return { scheduler, c, service };
}

const query = (id: string, t: number[]): RouteQuery => ({
  requestId: id,
  blockHashes: [],
  promptTokens: t.length,
  maxTokens: 4,
});

test("a route with a prefix shortage waits for the copy; a second route for the prefix joins it", async () => {
  const { c, service } = await setUp({ background: false });
  const prompt = tokens(33); // 8 full blocks
  const hashes = cachePrompt(c.workers[0]!, prompt, 1);
  c.report();
  const decision: RouteDecision = {
    rank: 1,
    reason: "round-robin",
    matchedBlocks: 0,
    feasible: true,
    reservedBlocks: 10,
  };
  const q1 = { ...query("a", prompt), blockHashes: hashes };
  const first = service.afterRoute(q1, decision);
  const second = service.afterRoute({ ...q1, requestId: "b" }, decision);
  expect(first).toBeDefined();
  expect(second).toBeDefined();
  await Promise.all([first, second]);
  expect(hashes.every((h) => c.workers[1]!.bm.cachedBlockOf(h) !== undefined)).toBe(true);
  expect(service.counters()).toMatchObject({
    transfer_started: 1,
    "transfer_prefix-copy_completed": 1,
    transfer_blocks: 8,
  });
  // Nothing missing any more: the reply is immediate.
  expect(service.afterRoute({ ...q1, requestId: "c" }, { ...decision, matchedBlocks: 8 })).toBeUndefined();
  expect(service.afterRoute({ ...q1, requestId: "d" }, { ...decision, rank: 0, matchedBlocks: 8 })).toBeUndefined();
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("a placement pass copies a hot chain to the idle partner and grants a lease routing honours", async () => {
  const { scheduler, c, service } = await setUp({
    foreground: false,
    hotnessThreshold: 3,
    minLoadSkewTokens: 0,
    minLoadSkewRatio: 0,
  });
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

// The destination's execute hangs until the plan is aborted (its deadline): a copy that never lands.
const hangingReceive = (
  rank: number,
):
  | TransferFaultHook
  | undefined => (rank === 1
    ? (phase, role) => (phase === "execute" && role === "dst" ? "hang" : undefined)
    : undefined);

test("a copy that does not land in time releases the route after the wait bound; it aborts at its deadline and its cost is learned", async () => {
  const { c, service } = await setUp({
    mode: "auto",
    background: false,
    foregroundWaitMs: 40,
    foregroundDeadlineMs: 300,
    prefillMsPerToken: 10,
  }, hangingReceive);
  const prompt = tokens(33); // 8 full blocks: saves 32 tokens x 10 ms of prefill
  const hashes = cachePrompt(c.workers[0]!, prompt, 1);
  c.report();
  const decision: RouteDecision = {
    rank: 1,
    reason: "least-cost",
    matchedBlocks: 0,
    feasible: true,
    reservedBlocks: 10,
  };
  const t0 = performance.now();
  await service.afterRoute({ ...query("a", prompt), blockHashes: hashes }, decision);
  const waited = performance.now() - t0;
  expect(waited).toBeGreaterThanOrEqual(35);
  expect(waited).toBeLessThan(250); // not the plan's deadline
  expect(service.counters()).toMatchObject({ transfer_started: 1, transfer_route_wait_expired: 1, transfer_active: 1 });
  const outcome = await service.coordinator.outcome(`s-1`)!;
  expect(outcome).toMatchObject({ status: "aborted", failedPhase: "execute" });
  expect(service.counters()).toMatchObject({ transfer_deadline_aborts: 1 });
  const est = service.cost.estimate(0, 1, 8, c.workers[0]!.kv.blockBytes);
  expect(est.source).toBe("observed");
  expect(est.ms).toBeGreaterThanOrEqual(250);
  // The next route for the prefix: the learned cost (>= 250 ms) is more than half the 320 ms saved.
  expect(service.afterRoute({ ...query("b", prompt), blockHashes: hashes }, decision)).toBeUndefined();
  expect(service.counters()).toMatchObject({ transfer_started: 1, transfer_skip_cost: 1 });
  await new Promise((r) => setTimeout(r, 20));
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("in auto mode a route waits no longer than the prefill its copy saves", async () => {
  const { c, service } = await setUp({
    mode: "auto",
    background: false,
    foregroundWaitMs: 5000,
    foregroundDeadlineMs: 400,
    prefillMsPerToken: 1,
  }, hangingReceive);
  const prompt = tokens(33);
  const hashes = cachePrompt(c.workers[0]!, prompt, 1);
  c.report();
  const t0 = performance.now();
  await service.afterRoute({ ...query("a", prompt), blockHashes: hashes }, {
    rank: 1,
    reason: "least-cost",
    matchedBlocks: 0,
    feasible: true,
    reservedBlocks: 10,
  });
  expect(performance.now() - t0).toBeLessThan(200); // 32 ms of prefill saved, not the 400 ms deadline
  await service.coordinator.outcome("s-1");
});

test("a running plan its own estimate says ends after the prefill it would save is not waited for", async () => {
  const { c, service } = await setUp({ mode: "auto", background: false, foregroundDeadlineMs: 300 }, hangingReceive);
  const prompt = tokens(33);
  const hashes = cachePrompt(c.workers[0]!, prompt, 1);
  c.report();
  // A background copy of the prefix to rank 1, estimated at 10 s.
  const { done } = service.coordinator.start({ ...candidateOf(c, 0, 1, hashes), estimatedMs: 10_000 }, 300);
  expect(
    service.afterRoute({ ...query("a", prompt), blockHashes: hashes }, {
      rank: 1,
      reason: "least-cost",
      matchedBlocks: 0,
      feasible: true,
      reservedBlocks: 10,
    }),
  ).toBeUndefined();
  expect(service.counters().transfer_skip_inbound).toBe(1); // and nothing else to copy
  await done;
});

test("step_wait_ms in worker stats prices phase waits; a completed plan teaches only the time beyond its predicted wait", async () => {
  const { c, service } = await setUp({ mode: "auto", background: false, prefillMsPerToken: 1 });
  const prompt = tokens(33); // 8 full blocks: 32 ms of prefill saved
  const hashes = cachePrompt(c.workers[0]!, prompt, 1);
  c.report();
  const bytes = c.workers[0]!.kv.blockBytes;
  const stats = (rank: number, stepWaitMs: number) =>
    service.observeWorkerStats(rank, {
      kv_block_bytes: bytes,
      prefill_tokens: 0,
      prefill_ms: 0,
      step_wait_ms: stepWaitMs,
    });
  const decision: RouteDecision = {
    rank: 1,
    reason: "least-cost",
    matchedBlocks: 0,
    feasible: true,
    reservedBlocks: 10,
  };
  stats(1, 20); // the destination steps 40 ms prefills: 60 ms of waits > 32 ms / 2
  expect(service.cost.estimate(0, 1, 8, bytes).waitMs).toBe(60);
  expect(service.afterRoute({ ...query("a", prompt), blockHashes: hashes }, decision)).toBeUndefined();
  expect(service.counters()).toMatchObject({ transfer_skip_cost: 1 });
  expect(service.counters().transfer_started).toBeUndefined();
  stats(1, 0); // idle again (a worker reports 0 when its work ends)
  expect(service.cost.estimate(0, 1, 8, bytes).waitMs).toBe(0);
  // A plan estimated with a wait far longer than it took: the excess learned is 0, not its publish time.
  const { done } = service.coordinator.start({ ...candidateOf(c, 0, 1, hashes), waitMs: 1e6 }, 1000);
  expect((await done).status).toBe("completed");
  expect(service.cost.estimate(0, 1, 8, bytes)).toMatchObject({ ms: 0, source: "observed", waitMs: 0 });
  stats(1, 5);
  service.onRankDown(1); // a dead rank's last report does not outlive it
  expect(service.cost.stepWaitMs(1)).toBe(0);
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});
