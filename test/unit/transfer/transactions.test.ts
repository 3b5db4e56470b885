// Transfer transactions end to end in-process (real block managers, KV bytes over real Unix
// sockets, real snapshots/deltas into the page table): copy and move semantics, visibility only at
// publish, idempotent phases, stale-generation refusal, and concurrent plans in both directions.
import { afterEach, expect, test } from "bun:test";
import {
  cachePrompt,
  candidateOf,
  type ClusterOptions,
  makeCluster,
  type TestCluster,
  tokens,
} from "./cluster_fixture.ts";

const clusters: TestCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.close();
});
async function cluster(o: ClusterOptions = {}): Promise<TestCluster> {
  const c = await makeCluster(o);
  clusters.push(c);
  return c;
}

test("copy: byte-exact payload, destination invisible until publish, source keeps its replica", async () => {
  let sawBeforePublish: string[] | undefined;
  const c = await cluster({
    pipelinePhases: false, // the hook looks at the destination between execute and publish
    beforePhase: (plan, phase) => {
      if (phase !== "publish") return;
      sawBeforePublish = plan.blocks.filter((b) =>
        c.table.table(1)!.entries.has(b.hash) || c.workers[1]!.bm.cachedBlockOf(b.hash) !== undefined
      ).map((b) => b.hash);
      expect(c.state(1).reserved).toBe(4);
    },
  });
  const [w0, w1] = c.workers;
  const hashes = cachePrompt(w0!, tokens(17), 1);
  c.report();
  const { plan, done } = c.coordinator.start(candidateOf(c, 0, 1, hashes), 2000);
  expect(c.coordinator.pairBusy(1, 0)).toBe(true);
  expect(c.table.isInFlight(0, hashes[0]!)).toBe(true);
  const out = await done;
  expect(out.status).toBe("completed");
  expect(out.bytes).toBe(4 * w0!.kv.blockBytes);
  expect(sawBeforePublish).toEqual([]);
  expect(c.coordinator.pairBusy(0, 1)).toBe(false);
  expect(c.table.isInFlight(0, hashes[0]!)).toBe(false);
  for (const [i, h] of hashes.entries()) {
    const src = w0!.bm.cachedBlockOf(h)!;
    const dst = w1!.bm.cachedBlockOf(h);
    expect(dst).toBeDefined();
    expect(w1!.kv.blockContent(dst!)).toEqual(w0!.kv.blockContent(src));
    expect(c.table.table(1)!.entries.get(h)?.block).toBe(dst!);
    expect(c.table.table(0)!.entries.has(h)).toBe(true);
    expect(c.table.table(1)!.entries.get(h)?.parent).toBe(i === 0 ? "" : hashes[i - 1]!);
  }
  expect(c.state(0).pins).toBe(0);
  expect(c.state(1)).toMatchObject({ reserved: 0, reclaimable: 4 });
  // The copied chain serves a prefix hit on the destination.
  const { makeSeq } = await import("../local/fixtures.ts");
  expect(w1!.bm.lookupPrefix(makeSeq(tokens(17), 4))).toEqual(hashes.map((h) => w1!.bm.cachedBlockOf(h)!));
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
  expect(c.sent.filter((m) => m.planId === plan.planId).map((m) => `${m.type}@${m.rank}`)).toEqual([
    "transfer_prepare@1",
    "transfer_prepare@0",
    "transfer_execute@0",
    "transfer_execute@1",
    "transfer_publish@1",
    "transfer_finalize@0",
    "transfer_finalize@1",
  ]);
});

