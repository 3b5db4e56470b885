// KV transfers between two CUDA workers of an LLMEngine go over CUDA IPC by default: with dataPath
// "auto", at start-up the control plane relays each worker's 64-byte KV cache handle to its partner,
// both map the other's cache and no NCCL pair is made; with transfers forced and round-robin
// routing, each follower of a shared prefix lands on the rank without the prefix, whose blocks the
// source worker copies straight into the follower's rank with the copy engine (never NCCL, never
// the host path), and the follower prefills only its suffix.
//
// Outputs are compared with a run with transfers off whose follower is routed to the rank that
// already holds the prefix (prefix-only routing), as in test/gpu/nccl_engine.test.ts (both share
// ./transfer_engine_fixture.ts): the greedy tokens are equal exactly when the copied blocks are
// byte-exact and published only after they landed. Copies go both ways (warm-ups alternate ranks). Skips (and says why) without 2
// CUDA devices. Worker lines (pair up / fallback causes) go to stderr.
import { describe, expect, test } from "bun:test";
import { openBackends } from "./cuda_backends.ts";
import { base, compareWithTransfersOff, PREFIX, ranksWhenSummed, sum } from "./transfer_engine_fixture.ts";

const backends = openBackends();
function skipReason(): string | null {
  if ("skip" in backends) return backends.skip;
  if (backends.cuda.deviceCount() < 2) return `needs 2 CUDA devices, ${backends.cuda.deviceCount()} visible`;
  return null;
}
const skip = skipReason();
if (skip) console.log(`test/gpu/ipc_engine: skipping, ${skip}`);

// Odd groups shift round-robin by one, so warm-ups land on both ranks (0, 1, 1, 0).
const GROUPS = 4;

describe("LLMEngine on two GPUs: KV transfers over CUDA IPC", () => {
  if (skip) {
    test.skip(`skipped: ${skip}`, () => {});
    return;
  }
  test(
    'dataPath "auto" maps the partner\'s cache; forced copies go over CUDA IPC, outputs equal transfers off',
    async () => {
      const transfers = { mode: "force", dataPath: "auto", background: false } as const;
      await compareWithTransfersOff(
        transfers,
        { groups: GROUPS, seed: 31, shiftOddGroups: true },
        async (engine, got) => {
          // Copies went both ways.
          expect(got.warm.map((w) => w.metrics.rank)).toEqual([0, 1, 1, 0]);

          const c = await engine.processes.controlStats();
          expect([c.ipc_handles_relayed, c.ipc_pairs_opened, c.ipc_offers_refused]).toEqual([1, 1, 0]);
          expect(c.nccl_offers).toBe(0); // no NCCL pair where CUDA IPC came up
          expect(c.transfer_completed).toBe(GROUPS);
          expect(c.transfer_aborted ?? 0).toBe(0);
          expect(c.transfer_blocks).toBe(GROUPS * (PREFIX / base.blockSize));
          const ranks = await ranksWhenSummed(engine, "data_path_ipc_received_bytes", c.transfer_bytes);
          expect(
            ranks.map((
              r,
            ) => [
              r.data_path_ipc_peers,
              r.data_path_ipc_peer_0 ?? r.data_path_ipc_peer_1,
              r.data_path_nccl_peers,
              r.data_path_fallbacks,
            ]),
          ).toEqual([[1, 1, 0, 0], [1, 1, 0, 0]]);
          expect(sum(ranks, "data_path_ipc_sent_bytes")).toBe(c.transfer_bytes!);
          expect(sum(ranks, "data_path_ipc_received_bytes")).toBe(c.transfer_bytes!);
          expect(ranks.every((r) => (r.data_path_ipc_sent_bytes ?? 0) > 0)).toBe(true); // both ranks were a source
          expect(
            sum(ranks, "data_path_host_sent_bytes") + sum(ranks, "data_path_host_received_bytes") +
              sum(ranks, "data_path_nccl_sent_bytes"),
          ).toBe(0);
        },
      );
    },
    240_000,
  );
});
