// The cost model prices each pair by the data path its workers report: a direct NVLink path (CUDA
// IPC, NCCL) by the profile or the GPU cold-start scalar (a 28 MiB block in ~0.09 ms), the host
// path (gather, worker socket, scatter) by its own far slower scalar, never by the profile. A plan
// that runs out of time raises its bucket's estimate to what it cost.
import { describe, expect, test } from "bun:test";
import { PairDataPaths } from "../../../../lib/transfer/control/pair_data_paths.ts";
import { resolveTransferConfig } from "../../../../lib/transfer/control/transfer_config.ts";
import { TransferCostModel } from "../../../../lib/transfer/control/transfer_cost_model.ts";

const QWEN3_06B_BLOCK = 29_360_128; // 28 layers x K,V x 256 tokens x 8 heads x 128 x bf16

describe("pair data paths", () => {
  test("a peer named on a direct path is direct; a reporting worker's other peers are host; no report is unknown", () => {
    const p = new PairDataPaths();
    expect(p.pathOf(0, 1)).toEqual({ kind: "unknown" });
    p.observe(0, { kv_block_bytes: 10 }); // no data-path counters: changes nothing
    expect(p.pathOf(0, 1)).toEqual({ kind: "unknown" });
    p.observe(0, {
      data_path_ipc_peers: 1,
      data_path_ipc_peer_1: 1,
      data_path_nccl_peers: 0,
      data_path_nccl_peer_1: 0,
      data_path_nccl_peer_2: 0,
    });
    expect(p.pathOf(0, 1)).toEqual({ kind: "direct", name: "ipc" });
    expect(p.pathOf(0, 2)).toEqual({ kind: "host" });
    expect(p.pathOf(1, 0)).toEqual({ kind: "direct", name: "ipc" }); // rank 1 has not reported: rank 0's view
    p.observe(1, { data_path_nccl_peers: 0, data_path_fallbacks: 1, data_path_nccl_peer_0: 0 }); // rank 1 fell back
    expect(p.pathOf(1, 0)).toEqual({ kind: "host" });
    p.forget(1);
    expect(p.pathOf(1, 0)).toEqual({ kind: "direct", name: "ipc" });
  });
});

describe("pricing by data path", () => {
  test("GPU cold-start defaults: a direct 28 MiB block in ~0.08 ms; the host path ~150 ms", () => {
    const m = new TransferCostModel(resolveTransferConfig());
    m.paths.observe(0, { data_path_nccl_peer_1: 1 });
    m.paths.observe(2, { data_path_nccl_peers: 0 }); // the CPU backend: no direct path at all
    const direct = m.estimate(0, 1, 1, QWEN3_06B_BLOCK);
    expect(direct.source).toBe("fallback");
    expect(direct.ms).toBeCloseTo(0.0794, 3);
    const host = m.estimate(2, 3, 1, QWEN3_06B_BLOCK);
    expect(host.source).toBe("host-fallback");
    expect(host.ms).toBeCloseTo(1 + QWEN3_06B_BLOCK / 2e5, 6);
    // A 36-block prefix over the host path costs seconds: no saved prefill of 9k tokens pays that.
    expect(m.admits(m.savedPrefillMs(2, 36 * 256), m.estimate(2, 3, 36, QWEN3_06B_BLOCK).ms)).toBe(false);
    expect(m.admits(m.savedPrefillMs(0, 36 * 256), m.estimate(0, 1, 36, QWEN3_06B_BLOCK).ms)).toBe(true);
  });

  test("a profile prices direct pairs only; a host pair keeps the host scalar", () => {
    const profile = { blockBytes: 1000, pairs: { "0-1": { "1": 0.5, "8": 1 } } };
    const m = new TransferCostModel(resolveTransferConfig({ profile, hostFixedMs: 2, hostBytesPerMs: 100 }));
    expect(m.estimate(0, 1, 1, 1000)).toMatchObject({ ms: 0.5, source: "profile" }); // not reported yet
    m.paths.observe(0, { data_path_nccl_peer_1: 1 });
    expect(m.estimate(0, 1, 1, 1000)).toMatchObject({ ms: 0.5, source: "profile" });
    m.paths.observe(0, { data_path_nccl_peer_1: 0 }); // the pair fell back to host copies
    expect(m.estimate(0, 1, 1, 1000)).toEqual({ ms: 12, source: "host-fallback", bytes: 1000, waitMs: 0 });
  });

  test("a plan that timed out counts as at least its elapsed time until completions say otherwise", () => {
    const m = new TransferCostModel(resolveTransferConfig({ ewmaAlpha: 0.5 }));
    expect(m.estimate(0, 1, 8, 1000).source).toBe("fallback");
    m.observeTimeout(0, 1, 8, 2000);
    expect(m.estimate(0, 1, 9, 1000)).toMatchObject({ ms: 2000, source: "observed" }); // bucket 8 covers 8..15
    m.observeTimeout(0, 1, 8, 500); // a shorter timeout never lowers it
    expect(m.estimate(0, 1, 8, 1000).ms).toBe(2000);
    expect(m.admits(1000, m.estimate(0, 1, 8, 1000).ms)).toBe(false);
    m.observe(0, 1, 8, { publishMs: 10 });
    expect(m.estimate(0, 1, 8, 1000).ms).toBe(1005);
    expect(m.estimate(0, 1, 4, 1000).source).toBe("fallback"); // other buckets are untouched
  });
});
