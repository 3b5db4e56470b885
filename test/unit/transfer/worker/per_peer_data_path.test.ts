// PerPeerDataPath over a real NcclDataPath with fake pairs and a recording host path: plans go to
// the NCCL pair of their peer when it is up and to the host path otherwise; a pair that breaks at
// run time (a plan timing out) fails that plan, moves the peer to the host path for good (logged
// once, reported once) and the next plan with it goes over the host path; the control plane's
// "your partner dropped the pair" does the same and aborts the local end; cancel and close reach
// both paths; the counters say which path each peer uses and how many bytes each path moved. With
// two direct paths (CUDA IPC, then NCCL) each peer takes the first that serves it, and one that
// breaks goes to the host path. One path object serving under two names (the device-local copy to
// a partner on the same device, CUDA IPC to one on another) counts each peer under its own name
// and is cancelled and closed once.
import { describe, expect, test } from "bun:test";
import type { KvTransferJob } from "../../../../lib/transfer/paths/kv_data_path.ts";
import { NcclDataPath } from "../../../../lib/transfer/paths/nccl/nccl_data_path.ts";
import type { DirectDataPath } from "../../../../lib/transfer/paths/direct_data_path.ts";
import { PerPeerDataPath } from "../../../../lib/transfer/worker/per_peer_data_path.ts";
import { FakePair } from "../paths/nccl/fake_nccl_pair.ts";

const kv = { handle: 1n, numBlocks: 64, blockBytes: 1000 };

/** A path that completes every plan at once and records what it saw. */
class RecordingPath implements DirectDataPath {
  readonly blockBytes = 1000;
  calls: string[] = [];
  cancelled: string[] = [];
  closed = 0;
  async send(job: KvTransferJob): Promise<number> {
    this.calls.push(`send ${job.planId} -> ${job.peerRank}`);
    return job.srcBlocks.length * this.blockBytes;
  }
  async receive(job: KvTransferJob): Promise<number> {
    this.calls.push(`receive ${job.planId} <- ${job.peerRank}`);
    return job.dstBlocks.length * this.blockBytes;
  }
  cancel(planId: string): void {
    this.cancelled.push(planId);
  }
  async close(): Promise<void> {
    this.closed++;
  }
  dropped: string[] = [];
  dropPeer(peer: number, reason: string): void {
    this.dropped.push(`${peer}: ${reason}`);
  }
}

function job(planId: string, peerRank: number, n = 2): KvTransferJob {
  return {
    planId,
    peerRank,
    srcBlocks: Int32Array.from({ length: n }, (_, i) => i),
    dstBlocks: Int32Array.from({ length: n }, (_, i) => 10 + i),
  };
}

/** Rank 0 with an NCCL pair to rank 1, none to rank 3 (it failed at start-up), host path to all. */
function setup(timeoutMs = 1000) {
  const pair = new FakePair();
  const host = new RecordingPath();
  const logs: string[] = [];
  const fallbacks: string[] = [];
  // deno-lint-ignore prefer-const -- assigned once, after the callbacks that read it are made
  let perPeer: PerPeerDataPath | undefined;
  const nccl = new NcclDataPath(kv, new Map([[1, pair]]), {
    timeoutMs,
    onPairBroken: (peer, why) => perPeer?.fallBack(peer, why),
  });
  perPeer = new PerPeerDataPath({
    rank: 0,
    host,
    direct: [{ name: "nccl", path: nccl, peers: [1], failed: new Map([[3, "NCCL timed out"]]) }],
    log: (l) => logs.push(l),
  });
  perPeer.onFallback = (peer, why) => fallbacks.push(`${peer}: ${why}`);
  return { pair, host, logs, fallbacks, path: perPeer };
}

