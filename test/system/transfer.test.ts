// KV transfer with real processes (launcher + control plane + 2 CPU workers, tiny model, one
// NVLink pair 0-1). Round-robin dispatch sends every follower of a shared prefix to the rank that
// lacks it, so forced foreground copies happen and the follower prefills from the copied blocks;
// greedy outputs equal those with transfers off. Crossing followers copy in both directions at
// once. With a fault injected at a phase every plan aborts, outputs still match, nothing leaks.
// On the CPU backend, dataPath "auto" opens neither a CUDA IPC mapping nor an NCCL pair (no
// rendezvous traffic at all) and every payload goes over the workers' host sockets.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLMEngine, type LLMEngineOptions } from "../../lib/engine/llm_engine.ts";
import { fileURLToPath } from "node:url";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

const FAULTY_WORKER_MAIN = fileURLToPath(new URL("../helpers/faulty_worker_main.ts", import.meta.url));

const base = {
  worldSize: 2,
  numBlocks: 128,
  maxModelLen: 512,
  topology: "0-1",
  log: null,
  backend: "cpu",
  routing: { policy: "round-robin" },
} satisfies Partial<LLMEngineOptions>;
const greedy = { maxTokens: 6, temperature: 0 };

/** Four prefix groups (10 blocks of 16 tokens each), a warm-up and a follower per group. */
function workload(): { warm: number[][]; follow: number[][] } {
  const next = rng(17);
  const prefixes = Array.from({ length: 4 }, () => randomTokens(next, 160));
  const own = () => randomTokens(next, 6 + Math.floor(next() * 8));
  return { warm: prefixes.map((p) => [...p, ...own()]), follow: prefixes.map((p) => [...p, ...own()]) };
}

/**
 * Groups 0-1 one request at a time (warm-up on one rank, follower on the other); groups 2-3 both
 * warm-ups at once, then both followers at once with their ranks crossed (copies both ways).
 */
async function run(engine: LLMEngine): Promise<{ warm: RequestOutput[]; follow: RequestOutput[] }> {
  const { warm, follow } = workload();
  const ids = (p: number[]) => ({ promptTokenIds: p });
  // A finish reaches the launcher before the worker's block delta reaches the control plane: let the
  // page table catch up, so the follower's route sees the warm-up's blocks.
  const settle = async () => void (await engine.processes.checkPageTable());
  const w: RequestOutput[] = [];
  const f: RequestOutput[] = [];
  for (const g of [0, 1]) {
    w.push((await engine.generate(ids(warm[g]!), greedy))[0]!);
    await settle();
    f.push((await engine.generate(ids(follow[g]!), greedy))[0]!);
  }
  w.push(...(await engine.generate([ids(warm[2]!), ids(warm[3]!)], greedy)));
  await settle();
  const crossed = await engine.generate([ids(follow[3]!), ids(follow[2]!)], greedy);
  f.push(crossed[1]!, crossed[0]!);
  return { warm: w, follow: f };
}

type Counters = Record<string, number>;
const sum = (rs: Counters[], k: string) => rs.reduce((t, r) => t + (r[k] ?? 0), 0);

/** Both ranks' pushed stats counters, once `ready` holds (or after 5 s). */
async function rankCounters(engine: LLMEngine, ready: (rs: Counters[]) => boolean): Promise<Counters[]> {
  const read = () => engine.stats().ranks as unknown as Counters[];
  for (const end = Date.now() + 5000; Date.now() < end && !(read().length === 2 && ready(read()));) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return read();
}

async function drainedEverywhere(engine: LLMEngine): Promise<void> {
  const diff = await engine.processes.checkPageTable();
  expect(diff.equal).toBe(true);
  const deadline = Date.now() + 5000;
  let ranks = engine.stats().ranks;
  while (
    Date.now() < deadline &&
    !(ranks.length === 2 &&
      ranks.every((r) => r.numFreeBlocks + r.numReclaimableBlocks === r.numBlocks && r.numRunning === 0))
  ) {
    await new Promise((r) => setTimeout(r, 50));
    ranks = engine.stats().ranks;
  }
  for (const r of ranks) expect(r.numFreeBlocks + r.numReclaimableBlocks).toBe(r.numBlocks);
}

