// The transfers.dataPath knob; which peers a worker tries NCCL pairs with (mode, backend,
// devices); and openWorkerDataPath end to end against an in-process control plane with fake NCCL
// pairs: "auto" serves partners whose pair came up over NCCL and the rest over the host path;
// "nccl" turns a pair that cannot come up into a DataPathError naming the pair; the CPU backend
// opens the host path without any rendezvous.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { KvCache } from "../../../ffi/native.ts";
import { ControlPlane } from "../../../lib/global/control_plane.ts";
import { resolveTransferConfig } from "../../../lib/global/transfer_config.ts";
import { NvlinkTopology } from "../../../lib/global/topology.ts";
import type { NcclPairFactory } from "../../../lib/local/nccl_pair_setup.ts";
import { DataPathError, ncclPeerRanks, openWorkerDataPath, type WorkerDataPathConfig } from "../../../lib/local/worker_data_path.ts";
import { tempSocketPath } from "../../../lib/runtime/unix_socket.ts";
import { FakePair } from "./fake_nccl_pair.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const config = (mode: WorkerDataPathConfig["mode"], peers: [number, number][]): WorkerDataPathConfig => ({
  mode, peers: peers.map(([rank, gpu]) => ({ rank, gpu })), ncclTimeoutMs: 1000, rendezvousTimeoutMs: 2000,
});

test("transfers.dataPath defaults to auto; a bad value or NCCL timeout is a RangeError naming it", () => {
  expect(resolveTransferConfig("force")).toMatchObject({ dataPath: "auto", ncclTimeoutMs: 30_000 });
  expect(resolveTransferConfig({ dataPath: "host" }).dataPath).toBe("host");
  expect(() => resolveTransferConfig({ dataPath: "gpu" as never })).toThrow('transfers.dataPath must be one of auto, host, nccl, got "gpu"');
  expect(() => resolveTransferConfig({ ncclTimeoutMs: 0 })).toThrow("transfers.ncclTimeoutMs must be > 0, got 0");
});

describe("ncclPeerRanks", () => {
  test("cuda tries every partner on another device; host mode and the CPU backend try none", () => {
    expect(ncclPeerRanks({ rank: 0, gpu: 0, backend: "cuda", config: config("auto", [[2, 2], [1, 1], [3, 0]]) })).toEqual([1, 2]);
    expect(ncclPeerRanks({ rank: 0, gpu: 0, backend: "cuda", config: config("host", [[1, 1]]) })).toEqual([]);
    expect(ncclPeerRanks({ rank: 0, gpu: 0, backend: "cpu", config: config("auto", [[1, 1]]) })).toEqual([]);
    expect(ncclPeerRanks({ rank: 0, gpu: 0, backend: "cuda" })).toEqual([]);
  });

  test('"nccl" that cannot be honoured is a DataPathError naming the rank and why', () => {
    expect(() => ncclPeerRanks({ rank: 1, gpu: 0, backend: "cpu", config: config("nccl", [[0, 0]]) })).toThrow(/dataPath is "nccl" but rank 1 runs the cpu backend/);
    expect(() => ncclPeerRanks({ rank: 1, gpu: 3, backend: "cuda", config: config("nccl", [[0, 3]]) })).toThrow(DataPathError);
    expect(() => ncclPeerRanks({ rank: 1, gpu: 3, backend: "cuda", config: config("nccl", [[0, 3]]) })).toThrow(/shares CUDA device 3 with rank 0/);
  });
});

describe("openWorkerDataPath", () => {
  async function setup() {
    const plane = await ControlPlane.listen({ socketPath: tempSocketPath("wdp"), epoch: 1, pid: 1, heartbeat: false, log: () => {}, topology: new NvlinkTopology(3, [[0, 1], [0, 2]]) });
    cleanups.push(() => plane.close());
    const dir = mkdtempSync(`${tmpdir()}/lmp-wdp-`);
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // Only what the host path (blockBytes, gather, scatter) and the NCCL path (handle, numBlocks) read.
    const kv = { handle: 1n, numBlocks: 8, blockBytes: 4, gather: (ids: Int32Array) => new Uint8Array(ids.length * 4), scatter: () => {} } as unknown as KvCache;
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
    const open = (rank: number, gpu: number, backend: "cpu" | "cuda", c: WorkerDataPathConfig, f: NcclPairFactory, logs: string[] = []) =>
      openWorkerDataPath({ rank, epoch: 1, gpu, backend, kv, peerSocketDir: dir, controlSocketPath: plane.socketPath, config: c, heartbeat: false, factory: f, log: (l) => logs.push(l) }).then((p) => {
        cleanups.push(() => p.close());
        return p;
      });
    return { plane, open, factory };
  }

  test('"auto": NCCL to the partner whose pair came up, the host path to the others', async () => {
    const { plane, open, factory } = await setup();
    // Pair 0-2 fails on both sides (as a real NCCL timeout does).
    const [p0, p1, p2] = await Promise.all([open(0, 0, "cuda", config("auto", [[1, 1], [2, 2]]), factory(0, [1])), open(1, 1, "cuda", config("auto", [[0, 0]]), factory(1)), open(2, 2, "cuda", config("auto", [[0, 0]]), factory(2, [0]))]);
    expect([p0.pathOf(1), p0.pathOf(2), p1.pathOf(0), p1.pathOf(2), p2.pathOf(0)]).toEqual(["nccl", "host", "nccl", "host", "host"]);
    expect(p0.status()).toEqual([{ peerRank: 1, ok: true }, { peerRank: 2, ok: false, error: expect.stringContaining("create failed on rank 0") }]);
    expect(p0.counters()).toMatchObject({ data_path_nccl_peers: 1, data_path_nccl_peer_1: 1, data_path_nccl_peer_2: 0 });
    expect(plane.nccl.counters().nccl_ids_relayed).toBe(2);
  });

  test('"nccl": a pair that does not come up is a start-up error naming it', async () => {
    const { open, factory } = await setup();
    const results = await Promise.allSettled([open(0, 0, "cuda", config("nccl", [[1, 1]]), factory(0, [0])), open(1, 1, "cuda", config("nccl", [[0, 0]]), factory(1))]);
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
    expect(p.counters()).toMatchObject({ data_path_nccl_peers: 0 });
    expect(plane.nccl.counters().nccl_offers).toBe(0);
  });
});