test("pipelined phases: execute and publish go out before any ack; the plan completes byte-exact and the acks are checked in order", async () => {
  const c = await cluster();
  const [w0, w1] = c.workers;
  const hashes = cachePrompt(w0!, tokens(17), 1);
  c.report();
  const { plan, done } = c.coordinator.start(candidateOf(c, 0, 1, hashes), 2000);
  const out = await done;
  expect(out.status).toBe("completed");
  const sent = c.sent.filter((m) => m.planId === plan.planId);
  expect(sent.map((m) => `${m.type}@${m.rank}`)).toEqual([
    "transfer_prepare@1",
    "transfer_prepare@0",
    "transfer_execute@0",
    "transfer_execute@1",
    "transfer_publish@1",
    "transfer_finalize@0",
    "transfer_finalize@1",
  ]);
  // The payload moves over a socket: no execute can have been answered when publish went out.
  const publish = sent.find((m) => m.type === "transfer_publish")!;
  expect(publish.answeredBefore.filter((a) => a.startsWith("transfer_execute"))).toEqual([]);
  for (const h of hashes) {
    expect(w1!.kv.blockContent(w1!.bm.cachedBlockOf(h)!)).toEqual(w0!.kv.blockContent(w0!.bm.cachedBlockOf(h)!));
  }
  expect(hashes.every((h) => c.table.table(1)!.entries.has(h))).toBe(true);
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("over the CUDA IPC path the destination says ready at prepare, before its execute arrives; the copy is byte-exact", async () => {
  let signalsBeforeExecute: string[] | undefined;
  const c: TestCluster = await cluster({
    dataPath: "ipc",
    pipelinePhases: false, // the hook looks between the prepare acks and execute
    beforePhase: (plan, phase) => {
      if (phase === "execute") signalsBeforeExecute = c.workers[1]!.signals!.log.filter((l) => l.endsWith(plan.planId));
    },
  });
  const [w0, w1] = c.workers;
  const hashes = cachePrompt(w0!, tokens(9), 3);
  c.report();
  const { plan, done } = c.coordinator.start(candidateOf(c, 0, 1, hashes), 2000);
  expect((await done).status).toBe("completed");
  expect(signalsBeforeExecute).toEqual([`1->0 ready ${plan.planId}`]);
  expect(w1!.signals!.log.filter((l) => l.endsWith(plan.planId))).toEqual([
    `1->0 ready ${plan.planId}`,
    `0->1 done ${plan.planId}`,
  ]);
  for (const h of hashes) {
    expect(w1!.kv.blockContent(w1!.bm.cachedBlockOf(h)!)).toEqual(w0!.kv.blockContent(w0!.bm.cachedBlockOf(h)!));
  }
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("move: the destination publishes, the source frees only its unreferenced suffix", async () => {
  const c = await cluster();
  const [w0] = c.workers;
  const hashes = cachePrompt(w0!, tokens(17), 2);
  const { makeSeq, prefill } = await import("../local/fixtures.ts");
  const holder = makeSeq(tokens(9), 4); // holds the first two blocks
  expect(prefill(w0!.bm, holder)).toBe(true);
  c.report();
  const out = await c.coordinator.start(candidateOf(c, 0, 1, hashes, "move"), 2000).done;
  expect(out).toMatchObject({ status: "completed", released: 2 });
  expect(hashes.map((h) => c.table.table(0)!.entries.has(h))).toEqual([true, true, false, false]);
  expect(hashes.map((h) => c.table.table(1)!.entries.has(h))).toEqual([true, true, true, true]);
  expect(c.coordinator.counters()).toMatchObject({
    transfer_completed: 1,
    transfer_released_blocks: 2,
    transfer_blocks: 4,
  });
  w0!.bm.free(holder);
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("move into a destination full of cache: its prepare reclaims cold blocks, never the parent the chain hangs from", async () => {
  const c = await cluster({ numBlocks: 8 });
  const [w0, w1] = c.workers;
  const hashes = cachePrompt(w0!, tokens(13), 4); // P, T1, T2
  cachePrompt(w1!, tokens(5), 5); // P alone: the coldest cached block of rank 1
  cachePrompt(w1!, tokens(28, 1000), 6); // 7 more blocks: rank 1 has no free block left
  c.report();
  expect(c.state(1)).toMatchObject({ free: 0, reclaimable: 8 });
  const out = await c.coordinator.start(candidateOf(c, 0, 1, hashes.slice(1), "move"), 2000).done;
  expect(out).toMatchObject({ status: "completed", released: 2 });
  const { makeSeq } = await import("../local/fixtures.ts");
  expect(w1!.bm.lookupPrefix(makeSeq(tokens(13), 4))).toEqual(hashes.map((h) => w1!.bm.cachedBlockOf(h)!));
  expect(hashes.map((h) => c.table.table(1)!.entries.has(h))).toEqual([true, true, true]);
  expect(c.state(1)).toMatchObject({ free: 0, reclaimable: 8, reserved: 0, pins: 0 });
  expect(c.state(0)).toMatchObject({ pins: 0, reclaimable: 1 });
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("a stale generation is refused at prepare: source reclaimed and reused after planning", async () => {
  const c = await cluster({
    numBlocks: 8,
    beforePhase: (_plan, phase) => {
      if (phase !== "prepare") return;
      const w0 = c.workers[0]!;
      const all = w0.bm.reserve(w0.bm.numAvailableBlocks)!; // reclaims every cached block
      w0.bm.releaseReserved(all);
      cachePrompt(w0, tokens(16, 500), 9); // the same ids, new generations and hashes
      c.report();
    },
  });
  const hashes = cachePrompt(c.workers[0]!, tokens(16), 3);
  c.report();
  const dstBefore = c.state(1);
  const out = await c.coordinator.start(candidateOf(c, 0, 1, hashes), 2000).done;
  expect(out.status).toBe("aborted");
  expect(out.failedPhase).toBe("prepare");
  expect(out.reason).toMatch(/stale plan .*generation/);
  expect(c.state(0).pins).toBe(0);
  expect(c.state(1)).toEqual(dstBefore);
  expect(c.coordinator.counters()).toMatchObject({ transfer_aborted: 1, transfer_abort_prepare: 1 });
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("phases are idempotent: a repeated message gets the same answer and changes nothing", async () => {
  const c = await cluster();
  const [w0, w1] = c.workers;
  const hashes = cachePrompt(w0!, tokens(12), 4);
  c.report();
  const cand = candidateOf(c, 0, 1, hashes);
  const prepare = {
    type: "transfer_prepare" as const,
    planId: "p1",
    mode: "copy" as const,
    srcRank: 0,
    dstRank: 1,
    srcEpoch: 7,
    dstEpoch: 7,
    blocks: cand.blocks,
    deadline: Date.now() + 5000,
  };
  const a = await w1!.executor.handle(prepare);
  const b = await w1!.executor.handle(prepare);
  expect(b).toEqual(a);
  expect(a.dstBlocks).toHaveLength(3);
  expect(c.state(1).reserved).toBe(3);
  expect(await w0!.executor.handle(prepare)).toMatchObject({ ok: true });
  expect(await w0!.executor.handle(prepare)).toMatchObject({ ok: true });
  expect(c.state(0).pins).toBe(3);
  const exec = {
    type: "transfer_execute" as const,
    planId: "p1",
    srcRank: 0,
    dstRank: 1,
    srcBlocks: cand.blocks.map((x) => x.srcBlock),
    dstBlocks: a.dstBlocks!,
  };
  const [e0, e1] = await Promise.all([w0!.executor.handle(exec), w1!.executor.handle(exec)]);
  expect(e0.ok && e1.ok).toBe(true);
  expect(await w1!.executor.handle(exec)).toEqual(e1); // not received twice
  const pub = { type: "transfer_publish" as const, planId: "p1" };
  expect((await w1!.executor.handle(pub)).ok).toBe(true);
  expect((await w1!.executor.handle(pub)).ok).toBe(true);
  expect(c.state(1)).toMatchObject({ reserved: 0, reclaimable: 3 });
  const fin = { type: "transfer_finalize" as const, planId: "p1", mode: "copy" as const };
  expect((await w0!.executor.handle(fin)).ok).toBe(true);
  expect(await w0!.executor.handle(fin)).toMatchObject({ ok: true, phase: "finalize" });
  expect(c.state(0).pins).toBe(0);
  // Abort after commit changes nothing; an unknown plan's abort is remembered, refusing its prepare.
  expect((await w0!.executor.handle({ type: "transfer_abort", planId: "p1", reason: "late" })).ok).toBe(false);
  expect((await w1!.executor.handle({ type: "transfer_abort", planId: "p2", reason: "early" })).ok).toBe(true);
  expect(await w1!.executor.handle({ ...prepare, planId: "p2" })).toMatchObject({
    ok: false,
    error: expect.stringMatching(/aborted before its prepare/),
  });
  expect((await w1!.executor.handle({ type: "transfer_publish", planId: "p3" })).error).toMatch(/unknown plan p3/);
  expect(c.state(1)).toMatchObject({ reserved: 0, reclaimable: 3 });
  // The coordinator returns the same outcome for a plan id it already runs.
  const { plan, done } = c.coordinator.start(candidateOf(c, 0, 1, hashes), 2000);
  expect(c.coordinator.run(plan)).toBe(done);
  await done;
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
});

test("concurrent plans on one pair, in both directions, all complete with exact bytes", async () => {
  const c = await cluster({ numBlocks: 48 });
  const [w0, w1] = c.workers;
  const a = cachePrompt(w0!, tokens(40), 5);
  const b = cachePrompt(w0!, tokens(24, 900), 6);
  const x = cachePrompt(w1!, tokens(36, 4000), 7);
  c.report();
  const content = new Map<string, number[]>();
  for (const [w, hs] of [[w0!, [...a, ...b]], [w1!, x]] as const) {
    for (const h of hs) content.set(h, w.kv.blockContent(w.bm.cachedBlockOf(h)!));
  }
  const runs = [
    c.coordinator.start(candidateOf(c, 0, 1, a), 3000),
    c.coordinator.start(candidateOf(c, 1, 0, x), 3000),
    c.coordinator.start(candidateOf(c, 0, 1, b, "move"), 3000),
  ];
  expect(c.coordinator.activePlans).toBe(3);
  const outs = await Promise.all(runs.map((r) => r.done));
  expect(outs.map((o) => o.status)).toEqual(["completed", "completed", "completed"]);
  const arrived = (to: number, hashes: string[]) => {
    for (const h of hashes) {
      expect(c.workers[to]!.kv.blockContent(c.workers[to]!.bm.cachedBlockOf(h)!)).toEqual(content.get(h)!);
    }
  };
  arrived(1, [...a, ...b]);
  arrived(0, x);
  expect(b.every((h) => w0!.bm.cachedBlockOf(h) === undefined && w1!.bm.cachedBlockOf(h) !== undefined)).toBe(true);
  expect(c.coordinator.activePlans).toBe(0);
  expect(c.coordinator.pairBusy(0, 1)).toBe(false);
  for (const w of c.workers) w.bm.checkInvariants({ drained: true });
  for (const r of [0, 1]) expect(c.tableEntries(r)).toEqual(c.state(r).published);
});

test("payloads in flight: the source's from execute to finalize, the destination's until received; none after an abort", async () => {
  const seen: Record<string, number[]> = {};
  const c = await cluster({
    pipelinePhases: false, // the hook looks at the workers between phases
    beforePhase: (plan, phase) => {
      seen[`${plan.planId}:${phase}`] = c.workers.map((w) => w.executor.payloadsInFlight);
    },
    faults: (
      rank,
    ) => (rank === 1
      ? (phase, role, planId) => (phase === "execute" && role === "dst" && planId === "t-2" ? "hang" : undefined)
      : undefined),
  });
  const hashes = cachePrompt(c.workers[0]!, tokens(17), 1);
  c.report();
  expect((await c.coordinator.start(candidateOf(c, 0, 1, hashes), 2000).done).status).toBe("completed");
  expect(seen["t-1:execute"]).toEqual([0, 0]);
  expect(seen["t-1:publish"]).toEqual([1, 0]); // received; the source waits for its finalize
  expect(seen["t-1:finalize"]).toEqual([1, 0]);
  expect(c.workers.map((w) => w.executor.payloadsInFlight)).toEqual([0, 0]);
  // A destination that hangs before receiving: the sent payload stays in flight until the deadline aborts the plan.
  const hashesB = cachePrompt(c.workers[0]!, tokens(9, 500), 2);
  c.report();
  const hung = c.coordinator.start(candidateOf(c, 0, 1, hashesB), 150).done;
  await new Promise((r) => setTimeout(r, 50));
  expect(c.workers.map((w) => w.executor.payloadsInFlight)).toEqual([1, 0]);
  const settled = Promise.all(c.workers.map((w) => w.executor.payloadsSettled()));
  expect((await hung).status).toBe("aborted");
  await settled;
  expect(c.workers.map((w) => w.executor.payloadsInFlight)).toEqual([0, 0]);
});
