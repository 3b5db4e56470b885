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
// depend on every cached token. The runs and shared checks: ./transfer_engine_fixture.ts. Skips
// (and says why) without 2 CUDA devices and a loadable NCCL.
import { describe, expect, test } from "bun:test";
import { KvTransferEngine } from "../../ffi/kv_transfer.ts";
import { openBackends } from "./cuda_backends.ts";
import { base, compareWithTransfersOff, PREFIX, ranksWhenSummed, sum } from "./transfer_engine_fixture.ts";

const backends = openBackends();
function skipReason(): string | null {
  if ("skip" in backends) return backends.skip;
  if (backends.cuda.deviceCount() < 2) return `needs 2 CUDA devices, ${backends.cuda.deviceCount()} visible`;
  const v = new KvTransferEngine(backends.cuda).ncclVersion();
  return "unavailable" in v ? `NCCL does not load: ${v.unavailable}` : null;
}
const skip = skipReason();
if (skip) console.log(`test/gpu/nccl_engine: skipping, ${skip}`);

const GROUPS = 3;

describe("LLMEngine on two GPUs: KV transfers over the NCCL pair", () => {
  if (skip) {
    test.skip(`skipped: ${skip}`, () => {});
    return;
  }
  test("forced copies go over NCCL, followers reuse them, outputs equal transfers off", async () => {
    const transfers = { mode: "force", dataPath: "nccl", background: false } as const;
    await compareWithTransfersOff(transfers, { groups: GROUPS, seed: 29, shiftOddGroups: false }, async (engine) => {
      const c = await engine.processes.controlStats();
      expect(c.nccl_ids_relayed).toBe(1);
      expect(c.nccl_pairs_up).toBe(1);
      expect(c.ipc_offers).toBe(0);
      expect(c.transfer_completed).toBe(GROUPS);
      expect(c.transfer_blocks).toBe(GROUPS * (PREFIX / base.blockSize));
      const ranks = await ranksWhenSummed(engine, "data_path_nccl_sent_bytes", c.transfer_bytes);
      expect(
        ranks.map((
          r,
        ) => [r.data_path_nccl_peers, r.data_path_nccl_peer_0 ?? r.data_path_nccl_peer_1, r.data_path_fallbacks]),
      ).toEqual([[1, 1, 0], [1, 1, 0]]);
      expect(sum(ranks, "data_path_nccl_sent_bytes")).toBe(c.transfer_bytes!);
      expect(sum(ranks, "data_path_nccl_received_bytes")).toBe(c.transfer_bytes!);
      expect(sum(ranks, "data_path_host_sent_bytes") + sum(ranks, "data_path_host_received_bytes")).toBe(0);
    });
  }, 240_000);
});