describe("PerPeerDataPath", () => {
  test("dispatches by peer: the NCCL pair where it is up, the host path for every other peer", async () => {
    const { pair, host, path } = setup();
    const viaNccl = path.send(job("a", 1, 3));
    expect(pair.posted).toEqual(["send:0,1,2"]);
    pair.completeAll();
    expect(await viaNccl).toBe(3000);
    expect(await path.receive(job("b", 2, 2))).toBe(2000);
    expect(await path.send(job("c", 3, 1))).toBe(1000);
    expect(host.calls).toEqual(["receive b <- 2", "send c -> 3"]);
    expect([path.pathOf(1), path.pathOf(2), path.pathOf(3)]).toEqual(["nccl", "host", "host"]);
    expect(path.status()).toEqual([{ peerRank: 1, ok: true }, {
      peerRank: 3,
      ok: false,
      error: "nccl: NCCL timed out",
    }]);
    expect(path.counters()).toEqual({
      data_path_nccl_peers: 1,
      data_path_fallbacks: 0,
      data_path_nccl_peer_1: 1,
      data_path_nccl_peer_3: 0,
      data_path_nccl_sent_bytes: 3000,
      data_path_nccl_received_bytes: 0,
      data_path_host_sent_bytes: 1000,
      data_path_host_received_bytes: 2000,
      // CUDA IPC and the device-local path were not tried here: their counters are there, at zero.
      data_path_ipc_peers: 0,
      data_path_ipc_sent_bytes: 0,
      data_path_ipc_received_bytes: 0,
      data_path_device_local_peers: 0,
      data_path_device_local_sent_bytes: 0,
      data_path_device_local_received_bytes: 0,
    });
  });

  test("a pair that breaks mid-plan fails that plan, then its peer uses the host path for good", async () => {
    const { pair, host, logs, fallbacks, path } = setup(30);
    await expect(path.receive(job("slow", 1))).rejects.toThrow(/not complete after 30 ms/);
    expect(pair.aborted && pair.disposed).toBe(true);
    expect(fallbacks).toHaveLength(1);
    expect(fallbacks[0]).toContain("1: plan slow: recv with rank 1 not complete after 30 ms");
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(
      /^\[worker 0\] nccl pair 0-1 broke; plans with rank 1 use the host path from now on: plan slow/,
    );
    expect(await path.receive(job("next", 1))).toBe(2000);
    expect(host.calls).toEqual(["receive next <- 1"]);
    expect(pair.posted).toEqual(["recv:10,11"]);
    expect(path.pathOf(1)).toBe("host");
    expect(path.counters()).toMatchObject({
      data_path_nccl_peers: 0,
      data_path_nccl_peer_1: 0,
      data_path_fallbacks: 1,
      data_path_host_received_bytes: 2000,
    });
    expect(path.status()[0]).toMatchObject({ peerRank: 1, ok: false });
  });

  test("fallBack from outside (the partner dropped the pair) aborts the local end once", async () => {
    const { pair, logs, fallbacks, path } = setup();
    path.fallBack(1, "rank 1 lost its NCCL pair");
    path.fallBack(1, "again");
    path.fallBack(2, "never had one");
    expect(pair.aborted && pair.disposed).toBe(true);
    expect(fallbacks).toEqual(["1: rank 1 lost its NCCL pair"]);
    expect(logs).toHaveLength(1);
    expect(await path.send(job("after", 1))).toBe(2000);
    expect(pair.posted).toEqual([]);
  });

  test("cancel reaches both paths (a pending NCCL half aborts its pair); close closes both", async () => {
    const { pair, host, fallbacks, path } = setup();
    const pending = path.send(job("p", 1));
    path.cancel("p", "plan aborted");
    await expect(pending).rejects.toThrow(/aborted/);
    expect(host.cancelled).toEqual(["p"]);
    expect(fallbacks).toHaveLength(1);
    expect(path.pathOf(1)).toBe("host");
    await path.close();
    expect(host.closed).toBe(1);
    expect(pair.disposed).toBe(true);
  });

  test("without a direct path every plan takes the host path", async () => {
    const host = new RecordingPath();
    const path = new PerPeerDataPath({ rank: 2, host, log: () => {} });
    expect(await path.send(job("h", 0, 4))).toBe(4000);
    expect(path.status()).toEqual([]);
    expect(path.counters()).toMatchObject({ data_path_nccl_peers: 0, data_path_host_sent_bytes: 4000 });
    path.fallBack(0, "nothing to fall back from");
    expect(host.calls).toEqual(["send h -> 0"]);
  });

  test("two direct paths: each peer takes the first that serves it; a broken one falls back to the host path", async () => {
    const [ipc, nccl, host] = [new RecordingPath(), new RecordingPath(), new RecordingPath()];
    const logs: string[] = [];
    const path = new PerPeerDataPath({
      rank: 0,
      host,
      log: (l) => logs.push(l),
      direct: [
        { name: "ipc", path: ipc, peers: [1], failed: new Map([[2, "cannot map"], [3, "cannot map"]]) },
        { name: "nccl", path: nccl, peers: [2, 1], failed: new Map([[3, "timed out"]]) },
      ],
    });
    expect([1, 2, 3, 4].map((p) => path.pathOf(p))).toEqual(["ipc", "nccl", "host", "host"]);
    await Promise.all([path.send(job("a", 1)), path.receive(job("b", 2, 3)), path.send(job("c", 3, 1))]);
    expect([ipc.calls, nccl.calls, host.calls]).toEqual([["send a -> 1"], ["receive b <- 2"], ["send c -> 3"]]);
    expect(path.status()).toEqual([{ peerRank: 1, ok: true }, { peerRank: 2, ok: true }, {
      peerRank: 3,
      ok: false,
      error: "ipc: cannot map; nccl: timed out",
    }]);
    expect(path.counters()).toEqual({
      data_path_fallbacks: 0,
      data_path_ipc_peers: 1,
      data_path_ipc_peer_1: 1,
      data_path_ipc_peer_2: 0,
      data_path_ipc_peer_3: 0,
      data_path_nccl_peers: 1,
      data_path_nccl_peer_1: 0,
      data_path_nccl_peer_2: 1,
      data_path_nccl_peer_3: 0,
      data_path_ipc_sent_bytes: 2000,
      data_path_ipc_received_bytes: 0,
      data_path_nccl_sent_bytes: 0,
      data_path_nccl_received_bytes: 3000,
      data_path_host_sent_bytes: 1000,
      data_path_host_received_bytes: 0,
      data_path_device_local_peers: 0,
      data_path_device_local_sent_bytes: 0,
      data_path_device_local_received_bytes: 0,
    });
    path.fallBack(1, "copy failed");
    expect(ipc.dropped).toEqual(["1: copy failed"]);
    expect(nccl.dropped).toEqual([]);
    expect(path.pathOf(1)).toBe("host");
    expect(logs).toEqual([
      "[worker 0] ipc pair 0-1 broke; plans with rank 1 use the host path from now on: copy failed",
    ]);
    path.cancel("z", "aborted");
    expect([ipc.cancelled, nccl.cancelled, host.cancelled]).toEqual([["z"], ["z"], ["z"]]);
    await path.close();
    expect([ipc.closed, nccl.closed, host.closed]).toEqual([1, 1, 1]);
  });

  test("one path under two names: device_local and ipc peers counted apart; cancelled and closed once", async () => {
    const [shared, host] = [new RecordingPath(), new RecordingPath()];
    const path = new PerPeerDataPath({
      rank: 0,
      host,
      log: () => {},
      direct: [
        { name: "device_local", path: shared, peers: [1] },
        { name: "ipc", path: shared, peers: [2], failed: new Map([[3, "cannot map"]]) },
      ],
    });
    expect([1, 2, 3].map((p) => path.pathOf(p))).toEqual(["device_local", "ipc", "host"]);
    await Promise.all([path.send(job("a", 1)), path.receive(job("b", 2, 3))]);
    expect(shared.calls).toEqual(["send a -> 1", "receive b <- 2"]);
    expect(path.counters()).toMatchObject({
      data_path_device_local_peers: 1,
      data_path_device_local_peer_1: 1,
      data_path_device_local_sent_bytes: 2000,
      data_path_device_local_received_bytes: 0,
      data_path_ipc_peers: 1,
      data_path_ipc_peer_2: 1,
      data_path_ipc_peer_3: 0,
      data_path_ipc_sent_bytes: 0,
      data_path_ipc_received_bytes: 3000,
    });
    expect(path.counters().data_path_device_local_peer_2).toBeUndefined();
    path.cancel("z", "aborted");
    await path.close();
    expect([shared.cancelled, shared.closed, host.closed]).toEqual([["z"], 1, 1]);
  });
});
