// KV transfers between two CUDA workers of an LLMEngine go over their NCCL pair with dataPath
// "nccl" ("auto" prefers CUDA IPC: test/gpu/ipc_engine.test.ts): at start-up the control plane
// relays rank 0's unique id to rank 1 and both join the pair; with transfers forced and round-robin
// routing, each follower of a shared prefix lands on the rank without the prefix,
// whose blocks are copied there over NCCL (never the host path), and it prefills only its suffix.
//
// Outputs are compared with a run with transfers off whose follower is routed to the rank that
// already holds the prefix (prefix-only routing): in both runs the follower reads the prefix K/V
// computed by the same warm-up prefill and runs the same suffix prefill and decode, one request at
// a time, so the greedy tokens are equal exactly when the copied blocks are byte-exact. The model
// is the engine tests' context-sensitive tiny Qwen3 (test/system/llm_fixtures.ts), whose outputs
// depend on every cached token. Skips (and says why) without 2 CUDA devices and a loadable NCCL.
import { describe, expect, test } from "bun:test";
import { KvTransferEngine } from "../../ffi/kv_transfer.ts";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLMEngine, type LLMEngineOptions } from "../../lib/engine/llm_engine.ts";
import { engineTestModelDir, randomTokens, rng } from "../system/llm_fixtures.ts";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();
function skipReason(): string | null {
  if ("skip" in backends) return backends.skip;
  if (backends.cuda.deviceCount() < 2) return `needs 2 CUDA devices, ${backends.cuda.deviceCount()} visible`;
  const v = new KvTransferEngine(backends.cuda).ncclVersion();
  return "unavailable" in v ? `NCCL does not load: ${v.unavailable}` : null;
}
const skip = skipReason();
if (skip) console.log(`test/gpu/nccl_engine: skipping, ${skip}`);

const base = {
  worldSize: 2, gpus: [0, 1], topology: "0-1", backend: "cuda", blockSize: 16, numBlocks: 256, maxModelLen: 512, log: null,
} satisfies Partial<LLMEngineOptions>;
const greedy = { maxTokens: 8, temperature: 0 };
const GROUPS = 3, PREFIX = 160;

/** Per group: a warm-up and a follower sharing a 10-block prefix, run one request at a time. */
async function run(engine: LLMEngine): Promise<{ warm: RequestOutput[]; follow: RequestOutput[] }> {
  const next = rng(29);
  const out = { warm: [] as RequestOutput[], follow: [] as RequestOutput[] };
  for (let g = 0; g < GROUPS; g++) {
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

describe("LLMEngine on two GPUs: KV transfers over the NCCL pair", () => {
  if (skip) {
    test.skip(`skipped: ${skip}`, () => {});
    return;
  }
  test("forced copies go over NCCL, followers reuse them, outputs equal transfers off", async () => {
    const model = engineTestModelDir();
    let reference: { warm: RequestOutput[]; follow: RequestOutput[] };
    {
      await using off = await LLMEngine.create({ model, ...base, transfers: "off", routing: { policy: "prefix-only" } });
      reference = await run(off);
    }
    await using engine = await LLMEngine.create({ model, ...base, transfers: { mode: "force", dataPath: "nccl", background: false }, routing: { policy: "round-robin" } });
    const got = await run(engine);

    for (let g = 0; g < GROUPS; g++) {
      expect(reference.follow[g]!.metrics.rank).toBe(reference.warm[g]!.metrics.rank);
      expect(reference.follow[g]!.metrics.numCachedTokens).toBe(PREFIX);
      expect(got.follow[g]!.metrics.rank).not.toBe(got.warm[g]!.metrics.rank);
      expect(got.follow[g]!.metrics.numCachedTokens).toBe(PREFIX);
    }
    const tokens = (o: typeof got) => [...o.warm, ...o.follow].map((x) => x.tokenIds);
    expect(tokens(got)).toEqual(tokens(reference));

    const c = await engine.processes.controlStats();
    expect(c.nccl_ids_relayed).toBe(1);
    expect(c.nccl_pairs_up).toBe(1);
    expect(c.ipc_offers).toBe(0);
    expect(c.transfer_completed).toBe(GROUPS);
    expect(c.transfer_blocks).toBe(GROUPS * (PREFIX / base.blockSize));
    // Workers push their counters; wait until they include the last plan.
    const read = () => engine.stats().ranks as unknown as Counters[];
    for (const end = Date.now() + 5000; Date.now() < end && sum(read(), "data_path_nccl_sent_bytes") !== c.transfer_bytes; ) await new Promise((r) => setTimeout(r, 50));
    const ranks = read();
    expect(ranks.map((r) => [r.data_path_nccl_peers, r.data_path_nccl_peer_0 ?? r.data_path_nccl_peer_1, r.data_path_fallbacks])).toEqual([[1, 1, 0], [1, 1, 0]]);
    expect(sum(ranks, "data_path_nccl_sent_bytes")).toBe(c.transfer_bytes!);
    expect(sum(ranks, "data_path_nccl_received_bytes")).toBe(c.transfer_bytes!);
    expect(sum(ranks, "data_path_host_sent_bytes") + sum(ranks, "data_path_host_received_bytes")).toBe(0);
  }, 240_000);
});
