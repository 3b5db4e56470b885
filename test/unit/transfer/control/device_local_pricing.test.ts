// Two ranks of one CUDA device copy KV within that device's memory (the device-local path): the
// cost model prices such a pair, once its workers report it, by its own prior (fixed dispatch cost
// + bytes at HBM copy bandwidth), never by an NVLink profile, and learns from completed plans like
// every other path. The cost gate still says no where the copy does not pay: a tiny prefix (the
// fixed cost beats its prefill), or a destination without room; a long prefix is admitted.
import { describe, expect, test } from "bun:test";
import { GlobalScheduler } from "../../../../lib/global/global_scheduler.ts";
import { type RouteQuery, RoutingContext } from "../../../../lib/global/routing_context.ts";
import { NvlinkTopology } from "../../../../lib/global/topology.ts";
import { PairDataPaths } from "../../../../lib/transfer/control/pair_data_paths.ts";
import { resolveTransferConfig } from "../../../../lib/transfer/control/transfer_config.ts";
import { TransferCostModel } from "../../../../lib/transfer/control/transfer_cost_model.ts";
import { type PlannerEnv, planPrefixCopy } from "../../../../lib/transfer/control/transfer_planner.ts";
import { chainEntries, hashesOf, promptTokens, snapshot } from "../../global/page_table_fixture.ts";

const QWEN3_06B_BLOCK = 29_360_128; // 28 layers x K,V x 256 tokens x 8 heads x 128 x bf16
/** What rank 0's worker reports with a device-local partner 1. */
const DEVICE_LOCAL_REPORT = {
  data_path_device_local_peers: 1,
  data_path_device_local_peer_1: 1,
  data_path_ipc_peers: 0,
};

describe("the device-local path's prior", () => {
  test("reported device_local pairs are direct and named so", () => {
    const p = new PairDataPaths();
    p.observe(0, DEVICE_LOCAL_REPORT);
    expect(p.pathOf(0, 1)).toEqual({ kind: "direct", name: "device_local" });
    expect(p.pathOf(1, 0)).toEqual({ kind: "direct", name: "device_local" });
    expect([p.nameOf(0, 1), p.nameOf(0, 2), p.nameOf(3, 4)]).toEqual(["device_local", "host", "unknown"]);
  });

  test("fixed dispatch cost + bytes at HBM copy bandwidth; an NVLink profile does not apply", () => {
    const profile = { blockBytes: QWEN3_06B_BLOCK, pairs: { "0-1": { "1": 5, "8": 9 } } };
    const m = new TransferCostModel(resolveTransferConfig({ profile }));
    expect(m.estimate(0, 1, 1, QWEN3_06B_BLOCK).source).toBe("profile"); // no report yet
    m.paths.observe(0, DEVICE_LOCAL_REPORT);
    const one = m.estimate(0, 1, 1, QWEN3_06B_BLOCK);
    expect(one.source).toBe("device-local-fallback");
    expect(one.ms).toBeCloseTo(0.75 + QWEN3_06B_BLOCK / 1.5e9, 9);
    // 64 blocks (1.9 GB): the bandwidth term dominates, ~1.25 ms at 1.5 TB/s.
    expect(m.estimate(0, 1, 64, QWEN3_06B_BLOCK).ms).toBeCloseTo(0.75 + (64 * QWEN3_06B_BLOCK) / 1.5e9, 9);
    // Cheaper than the NVLink cold start for large payloads, dearer than its zero fixed cost for tiny ones.
    const nvlink = new TransferCostModel(resolveTransferConfig());
    expect(m.estimate(0, 1, 64, QWEN3_06B_BLOCK).ms).toBeLessThan(nvlink.estimate(0, 1, 64, QWEN3_06B_BLOCK).ms);
  });

  test("the prior's constants are tunable and validated; completed plans replace it", () => {
    const m = new TransferCostModel(
      resolveTransferConfig({ deviceLocalFixedMs: 2, deviceLocalBytesPerMs: 1000, ewmaAlpha: 0.5 }),
    );
    m.paths.observe(1, { data_path_device_local_peer_0: 1 });
    expect(m.estimate(0, 1, 3, 500)).toEqual({ ms: 3.5, source: "device-local-fallback", bytes: 1500, waitMs: 0 });
    m.observe(0, 1, 2, { publishMs: 0.9 });
    expect(m.estimate(0, 1, 3, 500)).toMatchObject({ ms: 0.9, source: "observed" }); // bucket 2 covers 2..3
    m.observe(0, 1, 2, { publishMs: 1.1 });
    expect(m.estimate(0, 1, 2, 500).ms).toBeCloseTo(1.0, 9);
    expect(m.estimate(0, 1, 4, 500).source).toBe("device-local-fallback"); // other buckets keep the prior
    expect(() => resolveTransferConfig({ deviceLocalBytesPerMs: 0 })).toThrow(
      "transfers.deviceLocalBytesPerMs must be > 0, got 0",
    );
    expect(() => resolveTransferConfig({ deviceLocalFixedMs: -1 })).toThrow(
      "transfers.deviceLocalFixedMs must be a finite number >= 0, got -1",
    );
  });
});

describe("the cost gate on a device-local pair", () => {
  const shared = promptTokens(1, 800); // 50 blocks of 16 tokens
  const H = hashesOf(shared);

  /** Ranks 0 and 1 on CUDA device 0: rank 0 holds `held` blocks of the prefix, rank 1 the first `dstHeld`. */
  function env(held: number, dstHeld: number): PlannerEnv {
    const topology = new NvlinkTopology(2, [], [0, 0]);
    expect(topology.kind(0, 1)).toBe("same-device");
    const s = new GlobalScheduler({ topology });
    s.applySnapshot(snapshot(0, { entries: chainEntries(H.slice(0, held), 100) }));
    s.applySnapshot(snapshot(1, { entries: chainEntries(H.slice(0, dstHeld), 200) }));
    const config = resolveTransferConfig();
    const cost = new TransferCostModel(config);
    cost.paths.observe(0, DEVICE_LOCAL_REPORT);
    const q: RouteQuery = { requestId: "q", blockHashes: hashesOf(shared), promptTokens: shared.length, maxTokens: 8 };
    return {
      ctx: new RoutingContext(q, s.blocks, s.reservations, s.topology, s.config),
      config,
      cost,
      blockBytes: () => QWEN3_06B_BLOCK / 16, // a 16-token block of the Qwen3-0.6B shape
      inbound: () => false,
      movingOut: () => false,
      inboundBlocks: () => 0,
    };
  }
  const reason = (v: ReturnType<typeof planPrefixCopy>) => (v.ok ? "ok" : v.reason);

  test("a long prefix pays: admitted, priced by the device-local prior", () => {
    const v = planPrefixCopy(env(50, 0), 1, true);
    if (!v.ok) throw new Error(v.detail);
    expect(v.plan).toMatchObject({ src: 0, dst: 1, estimateSource: "device-local-fallback" });
    expect(v.plan.blocks).toHaveLength(49); // never the block holding the last prompt token
    expect(v.plan.savedMs).toBeGreaterThan(2 * v.plan.estimatedMs);
  });

  test("a tiny prefix does not pay for the fixed cost; a destination without room gets nothing", () => {
    // One missing block: 16 tokens x 0.02 ms = 0.32 ms of prefill against ~0.75 ms of transfer.
    expect(reason(planPrefixCopy(env(2, 1), 1, true))).toBe("cost");
    expect(reason(planPrefixCopy(env(50, 0), 1, false))).toBe("target_capacity");
  });
});
