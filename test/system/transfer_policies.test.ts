// The two transfer policies with real processes (2 CPU workers, tiny model, NVLink pair 0-1):
// - background placement: a hot prefix on one rank is copied to its idle partner and a placement
//   lease makes lmpool routing send the next request for that prefix there, where it hits;
// - foreground offload: a request short of free blocks on its rank moves the rank's cold cached
//   chain to the partner instead of destroying it; the source releases it, and a later request
//   for that chain hits on the partner.
// Outputs equal those with transfers off; every worker drains to free + reclaimable == total.
import { beforeAll, expect, test } from "bun:test";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLMEngine, type LLMEngineOptions } from "../../lib/engine/llm_engine.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

const greedy = { maxTokens: 6, temperature: 0 };
let model: string;
beforeAll(() => {
  model = engineTestModelDir();
});

async function untilCounter(
  engine: LLMEngine,
  key: string,
  atLeast: number,
  timeoutMs = 5000,
): Promise<Record<string, number>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const c = await engine.processes.controlStats();
    if ((c[key] ?? 0) >= atLeast || Date.now() > deadline) return c;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits until the control plane's page table has every worker's latest blocks (finishes reach the launcher first). */
async function settle(engine: LLMEngine): Promise<void> {
  await engine.processes.checkPageTable(); // returns once the control plane holds the workers' latest versions
}

