// KV transfers between two CUDA workers of an LLMEngine go over CUDA IPC by default: with dataPath
// "auto", at start-up the control plane relays each worker's 64-byte KV cache handle to its partner,
// both map the other's cache and no NCCL pair is made; with transfers forced and round-robin
// routing, each follower of a shared prefix lands on the rank without the prefix, whose blocks the
// source worker copies straight into the follower's rank with the copy engine (never NCCL, never
// the host path), and the follower prefills only its suffix.
//
// Outputs are compared with a run with transfers off whose follower is routed to the rank that
// already holds the prefix (prefix-only routing), as in test/gpu/nccl_engine.test.ts: the greedy
// tokens are equal exactly when the copied blocks are byte-exact and published only after they
// landed. Copies go both ways (warm-ups alternate ranks). Skips (and says why) without 2
// CUDA devices. Worker lines (pair up / fallback causes) go to stderr.
import { describe, expect, test } from "bun:test";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLMEngine, type LLMEngineOptions } from "../../lib/engine/llm_engine.ts";
import { engineTestModelDir, randomTokens, rng } from "../system/llm_fixtures.ts";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();
function skipReason(): string | null {
  if ("skip" in backends) return backends.skip;
  if (backends.cuda.deviceCount() < 2) return `needs 2 CUDA devices, ${backends.cuda.deviceCount()} visible`;
  return null;
}
const skip = skipReason();
if (skip) console.log(`test/gpu/ipc_engine: skipping, ${skip}`);

const base = {
  worldSize: 2, gpus: [0, 1], topology: "0-1", backend: "cuda", blockSize: 16, numBlocks: 256, maxModelLen: 512, log: null,
} satisfies Partial<LLMEngineOptions>;
const greedy = { maxTokens: 8, temperature: 0 };
const GROUPS = 4, PREFIX = 160;

/**
 * Per group: a warm-up and a follower sharing a 10-block prefix, run one request at a time. Odd
 * groups start with an unrelated one-token request, which shifts round-robin by one, so warm-ups
 * land on both ranks (0, 1, 1, 0) and copies go both ways.
 */
async function run(engine: LLMEngine): Promise<{ warm: RequestOutput[]; follow: RequestOutput[] }> {
  const next = rng(31);
  const out = { warm: [] as RequestOutput[], follow: [] as RequestOutput[] };
  for (let g = 0; g < GROUPS; g++) {
    const filler = randomTokens(next, 24);
    if (g % 2 === 1) await engine.generate({ promptTokenIds: filler }, { maxTokens: 1, temperature: 0 });
    const prefix = randomTokens(next, PREFIX);
    const own = () => randomTokens(next, 5 + Math.floor(next() * 8));
    out.warm.push((await engine.generate({ promptTokenIds: [...prefix, ...own()] }, greedy))[0]!);
    // Let the control plane see the warm-up's blocks before the follower is routed.
    await engine.processes.checkPageTable();
    out.follow.push((await engine.generate({ promptTokenIds: [...prefix, ...own()] }, greedy))[0]!);
  }
  return out;
}

type Counters = Record<string, number>;
const sum = (rs: Counters[], k: string) => rs.reduce((t, r) => t + (r[k] ?? 0), 0);

describe("LLMEngine on two GPUs: KV transfers over CUDA IPC", () => {
  if (skip) {
    test.skip(`skipped: ${skip}`, () => {});
    return;
  }
  test('dataPath "auto" maps the partner\'s cache; forced copies go over CUDA IPC, outputs equal transfers off', async () => {
    const model = engineTestModelDir();
    let reference: { warm: RequestOutput[]; follow: RequestOutput[] };
    {
      await using off = await LLMEngine.create({ model, ...base, transfers: "off", routing: { policy: "prefix-only" } });
      reference = await run(off);
    }
    await using engine = await LLMEngine.create({ model, ...base, transfers: { mode: "force", dataPath: "auto", background: false }, routing: { policy: "round-robin" } });
    const got = await run(engine);

    for (let g = 0; g < GROUPS; g++) {
      expect(reference.follow[g]!.metrics.rank).toBe(reference.warm[g]!.metrics.rank);
      expect(reference.follow[g]!.metrics.numCachedTokens).toBe(PREFIX);
      expect(got.follow[g]!.metrics.rank).not.toBe(got.warm[g]!.metrics.rank);
      expect(got.follow[g]!.metrics.numCachedTokens).toBe(PREFIX);
    }
    // Copies went both ways.
    expect(got.warm.map((w) => w.metrics.rank)).toEqual([0, 1, 1, 0]);
    const tokens = (o: typeof got) => [...o.warm, ...o.follow].map((x) => x.tokenIds);
    expect(tokens(got)).toEqual(tokens(reference));

    const c = await engine.processes.controlStats();
    expect([c.ipc_handles_relayed, c.ipc_pairs_opened, c.ipc_offers_refused]).toEqual([1, 1, 0]);
    expect(c.nccl_offers).toBe(0); // no NCCL pair where CUDA IPC came up
    expect(c.transfer_completed).toBe(GROUPS);
    expect(c.transfer_aborted ?? 0).toBe(0);
    expect(c.transfer_blocks).toBe(GROUPS * (PREFIX / base.blockSize));
    // Workers push their counters; wait until they include the last plan.
    const read = () => engine.stats().ranks as unknown as Counters[];
    for (const end = Date.now() + 5000; Date.now() < end && sum(read(), "data_path_ipc_received_bytes") !== c.transfer_bytes; ) await new Promise((r) => setTimeout(r, 50));
    const ranks = read();
    expect(ranks.map((r) => [r.data_path_ipc_peers, r.data_path_ipc_peer_0 ?? r.data_path_ipc_peer_1, r.data_path_nccl_peers, r.data_path_fallbacks])).toEqual([[1, 1, 0, 0], [1, 1, 0, 0]]);
    expect(sum(ranks, "data_path_ipc_sent_bytes")).toBe(c.transfer_bytes!);
    expect(sum(ranks, "data_path_ipc_received_bytes")).toBe(c.transfer_bytes!);
    expect(ranks.every((r) => (r.data_path_ipc_sent_bytes ?? 0) > 0)).toBe(true); // both ranks were a source
    expect(sum(ranks, "data_path_host_sent_bytes") + sum(ranks, "data_path_host_received_bytes") + sum(ranks, "data_path_nccl_sent_bytes")).toBe(0);
  }, 240_000);
});
