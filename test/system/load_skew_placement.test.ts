// Background placement on a scaled-down load-skew trace with real processes (2 CPU workers, the
// engine test model, NVLink pair 0-1, transfers "auto": the cost gate decides): three warm-ups
// make one hot prefix each, two of them on one rank, then 16-in-flight revisits pile onto the
// owners. Placement must copy hot prefixes to the less loaded partner, leases must route later
// requests there, and those requests must hit the copied blocks. Foreground transfer is off so
// every cross-rank hit comes from a placement. Afterwards outputs equal a run with transfers off,
// the control plane's page table matches the workers, and every worker drains.
import { beforeAll, expect, test } from "bun:test";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLMEngine, type LLMEngineOptions } from "../../lib/engine/llm_engine.ts";
import { loadSkewWorkload } from "../../bench/workloads/load_skew.ts";
import type { WorkloadRequest } from "../../bench/workloads/types.ts";
import { engineTestModelDir } from "./llm_fixtures.ts";

// Enough revisits that leases published late on a loaded machine still see traffic (at 90 a run
// under load could finish its revisits before the first lease, 1 in ~30).
// Prefixes long enough that routing alone never leaves an owner (the GPU case: a cold prefill of
// the prefix costs more than the owner's whole queue), short enough for a CPU test.
const BLOCK = 64;
const PREFIX_BLOCKS = 40;
const trace = loadSkewWorkload({
  seed: 3,
  revisits: 180,
  prefixTokens: PREFIX_BLOCKS * BLOCK + 5,
  questionTokens: [2, 6],
  outputTokens: 4,
  blockSize: BLOCK,
  maxTokenId: 4000,
});
const greedy = { temperature: 0, ignoreEos: true };
let model: string;
beforeAll(() => {
  model = engineTestModelDir();
});

/** Runs the trace: the warm-ups together, then the revisits with at most `inFlight` at once. */
async function replay(engine: LLMEngine, inFlight = 16): Promise<RequestOutput[]> {
  const run = (r: WorkloadRequest) =>
    engine.generate({ promptTokenIds: r.promptTokenIds! }, { ...greedy, maxTokens: r.maxTokens }).then((o) => o[0]!);
  const warm = trace.requests.filter((r) => r.phase === "warmup");
  const out = await Promise.all(warm.map(run));
  await engine.processes.checkPageTable(); // the control plane holds the warm-ups' blocks
  const rest = trace.requests.filter((r) => r.phase !== "warmup");
  let next = 0;
  const lanes = Array.from({ length: inFlight }, async () => {
    while (next < rest.length) {
      const i = next++;
      out[warm.length + i] = await run(rest[i]!);
    }
  });
  await Promise.all(lanes);
  return out;
}

/** Control-plane counters once no plan runs (a placement may still be publishing when the trace ends). */
async function settledControlStats(engine: LLMEngine): Promise<Record<string, number>> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const c = await engine.processes.controlStats();
    if (c.transfer_active === 0 || Date.now() > deadline) return c;
    await new Promise((r) => setTimeout(r, 20));
  }
}

const opts = {
  worldSize: 2,
  numBlocks: 256,
  blockSize: BLOCK,
  maxModelLen: 4096,
  topology: "0-1",
  log: null,
  backend: "cpu",
} satisfies Partial<LLMEngineOptions>;

test(
  "load skew: placements copy hot prefixes to the idle partner; leases route requests there and they hit the copies",
  async () => {
    await using engine = await LLMEngine.create({
      model,
      ...opts,
      transfers: { mode: "auto", foreground: false },
      transferTuning: { placementIntervalMs: 20 },
    });
    const outs = await replay(engine);
    const c = await settledControlStats(engine);
    expect(c.transfer_background_completed).toBeGreaterThanOrEqual(1);
    expect(c.transfer_blocks).toBeGreaterThanOrEqual(1);
    expect(c.transfer_aborted ?? 0).toBe(0);
    // Routes to a lease's rank (moved there by the lease, or already the policy's pick) find the
    // copied blocks there: a lease exists only once they are published.
    expect((c.lease_routes ?? 0) + (c.lease_hits ?? 0)).toBeGreaterThanOrEqual(1);
    expect(c.reason_lease ?? 0).toBe(c.lease_routes ?? 0);

    // The group of each request (by its prefix) and the rank its warm-up made the owner.
    const groups = trace.requests.slice(0, 3).map((r) => r.promptTokenIds!.slice(0, PREFIX_BLOCKS * BLOCK).join(","));
    const groupOf = (i: number) =>
      groups.indexOf(trace.requests[i]!.promptTokenIds!.slice(0, PREFIX_BLOCKS * BLOCK).join(","));
    const owner = outs.slice(0, 3).map((o) => o.metrics.rank);
    expect(new Set(owner).size).toBe(2); // both ranks own a hot prefix, one of them two
    // Hot prefixes served away from their owner, reusing copied (then self-warmed) blocks there.
    const away = outs.filter((o, i) => i >= 3 && o.metrics.rank !== owner[groupOf(i)]);
    expect(away.filter((o) => o.metrics.numCachedTokens >= 8 * BLOCK).length).toBeGreaterThanOrEqual(1);

    await using off = await LLMEngine.create({ model, ...opts, transfers: "off" });
    const ref = await replay(off);
    expect(outs.map((o) => o.tokenIds)).toEqual(ref.map((o) => o.tokenIds));

    expect((await engine.processes.checkPageTable()).equal).toBe(true);
    const deadline = Date.now() + 5000;
    const drained = () => engine.stats().ranks.every((r) => r.numFreeBlocks + r.numReclaimableBlocks === r.numBlocks);
    while (!drained() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    for (const r of engine.stats().ranks) expect(r.numFreeBlocks + r.numReclaimableBlocks).toBe(r.numBlocks);
  },
  60_000,
);