let model: string;
let reference: { warm: RequestOutput[]; follow: RequestOutput[] };
beforeAll(async () => {
  model = engineTestModelDir();
  await using off = await LLMEngine.create({ model, ...base, transfers: "off" });
  reference = await run(off);
});

describe("transfers forced on", () => {
  test("followers are served from blocks copied to their rank over the host path; outputs equal transfers off", async () => {
    await using engine = await LLMEngine.create({ model, ...base, transfers: { mode: "force", dataPath: "auto" } });
    const got = await run(engine);
    const tokens = (o: { warm: RequestOutput[]; follow: RequestOutput[] }) =>
      [...o.warm, ...o.follow].map((x) => x.tokenIds);
    expect(tokens(got)).toEqual(tokens(reference));
    for (let g = 0; g < 4; g++) {
      // Off: the follower lands on the other rank and recomputes its prefix.
      expect(reference.follow[g]!.metrics.rank).not.toBe(reference.warm[g]!.metrics.rank);
      expect(reference.follow[g]!.metrics.numCachedTokens).toBe(0);
      // Forced: the same rank, now holding a copy of the warm-up's 10 prefix blocks.
      expect(got.follow[g]!.metrics.rank).not.toBe(got.warm[g]!.metrics.rank);
      expect(got.follow[g]!.metrics.numCachedTokens).toBe(160);
    }
    const c = await engine.processes.controlStats();
    expect(c["transfer_prefix-copy_completed"]).toBe(4);
    expect(c.transfer_blocks).toBe(40);
    expect(c.transfer_aborted ?? 0).toBe(0);
    expect(c.transfer_bytes).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 1100)); // the launcher polls control-plane counters each second
    expect(engine.stats().transfers).toEqual({ count: 4, blocks: 40, bytes: c.transfer_bytes! });
    expect(c.nccl_offers).toBe(0);
    expect(c.ipc_offers).toBe(0);
    const counters = await rankCounters(engine, (rs) => sum(rs, "data_path_host_sent_bytes") === c.transfer_bytes);
    expect(sum(counters, "data_path_host_sent_bytes")).toBe(c.transfer_bytes!);
    expect(sum(counters, "data_path_host_received_bytes")).toBe(c.transfer_bytes!);
    for (const path of ["ipc", "nccl"]) {
      expect(
        counters.map((
          r,
        ) => [r[`data_path_${path}_peers`], r[`data_path_${path}_sent_bytes`], r[`data_path_${path}_received_bytes`]]),
      ).toEqual([[0, 0, 0], [0, 0, 0]]);
    }
    await drainedEverywhere(engine);
  });
});

describe("a fault injected in every plan", () => {
  for (const fault of ["execute:dst:fail", "publish:dst:hang"]) {
    test(`${fault}: every plan aborts, outputs still equal, no block leaks`, async () => {
      // The test entry reads the faults in each worker, which inherits this environment.
      process.env.LMPOOL_TEST_TRANSFER_FAULTS = fault;
      let engine: LLMEngine;
      try {
        engine = await LLMEngine.create({
          model,
          ...base,
          transfers: { mode: "force", foregroundDeadlineMs: 300 },
          workerMain: FAULTY_WORKER_MAIN,
        });
      } finally {
        delete process.env.LMPOOL_TEST_TRANSFER_FAULTS;
      }
      await using _ = engine;
      const got = await run(engine);
      expect([...got.warm, ...got.follow].map((x) => x.tokenIds)).toEqual(
        [...reference.warm, ...reference.follow].map((x) => x.tokenIds),
      );
      for (const f of got.follow) expect(f.metrics.numCachedTokens).toBe(0);
      // A hung plan may still be aborting when its request (no longer waiting for it) finishes.
      let c = await engine.processes.controlStats();
      for (const end = Date.now() + 5000; (c.transfer_active ?? 0) > 0 && Date.now() < end;) {
        await new Promise((r) => setTimeout(r, 20));
        c = await engine.processes.controlStats();
      }
      expect(c.transfer_completed ?? 0).toBe(0);
      expect(c.transfer_aborted).toBeGreaterThanOrEqual(4);
      await drainedEverywhere(engine);
    });
  }
});

afterAll(() => {});
