// The transfers.dataPath knob; which peers a worker tries direct paths with (mode, backend,
// devices); and openWorkerDataPath end to end against an in-process control plane with fake CUDA
// IPC mappers and NCCL pairs: "auto" serves each partner over CUDA IPC where it comes up, else over
// NCCL, else over the host path, with one log line per fallback naming the pair and the cause;
// "ipc" / "nccl" turn a pair that cannot come up into a DataPathError naming the pair, and "nccl"
// tries no CUDA IPC; the CPU backend opens the host path without any rendezvous.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { KvCache } from "../../../../ffi/native.ts";
import { ControlPlane } from "../../../../lib/processes/control_plane.ts";
import { resolveTransferConfig } from "../../../../lib/transfer/control/transfer_config.ts";
import { NvlinkTopology } from "../../../../lib/global/topology.ts";
import type { NcclPairFactory } from "../../../../lib/transfer/paths/nccl/nccl_pair_setup.ts";
import type { IpcViewFactory } from "../../../../lib/transfer/paths/ipc/ipc_peer_setup.ts";
import {
  DataPathError,
  directPeerRanks,
  openWorkerDataPath,
  type WorkerDataPathConfig,
} from "../../../../lib/transfer/worker/worker_data_path.ts";
import { tempSocketPath } from "../../../../lib/runtime/unix_socket.ts";
import { fakeIpcFactory } from "../paths/ipc/fake_ipc.ts";
import { FakePair } from "../paths/nccl/fake_nccl_pair.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const config = (mode: WorkerDataPathConfig["mode"], peers: [number, number][]): WorkerDataPathConfig => ({
  mode,
  peers: peers.map(([rank, gpu]) => ({ rank, gpu })),
  ncclTimeoutMs: 1000,
  rendezvousTimeoutMs: 2000,
});

test("transfers.dataPath defaults to auto; a bad value or timeout is a RangeError naming it", () => {
  expect(resolveTransferConfig("force")).toMatchObject({
    dataPath: "auto",
    ncclTimeoutMs: 30_000,
    ipcTimeoutMs: 10_000,
  });
  expect(resolveTransferConfig({ dataPath: "host" }).dataPath).toBe("host");
  expect(resolveTransferConfig({ dataPath: "ipc" }).dataPath).toBe("ipc");
  expect(() => resolveTransferConfig({ dataPath: "gpu" as never })).toThrow(
    'transfers.dataPath must be one of auto, host, ipc, nccl, got "gpu"',
  );
  expect(() => resolveTransferConfig({ ncclTimeoutMs: 0 })).toThrow("transfers.ncclTimeoutMs must be > 0, got 0");
  expect(() => resolveTransferConfig({ ipcTimeoutMs: 0 })).toThrow("transfers.ipcTimeoutMs must be > 0, got 0");
});

describe("directPeerRanks", () => {
  test("cuda tries every partner, split by device; host mode and the CPU backend try none", () => {
    expect(directPeerRanks({ rank: 0, gpu: 0, backend: "cuda", config: config("auto", [[2, 2], [1, 1], [3, 0]]) }))
      .toEqual({ sameDevice: [3], otherDevice: [1, 2] });
    expect(directPeerRanks({ rank: 0, gpu: 0, backend: "cuda", config: config("ipc", [[2, 2], [1, 1]]) })).toEqual({
      sameDevice: [],
      otherDevice: [1, 2],
    });
    // "ipc" covers two ranks of one device: the device-local copy is CUDA IPC on that device.
    expect(directPeerRanks({ rank: 1, gpu: 3, backend: "cuda", config: config("ipc", [[0, 3]]) })).toEqual({
      sameDevice: [0],
      otherDevice: [],
    });
    const none = { sameDevice: [], otherDevice: [] };
    expect(directPeerRanks({ rank: 0, gpu: 0, backend: "cuda", config: config("host", [[1, 1]]) })).toEqual(none);
    expect(directPeerRanks({ rank: 0, gpu: 0, backend: "cpu", config: config("auto", [[1, 1], [2, 0]]) })).toEqual(
      none,
    );
    expect(directPeerRanks({ rank: 0, gpu: 0, backend: "cuda" })).toEqual(none);
  });

  test('"ipc" or "nccl" that cannot be honoured is a DataPathError naming the rank and why', () => {
    expect(() => directPeerRanks({ rank: 1, gpu: 0, backend: "cpu", config: config("nccl", [[0, 0]]) })).toThrow(
      /dataPath is "nccl" but rank 1 runs the cpu backend, which has no NCCL/,
    );
    expect(() => directPeerRanks({ rank: 1, gpu: 0, backend: "cpu", config: config("ipc", [[0, 0]]) })).toThrow(
      /dataPath is "ipc" but rank 1 runs the cpu backend, which has no CUDA IPC/,
    );
    expect(() => directPeerRanks({ rank: 1, gpu: 3, backend: "cuda", config: config("nccl", [[0, 3]]) })).toThrow(
      DataPathError,
    );
    expect(() => directPeerRanks({ rank: 1, gpu: 3, backend: "cuda", config: config("nccl", [[2, 2], [0, 3]]) }))
      .toThrow(/"nccl" but rank 1 shares CUDA device 3 with rank 0; an NCCL pair needs two devices/);
  });
});

