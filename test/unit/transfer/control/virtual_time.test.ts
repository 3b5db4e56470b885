// The control plane on a virtual clock: a plan's deadline, an abort's time bound, a route's wait
// bound, the placement timer and reservation TTLs all pass when the clock is advanced, not when real
// time passes, so the cluster simulator can run this same code on simulated time.
import { afterEach, expect, test } from "bun:test";
import { VirtualClock } from "../../../../lib/core/virtual_clock.ts";
import { GlobalBlockManager } from "../../../../lib/global/global_block_manager.ts";
import { GlobalScheduler, type RouteDecision } from "../../../../lib/global/global_scheduler.ts";
import { NvlinkTopology } from "../../../../lib/global/topology.ts";
import { resolveTransferConfig } from "../../../../lib/transfer/control/transfer_config.ts";
import {
  type PhaseMessage,
  type TransferAck,
  TransferCoordinator,
} from "../../../../lib/transfer/control/transfer_coordinator.ts";
import { TransferCostModel } from "../../../../lib/transfer/control/transfer_cost_model.ts";
import { TransferService } from "../../../../lib/transfer/control/transfer_service.ts";
import type { TransferFaultHook, TransferPhaseMessage } from "../../../../lib/transfer/worker/transfer_executor.ts";
import { chainEntries, hashesOf, promptTokens, snapshot } from "../../global/page_table_fixture.ts";
import { cachePrompt, makeCluster, type TestCluster, tokens } from "../cluster_fixture.ts";

const clusters: TestCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.close();
});

const HASHES = hashesOf(promptTokens(3, 4 * 16));
const BLOCK_BYTES = 4096;

/**
 * A coordinator over a page table of two ranks whose link answers prepare at once (the destination
 * reserving blocks), never answers execute, and answers abort unless `abortAnswered` is false.
 */
function silentExecute(clock: VirtualClock, o: { abortAnswered?: boolean } = {}) {
  const table = new GlobalBlockManager();
  table.applySnapshot(snapshot(0, { entries: chainEntries(HASHES) }));
  table.applySnapshot(snapshot(1));
  const sent: PhaseMessage[] = [];
  const logs: string[] = [];
  const ack = (rank: number, m: PhaseMessage, extra: Partial<TransferAck> = {}): TransferAck => ({
    planId: m.planId,
    phase: m.type.slice("transfer_".length) as TransferAck["phase"],
    rank,
    ok: true,
    ...extra,
  });
  const cost = new TransferCostModel(resolveTransferConfig("force"));
  const coordinator = new TransferCoordinator({
    blocks: table,
    cost,
    clock,
    idPrefix: "v",
    abortTimeoutMs: 2000,
    log: (l) => logs.push(l),
    link: (rank, m) => {
      sent.push(m);
      if (m.type === "transfer_prepare") {
        return Promise.resolve(ack(rank, m, rank === 1 ? { dstBlocks: [10, 11, 12, 13] } : {}));
      }
      if (m.type === "transfer_abort" && o.abortAnswered !== false) return Promise.resolve(ack(rank, m));
      return new Promise<TransferAck>(() => {});
    },
  });
  const candidate = {
    kind: "background" as const,
    mode: "copy" as const,
    src: 0,
    dst: 1,
    blocks: HASHES.map((hash, i) => ({ hash, parent: i === 0 ? "" : HASHES[i - 1]!, srcBlock: i, generation: 1 })),
    savedMs: 1,
    estimatedMs: 1,
    estimateSource: "fallback" as const,
  };
  return { table, sent, logs, cost, coordinator, candidate };
}

test("a plan whose execute never answers aborts exactly at its deadline on the virtual clock, without waiting in real time", async () => {
  const clock = new VirtualClock({ startMs: 500, timeOrigin: 1_700_000_000_000 });
  const { table, sent, cost, coordinator, candidate } = silentExecute(clock);
  const realStart = performance.now();
  const { plan, done } = coordinator.start(candidate, 60_000);
  // The deadline the workers check is wall-clock: the clock's epoch reading plus the budget.
  expect(plan.deadline).toBe(1_700_000_000_000 + 500 + 60_000);
  let outcome: Awaited<typeof done> | undefined;
  void done.then((o) => (outcome = o));
  await clock.advance(59_999);
  expect(outcome).toBeUndefined();
  expect(coordinator.activePlans).toBe(1);
  expect(table.isInFlight(0, HASHES[0]!)).toBe(true);
  expect(sent.map((m) => m.type)).toEqual([
    "transfer_prepare",
    "transfer_prepare",
    "transfer_execute",
    "transfer_execute",
    "transfer_publish",
  ]);
  await clock.advance(1);
  expect(outcome).toMatchObject({ status: "aborted", failedPhase: "execute" });
  expect(outcome!.reason).toMatch(/passed its deadline during transfer_execute/);
  expect(sent.filter((m) => m.type === "transfer_abort").length).toBe(2);
  expect(coordinator.activePlans).toBe(0);
  expect(table.isInFlight(0, HASHES[0]!)).toBe(false);
  expect(coordinator.pairBusy(0, 1)).toBe(false);
  expect(coordinator.counters()).toMatchObject({
    transfer_started: 1,
    transfer_aborted: 1,
    transfer_deadline_aborts: 1,
    transfer_abort_execute: 1,
  });
  // It cost at least the 60 virtual seconds it ran: the cost model learned that, not real time.
  const est = cost.estimate(0, 1, 4, BLOCK_BYTES);
  expect(est.source).toBe("observed");
  expect(est.ms).toBeGreaterThanOrEqual(60_000);
  expect(performance.now() - realStart).toBeLessThan(5_000);
});

