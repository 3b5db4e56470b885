// Two ranks of one GPU (`gpus: [0, 0]`) are direct partners whatever the NVLink setting says (here
// "none"), and their KV transfers go over the device-local path: at start-up each worker maps the
// other's cache with CUDA IPC on device 0 (no peer access, no NCCL pair), and with transfers forced
// and round-robin routing each follower of a shared prefix lands on the rank without the prefix,
// whose blocks the source worker copies device-to-device into the follower's rank.
//
// Checked: (a) every plan completed, over the device-local path (the control plane's per-path
// count, and the workers' device_local byte counters equal the plans' bytes, with nothing on the
// host, cross-device IPC or NCCL paths); (b) the copied K/V is the source's: the greedy tokens
// equal a run with transfers off whose follower is routed to the rank holding the prefix
// (./transfer_engine_fixture.ts), and test/gpu/kv_device_local.test.ts compares the gathered bytes
// of both caches directly; (c) block invariants at the end: the control plane's page table equals
// the workers' snapshots, and every block of both ranks is free or a reclaimable cache entry.
// Skips (and says why) without a CUDA device.
import { describe, expect, test } from "bun:test";
import type { LLMEngine } from "../../lib/engine/llm_engine.ts";
import { openBackends } from "./cuda_backends.ts";
import { base, compareWithTransfersOff, PREFIX, ranksWhenSummed, sum } from "./transfer_engine_fixture.ts";

const backends = openBackends();
const skip = "skip" in backends ? backends.skip : null;
if (skip) console.log(`test/gpu/device_local_engine: skipping, ${skip}`);

// Odd groups shift round-robin by one, so warm-ups land on both ranks (0, 1, 1, 0).
const GROUPS = 4;

/** (c): the page table matches the workers, and every block is free or reclaimable, nothing running. */
async function drainedEverywhere(engine: LLMEngine): Promise<void> {
  const diff = await engine.processes.checkPageTable();
  expect(diff.equal).toBe(true);
  const drained = () =>
    engine.stats().ranks.every((r) => r.numFreeBlocks + r.numReclaimableBlocks === r.numBlocks && r.numRunning === 0);
  for (const end = Date.now() + 5000; Date.now() < end && !drained();) await new Promise((r) => setTimeout(r, 50));
  const ranks = engine.stats().ranks;
  expect(ranks).toHaveLength(2);
  for (const r of ranks) {
    expect({ rank: r.rank, running: r.numRunning, held: r.numFreeBlocks + r.numReclaimableBlocks }).toEqual({
      rank: r.rank,
      running: 0,
      held: r.numBlocks,
    });
  }
}

describe("LLMEngine with two ranks on one GPU: KV transfers over the device-local path", () => {
  if (skip) {
    test.skip(`skipped: ${skip}`, () => {});
    return;
  }
  test(
    'gpus [0, 0], NVLink pairs "none": forced copies go device-local, outputs equal transfers off, blocks drain',
    async () => {
      const transfers = { mode: "force", dataPath: "auto", background: false } as const;
      await compareWithTransfersOff(
        transfers,
        { groups: GROUPS, seed: 37, shiftOddGroups: true },
        async (engine, got) => {
          expect(got.warm.map((w) => w.metrics.rank)).toEqual([0, 1, 1, 0]); // copies went both ways

          const c = await engine.processes.controlStats();
          expect([c.ipc_handles_relayed, c.ipc_pairs_opened, c.ipc_offers_refused]).toEqual([1, 1, 0]);
          expect(c.nccl_offers ?? 0).toBe(0); // NCCL cannot pair a device with itself: never tried
          expect(c.transfer_completed).toBe(GROUPS);
          expect(c.transfer_path_device_local_completed).toBe(GROUPS); // (a)
          expect(c.transfer_aborted ?? 0).toBe(0);
          expect(c.transfer_blocks).toBe(GROUPS * (PREFIX / base.blockSize));
          const ranks = await ranksWhenSummed(engine, "data_path_device_local_received_bytes", c.transfer_bytes);
          expect(
            ranks.map((r) => [
              r.data_path_device_local_peers,
              r.data_path_device_local_peer_0 ?? r.data_path_device_local_peer_1,
              r.data_path_ipc_peers,
              r.data_path_nccl_peers,
              r.data_path_fallbacks,
            ]),
          ).toEqual([[1, 1, 0, 0, 0], [1, 1, 0, 0, 0]]);
          expect(sum(ranks, "data_path_device_local_sent_bytes")).toBe(c.transfer_bytes!);
          expect(sum(ranks, "data_path_device_local_received_bytes")).toBe(c.transfer_bytes!);
          expect(ranks.every((r) => (r.data_path_device_local_sent_bytes ?? 0) > 0)).toBe(true); // both were a source
          expect(
            sum(ranks, "data_path_host_sent_bytes") + sum(ranks, "data_path_host_received_bytes") +
              sum(ranks, "data_path_ipc_sent_bytes") + sum(ranks, "data_path_nccl_sent_bytes"),
          ).toBe(0);
          await drainedEverywhere(engine); // (c)
        },
        { gpus: [0, 0], topology: "none" },
      );
    },
    240_000,
  );
});
