// CUDA IPC pair start-up through a real in-process control plane (Unix sockets), with fake
// exporters/mappers standing in for the native library: each side maps exactly its partner's handle
// with the partner's block count, a pair is up only when both sides mapped (a side whose partner
// failed unmaps again), and an unavailable exporter, a failing map, a block-shape mismatch, a
// non-NVLink pair and a partner that never comes each fail their pair alone, on both sides, with one
// line naming the pair and the cause.
import { afterEach, describe, expect, test } from "bun:test";
import { ControlPlane } from "../../../../../lib/processes/control_plane.ts";
import { NvlinkTopology } from "../../../../../lib/global/topology.ts";
import { setUpIpcPeers } from "../../../../../lib/transfer/paths/ipc/ipc_peer_setup.ts";
import { tempSocketPath } from "../../../../../lib/runtime/unix_socket.ts";
import { fakeIpcFactory as fakeFactory } from "./fake_ipc.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function controlPlane(pairs: [number, number][], worldSize = 4): Promise<ControlPlane> {
  const plane = await ControlPlane.listen({
    socketPath: tempSocketPath("ipc"),
    epoch: 1,
    pid: 1,
    heartbeat: false,
    log: () => {},
    topology: new NvlinkTopology(worldSize, pairs),
  });
  cleanups.push(() => plane.close());
  return plane;
}

function worker(
  plane: ControlPlane,
  rank: number,
  peers: number[],
  f: ReturnType<typeof fakeFactory>,
  logs: string[],
  rendezvousTimeoutMs = 5000,
) {
  return setUpIpcPeers({
    rank,
    epoch: 1,
    peers,
    controlSocketPath: plane.socketPath,
    factory: f.factory,
    rendezvousTimeoutMs,
    fallback: "try NCCL next",
    heartbeat: false,
    log: (l) => logs.push(l),
  });
}

describe("CUDA IPC pair start-up", () => {
  test("three fully linked ranks: each maps exactly its partners' caches", async () => {
    const plane = await controlPlane([[0, 1], [0, 2], [1, 2]], 3);
    const logs: string[] = [];
    const f = [0, 1, 2].map((r) => fakeFactory(r));
    const late = new Promise<void>((r) => setTimeout(r, 50)).then(() => worker(plane, 2, [1, 0], f[2]!, logs));
    const [s0, s1, s2] = await Promise.all([
      worker(plane, 0, [2, 1], f[0]!, logs),
      worker(plane, 1, [0, 2], f[1]!, logs),
      late,
    ]);
    expect([s0, s1, s2].map((s) => [...s.views.keys()].sort())).toEqual([[1, 2], [0, 2], [0, 1]]);
    expect([s0, s1, s2].every((s) => s.failed.size === 0)).toBe(true);
    // Rank r opened the handle of each partner p (bytes p + 1) with p's block count (10 + p).
    expect(f[0]!.opened.sort((a, b) => a.handleByte - b.handleByte)).toEqual([{ handleByte: 2, numBlocks: 11 }, {
      handleByte: 3,
      numBlocks: 12,
    }]);
    expect(s1.views.get(2)!.numBlocks).toBe(12);
    expect(logs.filter((l) => /CUDA IPC pair \d-\d up: rank \d's cache \(1\d blocks\) mapped/.test(l))).toHaveLength(6);
    expect(plane.ipc.counters()).toEqual({
      ipc_offers: 12,
      ipc_offers_refused: 0,
      ipc_handles_relayed: 3,
      ipc_pairs_opened: 3,
    });
  });

  test("a side that cannot map: both sides fail the pair and the side that mapped unmaps", async () => {
    const plane = await controlPlane([[0, 1]]);
    const logs: string[] = [];
    const f0 = fakeFactory(0),
      f1 = fakeFactory(1, { openFails: "lp_kv_ipc_open failed: peer access is not supported between devices 1 and 0" });
    const [s0, s1] = await Promise.all([worker(plane, 0, [1], f0, logs), worker(plane, 1, [0], f1, logs)]);
    expect(s0.views.size + s1.views.size).toBe(0);
    expect(f0.views.map((v) => v.disposed)).toEqual([1]);
    expect(s1.failed.get(0)).toBe(
      "cannot map rank 0's cache (10 blocks): lp_kv_ipc_open failed: peer access is not supported between devices 1 and 0",
    );
    expect(s0.failed.get(1)).toBe(`rank 1: ${s1.failed.get(0)}`);
    expect(logs.sort()).toEqual([
      `[worker 0] CUDA IPC pair 0-1 is not available, plans with rank 1 try NCCL next: ${s0.failed.get(1)}`,
      `[worker 1] CUDA IPC pair 0-1 is not available, plans with rank 0 try NCCL next: ${s1.failed.get(0)}`,
    ]);
    expect(plane.ipc.counters()).toMatchObject({ ipc_handles_relayed: 1, ipc_pairs_opened: 0 });
  });

  test("no CUDA IPC on one side, or caches of different block shapes: nothing is mapped, both sides say why", async () => {
    const plane = await controlPlane([[0, 1], [2, 3]]);
    const logs: string[] = [];
    const f0 = fakeFactory(0),
      f1 = fakeFactory(1, { exportFails: "lp_kv_ipc_handle: CUDA IPC handles are not available on the CPU backend" });
    const f2 = fakeFactory(2), f3 = fakeFactory(3, { blockBytes: 8192 });
    const [s0, s1, s2, s3] = await Promise.all([
      worker(plane, 0, [1], f0, logs),
      worker(plane, 1, [0], f1, logs),
      worker(plane, 2, [3], f2, logs),
      worker(plane, 3, [2], f3, logs),
    ]);
    expect(f0.opened.length + f1.opened.length + f2.opened.length + f3.opened.length).toBe(0);
    expect(s1.failed.get(0)).toBe(
      "cannot export rank 1's KV cache: lp_kv_ipc_handle: CUDA IPC handles are not available on the CPU backend",
    );
    expect(s0.failed.get(1)).toBe(`rank 1: ${s1.failed.get(0)}`);
    expect(s2.failed.get(3)).toBe("rank 3's blocks have 8192 bytes, rank 2's 4096");
    expect(s3.failed.get(2)).toBe("rank 2's blocks have 4096 bytes, rank 3's 8192");
    expect(logs).toHaveLength(4);
  });

  test("a non-NVLink pair and a partner that never comes fail only their pair", async () => {
    const plane = await controlPlane([[0, 1], [1, 2]]);
    const logs: string[] = [];
    const f = [0, 1, 2].map((r) => fakeFactory(r));
    // Rank 0 also asks for 0-3 (not a pair). Later, rank 2 waits for rank 1, which is done and never comes.
    const [s0, s1] = await Promise.all([worker(plane, 0, [1, 3], f[0]!, logs), worker(plane, 1, [0], f[1]!, logs)]);
    expect(s0.views.has(1) && s1.views.has(0)).toBe(true);
    expect(s0.failed.get(3)).toBe("ranks 0 and 3 are not direct partners (NVLink or one device) of this engine");
    const s2 = await worker(plane, 2, [1], f[2]!, logs, 150);
    expect(s2.failed.get(1)).toBe(
      "rendezvous through the control plane failed: rank 1 did not reach the rendezvous within 150 ms",
    );
    expect(logs.filter((l) => l.includes("is not available"))).toHaveLength(2);
  });
});