test("an abort nobody answers gives up after abortTimeoutMs of the clock's time", async () => {
  const clock = new VirtualClock();
  const { logs, coordinator, candidate } = silentExecute(clock, { abortAnswered: false });
  const { done } = coordinator.start(candidate, 1_000);
  let ended = false;
  void done.then(() => (ended = true));
  await clock.advance(1_000); // the deadline: aborts go out, nobody answers
  await clock.advance(1_999);
  expect(ended).toBe(false);
  await clock.advance(1);
  expect(ended).toBe(true);
  expect((await done).status).toBe("aborted");
  expect(logs.filter((l) => /abort on rank [01] got no answer \(no abort ack within 2000 ms\)/.test(l)).length).toBe(2);
  expect(clock.pendingTimers).toBe(0);
});

// The destination's execute hangs until the plan is aborted (its deadline): a copy that never lands.
const hangingReceive = (
  rank: number,
):
  | TransferFaultHook
  | undefined => (rank === 1
    ? (phase, role) => (phase === "execute" && role === "dst" ? "hang" : undefined)
    : undefined);

test("the service on a virtual clock: the route's wait bound, the plan's deadline and the workers' own deadline timers run on it", async () => {
  const clock = new VirtualClock({ timeOrigin: 1_700_000_000_000 });
  const scheduler = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]), clock });
  const c = await makeCluster({ table: scheduler.blocks, numBlocks: 48, faults: hangingReceive, clock });
  clusters.push(c);
  const service = new TransferService({
    scheduler,
    clock,
    config: resolveTransferConfig({
      mode: "auto",
      background: false,
      foregroundWaitMs: 40,
      foregroundDeadlineMs: 30_000,
      prefillMsPerToken: 10,
    }),
    idPrefix: "s",
    log: () => {},
    link: async (rank, m) => c.workers[rank]!.executor.handle(m as TransferPhaseMessage),
  });
  for (const w of c.workers) {
    service.observeWorkerStats(w.rank, { kv_block_bytes: w.kv.blockBytes, prefill_tokens: 0, prefill_ms: 0 });
  }
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
  let released = false;
  void service.afterRoute({ requestId: "a", blockHashes: hashes, promptTokens: prompt.length, maxTokens: 4 }, decision)!
    .then(() => (released = true));
  await clock.advance(39);
  expect(released).toBe(false);
  await clock.advance(1);
  expect(released).toBe(true);
  expect(service.counters()).toMatchObject({ transfer_started: 1, transfer_route_wait_expired: 1, transfer_active: 1 });
  expect(c.state(1).reserved).toBe(8);
  await clock.advance(30_000 - 40);
  const outcome = await service.coordinator.outcome("s-1")!;
  expect(outcome).toMatchObject({ status: "aborted", failedPhase: "execute" });
  expect(service.counters()).toMatchObject({ transfer_deadline_aborts: 1, transfer_active: 0 });
  // The workers' own deadline timers (deadline + grace) were cleared by the abort: nothing is left to fire.
  expect(clock.pendingTimers).toBe(0);
  expect(c.workers.map((w) => w.executor.counters.deadlineAborts)).toEqual([0, 0]);
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("the placement timer fires on the clock's time, and stops with the service", async () => {
  const clock = new VirtualClock();
  const scheduler = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]), clock });
  const service = new TransferService({
    scheduler,
    clock,
    config: resolveTransferConfig({ mode: "force", placementIntervalMs: 250 }),
    idPrefix: "p",
    log: () => {},
    link: () => new Promise(() => {}),
  });
  let passes = 0;
  const pass = service.placementPass.bind(service);
  service.placementPass = () => (passes++, pass());
  service.start();
  clock.advanceSync(999);
  expect(passes).toBe(3);
  clock.advanceSync(1);
  expect(passes).toBe(4);
  service.stop();
  clock.advanceSync(10_000);
  expect(passes).toBe(4);
  expect(clock.pendingTimers).toBe(0);
});

test("route reservations expire after the TTL of the scheduler's clock", () => {
  const clock = new VirtualClock();
  const s = new GlobalScheduler({ config: { reservationTtlMs: 60_000 }, clock });
  s.applySnapshot(snapshot(0));
  const q = (id: string) => ({ requestId: id, blockHashes: HASHES, promptTokens: 64, maxTokens: 8 });
  s.route(q("a"));
  clock.advanceSync(59_999);
  s.route(q("b"));
  expect(s.reservations.get("a")).toBeDefined();
  clock.advanceSync(6_000); // expiry runs at most every tenth of the TTL
  s.route(q("c"));
  expect(s.reservations.get("a")).toBeUndefined();
  expect(s.reservations.get("b")).toBeDefined();
});