async function expectDrained(engine: LLMEngine): Promise<void> {
  expect((await engine.processes.checkPageTable()).equal).toBe(true);
  const deadline = Date.now() + 5000;
  const ok = () => engine.stats().ranks.every((r) => r.numFreeBlocks + r.numReclaimableBlocks === r.numBlocks);
  while (!ok() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  for (const r of engine.stats().ranks) expect(r.numFreeBlocks + r.numReclaimableBlocks).toBe(r.numBlocks);
}

test(
  "background placement copies a hot prefix to the idle partner; its lease routes the next request there",
  async () => {
    const next = rng(23);
    const prefix = randomTokens(next, 160); // 10 blocks
    const prompts = Array.from({ length: 5 }, () => [...prefix, ...randomTokens(next, 7)]);
    const opts = {
      worldSize: 2,
      numBlocks: 128,
      maxModelLen: 512,
      topology: "0-1",
      log: null,
      backend: "cpu",
    } satisfies Partial<LLMEngineOptions>;
    const transferTuning = { hotnessThreshold: 3, placementIntervalMs: 20, minLoadSkewTokens: 0, minLoadSkewRatio: 0 };
    await using engine = await LLMEngine.create({ model, ...opts, transfers: "force", transferTuning });
    const outs: RequestOutput[] = [];
    for (const p of prompts.slice(0, 3)) {
      outs.push((await engine.generate({ promptTokenIds: p }, greedy))[0]!);
      await settle(engine);
    }
    expect(outs.map((o) => o.metrics.rank)).toEqual([0, 0, 0]); // the prefix owner
    const c = await untilCounter(engine, "transfer_background_completed", 1);
    expect(c.transfer_background_completed).toBeGreaterThanOrEqual(1);
    expect(c.leases).toBeGreaterThanOrEqual(1);
    outs.push((await engine.generate({ promptTokenIds: prompts[3]! }, greedy))[0]!);
    expect(outs[3]!.metrics.rank).toBe(1);
    expect(outs[3]!.metrics.numCachedTokens).toBe(160);
    const after = await engine.processes.controlStats();
    expect(after.lease_routes).toBeGreaterThanOrEqual(1);
    expect(after.reason_lease).toBeGreaterThanOrEqual(1);
    await using off = await LLMEngine.create({ model, ...opts, transfers: "off" });
    const ref = await off.generate(prompts.slice(0, 4).map((p) => ({ promptTokenIds: p })), greedy);
    expect(outs.map((o) => o.tokenIds)).toEqual(ref.map((o) => o.tokenIds));
    await expectDrained(engine);
  },
  60_000,
);

test(
  "foreground offload moves a cold chain off a rank short of blocks; the source releases it, the partner serves it",
  async () => {
    const next = rng(29);
    const a = [...randomTokens(next, 320), 1, 2, 3, 4, 5]; // 20 full blocks
    const x = randomTokens(next, 20);
    const b = [...randomTokens(next, 480), 9, 9, 9, 9, 9]; // needs 32 blocks with its decode reserve
    const opts = {
      worldSize: 2,
      numBlocks: 40,
      maxModelLen: 512,
      topology: "0-1",
      log: null,
      backend: "cpu",
      routing: { policy: "round-robin" },
    } satisfies Partial<LLMEngineOptions>;
    const sequence = async (engine: LLMEngine) => {
      const out: RequestOutput[] = [];
      for (const p of [a, x, b, a]) {
        out.push((await engine.generate({ promptTokenIds: p }, greedy))[0]!);
        await settle(engine);
      }
      return out;
    };
    await using engine = await LLMEngine.create({ model, ...opts, transfers: "force" });
    const got = await sequence(engine);
    expect(got.map((o) => o.metrics.rank)).toEqual([0, 1, 0, 1]);
    const c = await engine.processes.controlStats();
    expect(c.transfer_offload_completed).toBe(1);
    expect(c.transfer_released_blocks).toBe(20);
    expect(got[3]!.metrics.numCachedTokens).toBe(320); // a's chain, moved to rank 1
    await using off = await LLMEngine.create({ model, ...opts, transfers: "off" });
    const ref = await sequence(off);
    expect(ref[3]!.metrics.numCachedTokens).toBe(0);
    expect(got.map((o) => o.tokenIds)).toEqual(ref.map((o) => o.tokenIds));
    await expectDrained(engine);
  },
  60_000,
);

test(
  "with offloadIntoColderCache, a foreground offload into a partner with no free blocks reclaims only cache colder than the chain there; outputs unchanged",
  async () => {
    const next = rng(31);
    const y = randomTokens(next, 20);
    const z = [...randomTokens(next, 560), 7]; // 35 full blocks: rank 1's cache
    const a = [...randomTokens(next, 320), 1, 2, 3, 4, 5]; // 20 full blocks on rank 0
    const w = randomTokens(next, 20);
    const b = [...randomTokens(next, 480), 9, 9, 9, 9, 9]; // needs 32 blocks with its decode reserve
    const opts = {
      worldSize: 2,
      numBlocks: 40,
      maxModelLen: 640,
      topology: "0-1",
      log: null,
      backend: "cpu",
      routing: { policy: "round-robin" },
    } satisfies Partial<LLMEngineOptions>;
    // Round-robin alternates ranks: b lands on rank 0 next to a, and the last a goes to rank 1.
    const run = async (engine: LLMEngine, prompts: number[][]) => {
      const out: RequestOutput[] = [];
      for (const p of prompts) {
        out.push((await engine.generate({ promptTokenIds: p }, greedy))[0]!);
        await settle(engine);
      }
      expect(out.map((o) => o.metrics.rank)).toEqual([0, 1, 0, 1, 0, 1]);
      return out;
    };
    const zOlder = [y, z, a, w, b, a];
    const zNewer = [y, w, a, z, b, a];
    await using engine = await LLMEngine.create({
      model,
      ...opts,
      transfers: "force",
      // Rank 1 has 4 free blocks: with no room kept for its own prompts, only colder cache makes room.
      transferTuning: { offloadIntoColderCache: true, targetReserveShare: 0 },
    });
    const got = await run(engine, zOlder);
    // Rank 1 has 4 free blocks: a's 20 fit by reclaiming z's blocks, all older than a's chain.
    const c = await engine.processes.controlStats();
    expect(c.transfer_offload_completed).toBeGreaterThanOrEqual(1);
    expect(c.transfer_released_blocks).toBeGreaterThanOrEqual(20);
    expect(got[5]!.metrics.numCachedTokens).toBe(320); // a's chain, moved to rank 1
    await expectDrained(engine);
    // z used after a: reclaiming it for a's chain would evict hotter cache, so the chain stays on
    // rank 0, where b reclaims most of it (the last a then copies what is left).
    await using newer = await LLMEngine.create({
      model,
      ...opts,
      transfers: "force",
      transferTuning: { offloadIntoColderCache: true, targetReserveShare: 0 },
    });
    const kept = await run(newer, zNewer);
    expect(kept[5]!.metrics.numCachedTokens).toBeLessThan(320);
    expect((await newer.processes.controlStats()).transfer_released_blocks ?? 0).toBeLessThan(20);
    await expectDrained(newer);
    await using off = await LLMEngine.create({ model, ...opts, transfers: "off" });
    const ref = await run(off, zOlder);
    expect(ref[5]!.metrics.numCachedTokens).toBe(0);
    expect(got.map((o) => o.tokenIds)).toEqual(ref.map((o) => o.tokenIds));
    expect(kept.map((o) => o.tokenIds)).toEqual((await run(off, zNewer)).map((o) => o.tokenIds));
  },
  60_000,
);