describe("openWorkerDataPath", () => {
  async function setup() {
    const plane = await ControlPlane.listen({
      socketPath: tempSocketPath("wdp"),
      epoch: 1,
      pid: 1,
      heartbeat: false,
      log: () => {},
      topology: new NvlinkTopology(4, [[0, 1], [0, 2], [0, 3]]),
    });
    cleanups.push(() => plane.close());
    const dir = mkdtempSync(`${tmpdir()}/lmp-wdp-`);
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // Only what the host path (blockBytes, gather, scatter) and the NCCL path (handle, numBlocks) read.
    const kv = {
      handle: 1n,
      numBlocks: 8,
      blockBytes: 4,
      gather: (ids: Int32Array) => new Uint8Array(ids.length * 4),
      scatter: () => {},
    } as unknown as KvCache;
    /** Pairs of rank `rank`; its creates number `failCalls` (0 = its first) throw. */
    const factory = (rank: number, failCalls: number[] = []): NcclPairFactory => {
      let calls = 0;
      return {
        unavailable: () => undefined,
        uniqueId: () => new Uint8Array(128).fill(rank),
        createPair: (_id, pairRank) => {
          if (failCalls.includes(calls++)) throw new Error(`create failed on rank ${rank} (pair rank ${pairRank})`);
          return new FakePair();
        },
      };
    };
    /** CUDA IPC of rank `rank`: mapping its partners' caches fails when `mapFails`. */
    const ipc = (rank: number, mapFails = false): IpcViewFactory =>
      fakeIpcFactory(rank, {
        blockBytes: 4,
        ...(mapFails ? { openFails: `peer access from rank ${rank}'s device is not supported` } : {}),
      }).factory;
    const open = (
      rank: number,
      gpu: number,
      backend: "cpu" | "cuda",
      c: WorkerDataPathConfig,
      f: NcclPairFactory,
      logs: string[] = [],
      ipcFactory: IpcViewFactory = ipc(rank),
    ) =>
      openWorkerDataPath({
        rank,
        epoch: 1,
        gpu,
        backend,
        kv,
        peerSocketDir: dir,
        controlSocketPath: plane.socketPath,
        config: c,
        heartbeat: false,
        factory: f,
        ipcFactory,
        log: (l) => logs.push(l),
      }).then((p) => {
        cleanups.push(() => p.close());
        return p;
      });
    return { plane, open, factory, ipc };
  }

  test('"auto": per partner CUDA IPC, else NCCL, else the host path; one line per fallback', async () => {
    const { plane, open, factory, ipc } = await setup();
    const logs: string[][] = [[], [], [], []];
    // 0-1: CUDA IPC. 0-2: rank 2 cannot map, so NCCL. 0-3: neither (NCCL fails on both sides, as a real timeout does).
    const [p0, p1, p2, p3] = await Promise.all([
      open(0, 0, "cuda", config("auto", [[1, 1], [2, 2], [3, 3]]), factory(0, [1]), logs[0]),
      open(1, 1, "cuda", config("auto", [[0, 0]]), factory(1), logs[1]),
      open(2, 2, "cuda", config("auto", [[0, 0]]), factory(2), logs[2], ipc(2, true)),
      open(3, 3, "cuda", config("auto", [[0, 0]]), factory(3, [0]), logs[3], ipc(3, true)),
    ]);
    expect([p0.pathOf(1), p0.pathOf(2), p0.pathOf(3), p1.pathOf(0), p2.pathOf(0), p3.pathOf(0)]).toEqual([
      "ipc",
      "nccl",
      "host",
      "ipc",
      "nccl",
      "host",
    ]);
    expect(p0.status()).toEqual([
      { peerRank: 1, ok: true },
      { peerRank: 2, ok: true },
      {
        peerRank: 3,
        ok: false,
        error: expect.stringMatching(
          /^ipc: rank 3: cannot map rank 0's cache .*; nccl: creating the pair .*create failed on rank 0/,
        ),
      },
    ]);
    expect(p0.counters()).toMatchObject({
      data_path_ipc_peers: 1,
      data_path_ipc_peer_1: 1,
      data_path_ipc_peer_2: 0,
      data_path_ipc_peer_3: 0,
      data_path_nccl_peers: 1,
      data_path_nccl_peer_2: 1,
      data_path_nccl_peer_3: 0,
    });
    expect(p0.counters().data_path_nccl_peer_1).toBeUndefined(); // 0-1 never tried NCCL
    // Rank 0: one line per pair that falls back (0-2 and 0-3 from CUDA IPC, 0-3 from NCCL), naming the pair and the cause.
    const fallbacks = logs[0]!.filter((l) => l.includes("is not available"));
    expect(fallbacks).toEqual([
      expect.stringMatching(
        /^\[worker 0\] CUDA IPC pair 0-2 is not available, plans with rank 2 try NCCL next: rank 2: cannot map rank 0's cache \(10 blocks\): peer access/,
      ),
      expect.stringMatching(
        /^\[worker 0\] CUDA IPC pair 0-3 is not available, plans with rank 3 try NCCL next: rank 3: cannot map/,
      ),
      expect.stringMatching(
        /^\[worker 0\] NCCL pair 0-3 is not available, plans with rank 3 use the host path: creating the pair/,
      ),
    ]);
    expect(logs[1]!.filter((l) => l.includes("is not available"))).toEqual([]);
    expect(plane.ipc.counters()).toMatchObject({ ipc_handles_relayed: 3, ipc_pairs_opened: 1 });
    expect(plane.nccl.counters()).toMatchObject({ nccl_offers: 4, nccl_ids_relayed: 2 });
  });

  test('"ipc": a pair that does not come up is a start-up error naming it; "nccl" tries no CUDA IPC', async () => {
    const { plane, open, factory, ipc } = await setup();
    const results = await Promise.allSettled([
      open(0, 0, "cuda", config("ipc", [[1, 1]]), factory(0)),
      open(1, 1, "cuda", config("ipc", [[0, 0]]), factory(1), [], ipc(1, true)),
    ]);
    for (const r of results) {
      expect(r.status).toBe("rejected");
      const err = (r as PromiseRejectedResult).reason as Error;
      expect(err).toBeInstanceOf(DataPathError);
      expect(err.message).toMatch(
        /^transfers.dataPath is "ipc" but CUDA IPC pairs did not come up \(0-1: .*peer access from rank 1's device is not supported/,
      );
    }
    expect(plane.nccl.counters().nccl_offers).toBe(0);
    const before = plane.ipc.counters().ipc_offers;
    const [n0, n1] = await Promise.all([
      open(0, 0, "cuda", config("nccl", [[1, 1]]), factory(0)),
      open(1, 1, "cuda", config("nccl", [[0, 0]]), factory(1)),
    ]);
    expect([n0.pathOf(1), n1.pathOf(0)]).toEqual(["nccl", "nccl"]);
    expect(plane.ipc.counters().ipc_offers).toBe(before);
  });

  test('"nccl": a pair that does not come up is a start-up error naming it', async () => {
    const { open, factory } = await setup();
    const results = await Promise.allSettled([
      open(0, 0, "cuda", config("nccl", [[1, 1]]), factory(0, [0])),
      open(1, 1, "cuda", config("nccl", [[0, 0]]), factory(1)),
    ]);
    expect(results[0]!.status).toBe("rejected");
    const err = (results[0] as PromiseRejectedResult).reason as Error;
    expect(err).toBeInstanceOf(DataPathError);
    expect(err.message).toMatch(/NCCL pairs did not come up \(0-1: creating the pair .* create failed on rank 0/);
    expect(results[1]!.status).toBe("fulfilled"); // its side came up; the control plane reconciles it at run time
  });

  test("the CPU backend opens the host path with no rendezvous traffic", async () => {
    const { plane, open, factory } = await setup();
    const p = await open(0, 0, "cpu", config("auto", [[1, 0]]), factory(0));
    expect(p.pathOf(1)).toBe("host");
    expect(p.counters()).toMatchObject({ data_path_nccl_peers: 0, data_path_ipc_peers: 0 });
    expect(plane.nccl.counters().nccl_offers).toBe(0);
    expect(plane.ipc.counters().ipc_offers).toBe(0);
  });

  test('"auto": a partner on the same device gets the device-local path; a plan moves over it', async () => {
    const { plane, open, factory } = await setup();
    const logs: string[][] = [[], []];
    const [p0, p1] = await Promise.all([
      open(0, 0, "cuda", config("auto", [[1, 0]]), factory(0), logs[0]),
      open(1, 0, "cuda", config("auto", [[0, 0]]), factory(1), logs[1]),
    ]);
    expect([p0.pathOf(1), p1.pathOf(0)]).toEqual(["device_local", "device_local"]);
    expect(logs[0]).toEqual([
      expect.stringMatching(/^\[worker 0\] device-local \(CUDA IPC on device 0\) pair 0-1 up: rank 1's cache/),
    ]);
    expect(plane.nccl.counters().nccl_offers).toBe(0); // NCCL cannot pair a device with itself: never tried
    expect(plane.ipc.counters()).toMatchObject({ ipc_handles_relayed: 1, ipc_pairs_opened: 1 });
    // The one-sided copy: the destination's go-ahead at prepare, the source copies and reports.
    expect(p1.receivesAtPrepare(0)).toBe(true);
    const job = { planId: "d1", srcBlocks: Int32Array.of(1, 2), dstBlocks: Int32Array.of(5, 6) };
    const [sent, received] = await Promise.all([
      p0.send({ ...job, peerRank: 1 }),
      p1.receive({ ...job, peerRank: 0 }),
    ]);
    expect([sent, received]).toEqual([8, 8]);
    expect(p0.counters()).toMatchObject({
      data_path_device_local_peers: 1,
      data_path_device_local_peer_1: 1,
      data_path_device_local_sent_bytes: 8,
      data_path_ipc_peers: 0,
      data_path_ipc_sent_bytes: 0,
      data_path_host_sent_bytes: 0,
    });
    expect(p1.counters()).toMatchObject({ data_path_device_local_received_bytes: 8, data_path_host_received_bytes: 0 });
  });

  test('"auto": partners on both kinds of device; a same-device mapping that fails goes to the host path', async () => {
    const { plane, open, factory, ipc } = await setup();
    const logs: string[][] = [[], [], [], []];
    // Ranks 0, 1, 3 on device 0 (1 cannot map), rank 2 on device 2.
    const [p0, p1, p2, p3] = await Promise.all([
      open(0, 0, "cuda", config("auto", [[1, 0], [2, 2], [3, 0]]), factory(0), logs[0]),
      open(1, 0, "cuda", config("auto", [[0, 0]]), factory(1), logs[1], ipc(1, true)),
      open(2, 2, "cuda", config("auto", [[0, 0]]), factory(2), logs[2]),
      open(3, 0, "cuda", config("auto", [[0, 0]]), factory(3), logs[3]),
    ]);
    expect([p0.pathOf(1), p0.pathOf(2), p0.pathOf(3), p1.pathOf(0), p2.pathOf(0), p3.pathOf(0)]).toEqual([
      "host",
      "ipc",
      "device_local",
      "host",
      "ipc",
      "device_local",
    ]);
    expect(logs[0]!.filter((l) => l.includes("is not available"))).toEqual([
      expect.stringMatching(
        /^\[worker 0\] device-local \(CUDA IPC on device 0\) pair 0-1 is not available, plans with rank 1 use the host path: rank 1: cannot map/,
      ),
    ]);
    expect(plane.nccl.counters().nccl_offers).toBe(0);
    expect(p0.counters()).toMatchObject({
      data_path_device_local_peers: 1,
      data_path_device_local_peer_1: 0,
      data_path_device_local_peer_3: 1,
      data_path_ipc_peers: 1,
      data_path_ipc_peer_2: 1,
    });
    expect(p0.status()).toEqual([
      { peerRank: 1, ok: false, error: expect.stringMatching(/^device_local: rank 1: cannot map rank 0's cache/) },
      { peerRank: 2, ok: true },
      { peerRank: 3, ok: true },
    ]);
  });

  test('"ipc" accepts a same-device partner (device-local); start-up fails when it cannot map', async () => {
    const { open, factory, ipc } = await setup();
    const [a0, a1] = await Promise.all([
      open(0, 0, "cuda", config("ipc", [[1, 0]]), factory(0)),
      open(1, 0, "cuda", config("ipc", [[0, 0]]), factory(1)),
    ]);
    expect([a0.pathOf(1), a1.pathOf(0)]).toEqual(["device_local", "device_local"]);
    const results = await Promise.allSettled([
      open(0, 0, "cuda", config("ipc", [[1, 0]]), factory(0)),
      open(1, 0, "cuda", config("ipc", [[0, 0]]), factory(1), [], ipc(1, true)),
    ]);
    for (const r of results) {
      expect(r.status).toBe("rejected");
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(DataPathError);
      expect(((r as PromiseRejectedResult).reason as Error).message).toMatch(
        /^transfers.dataPath is "ipc" but CUDA IPC pairs did not come up \(0-1: /,
      );
    }
  });
});
