// NCCL pair start-up through a real in-process control plane (Unix sockets), with fake pair
// factories standing in for the native library: the lower rank's unique id reaches its partner
// (and only the partner), both join with the right pair ranks once both arrived, pairs come up in
// ascending partner order; an unavailable side, a failing create, a non-NVLink pair and a partner
// that never comes each fail that pair alone with a line naming it and the cause. After start-up,
// a pair one side lost is dropped on the other side (nccl_pair_down).
import { afterEach, describe, expect, test } from "bun:test";
import { ControlPlane } from "../../../../../lib/processes/control_plane.ts";
import { NvlinkTopology } from "../../../../../lib/global/topology.ts";
import { type NcclPairFactory, setUpNcclPairs } from "../../../../../lib/transfer/paths/nccl/nccl_pair_setup.ts";
import { Connection } from "../../../../../lib/protocol/connection.ts";
import type { Message } from "../../../../../lib/protocol/messages.ts";
import { connectUnix, tempSocketPath } from "../../../../../lib/runtime/unix_socket.ts";
import { FakePair } from "./fake_nccl_pair.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function controlPlane(pairs: [number, number][], worldSize = 4): Promise<ControlPlane> {
  const plane = await ControlPlane.listen({
    socketPath: tempSocketPath("nccl"),
    epoch: 1,
    pid: 1,
    heartbeat: false,
    log: () => {},
    topology: new NvlinkTopology(worldSize, pairs),
  });
  cleanups.push(() => plane.close());
  return plane;
}

/** A factory whose ids are 128 copies of (rank + 1) and whose pairs record how they were made. */
function fakeFactory(rank: number, o: { unavailable?: string; createFails?: string } = {}) {
  const created: { peerIdByte: number; pairRank: number; device: number }[] = [];
  const factory: NcclPairFactory = {
    unavailable: () => o.unavailable,
    uniqueId: () => new Uint8Array(128).fill(rank + 1),
    createPair: (id, pairRank, device) => {
      if (o.createFails) throw new Error(o.createFails);
      created.push({ peerIdByte: id[0]!, pairRank, device });
      return new FakePair();
    },
  };
  return { factory, created };
}

function worker(
  plane: ControlPlane,
  rank: number,
  peers: number[],
  f: ReturnType<typeof fakeFactory>,
  logs: string[],
  rendezvousTimeoutMs = 5000,
) {
  return setUpNcclPairs({
    rank,
    epoch: 1,
    device: 10 + rank,
    peers,
    controlSocketPath: plane.socketPath,
    factory: f.factory,
    timeoutMs: 1000,
    rendezvousTimeoutMs,
    heartbeat: false,
    log: (l) => logs.push(l),
  });
}

