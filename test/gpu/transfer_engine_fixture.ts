/**
 * The LLMEngine transfer runs shared by test/gpu/ipc_engine.test.ts, test/gpu/nccl_engine.test.ts
 * (two GPUs) and test/gpu/device_local_engine.test.ts (two ranks of one GPU, through `placement`):
 * groups of a warm-up and a follower sharing a prefix, run once with
 * transfers off and prefix-only routing (the reference) and once with forced transfers and
 * round-robin routing, with the checks both data paths make on the pair of runs.
 * @module
 */
import { expect } from "bun:test";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLMEngine, type LLMEngineOptions } from "../../lib/engine/llm_engine.ts";
import { engineTestModelDir, randomTokens, rng } from "../system/llm_fixtures.ts";

/** Engine options both runs share: two CUDA workers on GPUs 0 and 1. */
export const base = {
  worldSize: 2,
  gpus: [0, 1],
  topology: "0-1",
  backend: "cuda",
  blockSize: 16,
  numBlocks: 256,
  maxModelLen: 512,
  log: null,
} satisfies Partial<LLMEngineOptions>;
const greedy = { maxTokens: 8, temperature: 0 };
/** Tokens of the prefix a warm-up and its follower share (10 blocks). */
export const PREFIX = 160;

/** The warm-ups and followers of one run, in group order. */
export type GroupOutputs = { warm: RequestOutput[]; follow: RequestOutput[] };
/** A worker's pushed counters. */
export type Counters = Record<string, number>;
/** Sum of counter `k` over ranks (missing counts as 0). */
export const sum = (rs: Counters[], k: string) => rs.reduce((t, r) => t + (r[k] ?? 0), 0);

/** How the groups are drawn: their count, the seed, and whether odd groups shift round-robin. */
export type GroupPlan = { groups: number; seed: number; shiftOddGroups: boolean };

/**
 * Per group: a warm-up and a follower sharing a 10-block prefix, run one request at a time. With
 * `shiftOddGroups`, odd groups start with an unrelated one-token request, which shifts round-robin
 * by one, so warm-ups land on both ranks (0, 1, 1, 0) and copies go both ways.
 */
async function run(engine: LLMEngine, plan: GroupPlan): Promise<GroupOutputs> {
  const next = rng(plan.seed);
  const out: GroupOutputs = { warm: [], follow: [] };
  for (let g = 0; g < plan.groups; g++) {
    if (plan.shiftOddGroups) {
      const filler = randomTokens(next, 24);
      if (g % 2 === 1) await engine.generate({ promptTokenIds: filler }, { maxTokens: 1, temperature: 0 });
    }
    const prefix = randomTokens(next, PREFIX);
    const own = () => randomTokens(next, 5 + Math.floor(next() * 8));
    out.warm.push((await engine.generate({ promptTokenIds: [...prefix, ...own()] }, greedy))[0]!);
    // Let the control plane see the warm-up's blocks before the follower is routed.
    await engine.processes.checkPageTable();
    out.follow.push((await engine.generate({ promptTokenIds: [...prefix, ...own()] }, greedy))[0]!);
  }
  return out;
}

/**
 * Runs `plan` with transfers off (prefix-only routing), then with `transfers` (round-robin), checks
 * that reference followers stay on the warm-up's rank and transferred ones move, that both reuse
 * the whole prefix and that the greedy tokens are equal, then hands the live engine to `check`.
 * `placement` overrides {@link base}'s devices and topology for both runs.
 */
export async function compareWithTransfersOff(
  transfers: LLMEngineOptions["transfers"],
  plan: GroupPlan,
  check: (engine: LLMEngine, got: GroupOutputs) => Promise<void>,
  placement: Pick<LLMEngineOptions, "gpus" | "topology"> = {},
): Promise<void> {
  const model = engineTestModelDir();
  const options = { model, ...base, ...placement };
  let reference: GroupOutputs;
  {
    await using off = await LLMEngine.create({ ...options, transfers: "off", routing: { policy: "prefix-only" } });
    reference = await run(off, plan);
  }
  await using engine = await LLMEngine.create({ ...options, transfers, routing: { policy: "round-robin" } });
  const got = await run(engine, plan);

  for (let g = 0; g < plan.groups; g++) {
    expect(reference.follow[g]!.metrics.rank).toBe(reference.warm[g]!.metrics.rank);
    expect(reference.follow[g]!.metrics.numCachedTokens).toBe(PREFIX);
    expect(got.follow[g]!.metrics.rank).not.toBe(got.warm[g]!.metrics.rank);
    expect(got.follow[g]!.metrics.numCachedTokens).toBe(PREFIX);
  }
  const tokens = (o: GroupOutputs) => [...o.warm, ...o.follow].map((x) => x.tokenIds);
  expect(tokens(got)).toEqual(tokens(reference));
  await check(engine, got);
}

/**
 * Workers push their counters; waits (up to 5 s) until counter `key` summed over ranks reaches
 * `target`, so the counters include the last plan, and returns them.
 */
export async function ranksWhenSummed(engine: LLMEngine, key: string, target: number | undefined): Promise<Counters[]> {
  const read = () => engine.stats().ranks as unknown as Counters[];
  for (const end = Date.now() + 5000; Date.now() < end && sum(read(), key) !== target;) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return read();
}