describe("NCCL pair start-up", () => {
  test("three fully linked ranks: each pair joins with the lower rank's id, in ascending partner order", async () => {
    const plane = await controlPlane([[0, 1], [0, 2], [1, 2]], 3);
    const logs: string[] = [];
    const f = [0, 1, 2].map((r) => fakeFactory(r));
    const late = new Promise<void>((r) => setTimeout(r, 50)).then(() => worker(plane, 2, [1, 0], f[2]!, logs));
    const [s0, s1, s2] = await Promise.all([
      worker(plane, 0, [2, 1], f[0]!, logs),
      worker(plane, 1, [0, 2], f[1]!, logs),
      late,
    ]);
    expect([...s0.pairs.keys(), ...s1.pairs.keys(), ...s2.pairs.keys()]).toEqual([1, 2, 0, 2, 0, 1]);
    expect([s0, s1, s2].every((s) => s.failed.size === 0)).toBe(true);
    // Rank r joins pair (lo, hi) as pair rank 0 when r == lo, with lo's id, on its own device.
    expect(f[0]!.created).toEqual([{ peerIdByte: 1, pairRank: 0, device: 10 }, {
      peerIdByte: 1,
      pairRank: 0,
      device: 10,
    }]);
    expect(f[1]!.created).toEqual([{ peerIdByte: 1, pairRank: 1, device: 11 }, {
      peerIdByte: 2,
      pairRank: 0,
      device: 11,
    }]);
    expect(f[2]!.created).toEqual([{ peerIdByte: 1, pairRank: 1, device: 12 }, {
      peerIdByte: 2,
      pairRank: 1,
      device: 12,
    }]);
    expect(logs.filter((l) => / up \(pair rank/.test(l))).toHaveLength(6);
    expect(plane.nccl.counters()).toMatchObject({ nccl_offers: 6, nccl_ids_relayed: 3, nccl_offers_refused: 0 });
  });

  test("a side without NCCL: both sides fall back without creating anything, each saying why", async () => {
    const plane = await controlPlane([[0, 1]]);
    const logs: string[] = [];
    const f0 = fakeFactory(0), f1 = fakeFactory(1, { unavailable: "libnccl.so.2: cannot open shared object file" });
    const [s0, s1] = await Promise.all([worker(plane, 0, [1], f0, logs), worker(plane, 1, [0], f1, logs)]);
    expect(s0.pairs.size + s1.pairs.size).toBe(0);
    expect(f0.created.length + f1.created.length).toBe(0);
    expect(s0.failed.get(1)).toBe("rank 1 cannot join: libnccl.so.2: cannot open shared object file");
    expect(s1.failed.get(0)).toBe("libnccl.so.2: cannot open shared object file");
    expect(logs.sort()).toEqual([
      "[worker 0] NCCL pair 0-1 is not available, plans with rank 1 use the host path: rank 1 cannot join: libnccl.so.2: cannot open shared object file",
      "[worker 1] NCCL pair 0-1 is not available, plans with rank 0 use the host path: libnccl.so.2: cannot open shared object file",
    ]);
  });

  test("a failing create, a non-NVLink pair and a partner that never comes fail only their pair", async () => {
    const plane = await controlPlane([[0, 1], [2, 3], [1, 2]]);
    const logs: string[] = [];
    const f0 = fakeFactory(0, {
      createFails: "lp_nccl_pair_create(rank=0, device=10) failed: timed out after 1000 ms",
    });
    const f1 = fakeFactory(1), f2 = fakeFactory(2);
    // Rank 0 also asks for 0-3 (not a pair); rank 2 waits for rank 3, which never comes.
    const [s0, s1, s2] = await Promise.all([
      worker(plane, 0, [1, 3], f0, logs),
      worker(plane, 1, [0, 2], f1, logs),
      worker(plane, 2, [1, 3], f2, logs, 200),
    ]);
    expect(s0.failed.get(1)).toMatch(
      /^creating the pair \(rank 0 on device 10, timeout 1000 ms\) failed: lp_nccl_pair_create.*timed out/,
    );
    expect(s0.failed.get(3)).toBe("ranks 0 and 3 are not a direct NVLink pair of this engine");
    expect(s1.pairs.has(0)).toBe(true); // rank 1's side joined; the control plane reconciles the pair's health later
    expect([...s1.pairs.keys(), ...s2.pairs.keys()].sort()).toEqual([0, 1, 2]);
    expect(s2.failed.get(3)).toBe(
      "rendezvous through the control plane failed: rank 3 did not reach the rendezvous within 200 ms",
    );
    expect(logs.filter((l) => l.includes("use the host path"))).toHaveLength(3);
  });

  test("after start-up, a pair one side lost is dropped on the other side", async () => {
    const plane = await controlPlane([[0, 1]]);
    const conns = await Promise.all([0, 1].map(async (rank) => {
      const c = new Connection(await connectUnix(plane.socketPath), {
        name: `w${rank}`,
        heartbeat: false,
        log: () => {},
      });
      cleanups.push(() => c.close());
      const got: Message[] = [];
      c.onMessage((m) => got.push(m));
      c.send({ type: "hello", role: "worker", rank, epoch: 1, pid: 1 });
      return { c, got };
    }));
    const until = async (cond: () => boolean) => {
      for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
      expect(cond()).toBe(true);
    };
    conns[0]!.c.send({ type: "nccl_pair_status", rank: 0, peerRank: 1, ok: true });
    conns[1]!.c.send({ type: "nccl_pair_status", rank: 1, peerRank: 0, ok: true });
    await until(() => plane.nccl.counters().nccl_pairs_up === 1);
    conns[1]!.c.send({
      type: "nccl_pair_status",
      rank: 1,
      peerRank: 0,
      ok: false,
      error: "plan p7: recv with rank 0 not complete after 30000 ms",
    });
    await until(() => conns[0]!.got.length > 0);
    expect(conns[0]!.got[0]).toMatchObject({
      type: "nccl_pair_down",
      peerRank: 1,
      reason: "rank 1 lost its direct pair with rank 0: plan p7: recv with rank 0 not complete after 30000 ms",
    });
    // Rank 0 drops its end and says so: nothing more is sent, no pair is up.
    conns[0]!.c.send({ type: "nccl_pair_status", rank: 0, peerRank: 1, ok: false, error: "dropped" });
    await until(() => plane.nccl.counters().nccl_pairs_up === 0);
    await new Promise((r) => setTimeout(r, 20));
    expect(conns.map((x) => x.got.length)).toEqual([1, 0]);
    expect(plane.nccl.counters().nccl_pairs_dropped).toBe(1);
  });
});
