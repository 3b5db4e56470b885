// The CUDA IPC data path with fake mappings and an in-memory signal line: the source copies into the
// destination's blocks only after the destination's ready, and the destination's receive resolves
// only after the copy landed and the source said so; whichever side is called first. A destination
// that aborted before receiving is never written; a cancelled receive still waits for the source's
// report; a source that cancels or never copies answers at once; a failed or timed-out copy fails
// both sides' plan and breaks the pair; close ends everything pending and unmaps.
import { describe, expect, test } from "bun:test";
import { IpcDataPath } from "../../../../../lib/transfer/paths/ipc/ipc_data_path.ts";
import type { KvTransferJob } from "../../../../../lib/transfer/paths/kv_data_path.ts";
import { TransferCancelledError } from "../../../../../lib/transfer/paths/host/kv_peer_channel.ts";
import { TransferTimeoutError } from "../../../../../lib/transfer/paths/direct_data_path.ts";
import { type FakeMemory, FakeView, SignalNetwork } from "./fake_ipc.ts";

const BLOCK_BYTES = 100;

function job(planId: string, peerRank: number, src: number[], dst: number[]): KvTransferJob {
  return { planId, peerRank, srcBlocks: Int32Array.from(src), dstBlocks: Int32Array.from(dst) };
}

/** Ranks 0 and 1, each mapping the other's cache; rank r's block b holds "r:b". */
function setup(o: { timeoutMs?: number; autoComplete?: boolean } = {}) {
  const mem: FakeMemory[] = [0, 1].map((r) => new Map(Array.from({ length: 8 }, (_, b) => [b, `${r}:${b}`])));
  const views = [
    new FakeView(8, mem[0]!, mem[1]!, o.autoComplete ?? true),
    new FakeView(8, mem[1]!, mem[0]!, o.autoComplete ?? true),
  ];
  const net = new SignalNetwork();
  const broken: string[] = [];
  const logs: string[] = [];
  const paths = [0, 1].map(
    (rank) =>
      new IpcDataPath({
        rank,
        blockBytes: BLOCK_BYTES,
        views: new Map([[1 - rank, views[rank]!]]),
        signals: net.line(rank),
        timeoutMs: o.timeoutMs ?? 1000,
        onPeerBroken: (p, why) => broken.push(`${rank}/${p}: ${why}`),
        log: (l) => logs.push(l),
      }),
  );
  return { mem, views, net, broken, logs, src: paths[0]!, dst: paths[1]! };
}

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

describe("IpcDataPath", () => {
  test("the source copies after ready; receive resolves once the bytes landed; either side may come first", async () => {
    const { mem, views, net, src, dst } = setup({ autoComplete: false });
    const j = job("a", 1, [2, 5], [6, 7]);
    const receiving = dst.receive({ ...j, peerRank: 0 });
    const sending = src.send(j);
    await tick();
    expect(views[0]!.copies).toEqual(["2,5->6,7"]);
    let received = false;
    void receiving.then(() => (received = true));
    await tick();
    expect(received).toBe(false); // enqueued, not complete: the destination waits
    expect(mem[1]!.get(6)).toBe("1:6");
    views[0]!.completeAll();
    expect(await sending).toBe(200);
    expect(await receiving).toBe(200);
    expect([mem[1]!.get(6), mem[1]!.get(7)]).toEqual(["0:2", "0:5"]);
    expect(net.log).toEqual(["1->0 ready a", "0->1 done a"]);
    // The source's send first: it waits for the ready, then copies.
    for (const v of views) v.autoComplete = true;
    const early = src.send(job("b", 1, [1], [3]));
    await tick();
    expect(views[0]!.copies).toHaveLength(1);
    expect(await dst.receive(job("b", 0, [1], [3]))).toBe(100);
    expect(await early).toBe(100);
    expect(mem[1]!.get(3)).toBe("0:1");
    // Both directions at once.
    const [back, there] = await Promise.all([dst.send(job("c", 0, [4], [0])), src.receive(job("c", 1, [4], [0]))]);
    expect([back, there, mem[0]!.get(0)]).toEqual([100, 100, "1:4"]);
  });

  test("a source that does not know the destination's blocks copies into those its ready names; a mismatch copies nothing", async () => {
    const { mem, views, net, src, dst } = setup();
    const [sent, received] = await Promise.all([
      src.send(job("p", 1, [2, 5], [])),
      dst.receive(job("p", 0, [2, 5], [7, 4])),
    ]);
    expect([sent, received]).toEqual([200, 200]);
    expect(views[0]!.copies).toEqual(["2,5->7,4"]);
    expect([mem[1]!.get(7), mem[1]!.get(4)]).toEqual(["0:2", "0:5"]);
    // A source that names other blocks than the destination's ready: no copy, both sides fail.
    const wrong = src.send(job("q", 1, [1], [3]));
    const waiting = dst.receive(job("q", 0, [1], [6]));
    await expect(wrong).rejects.toThrow(/named blocks 6 for source blocks 1 \(the plan says 3\)/);
    await expect(waiting).rejects.toThrow(/did not copy/);
    expect(views[0]!.copies).toHaveLength(1);
    expect(net.log.slice(-2)).toEqual([
      "1->0 ready q",
      "0->1 done q error: not copied: the destination named blocks 6 for source blocks 1 (the plan says 3)",
    ]);
  });

  test("a destination that aborted before receiving is never written; the source's cancel ends its send", async () => {
    const { views, net, src, dst } = setup();
    dst.cancel("gone", "execute failed on the destination");
    const sending = src.send(job("gone", 1, [1], [2]));
    await tick(20);
    src.cancel("gone", "plan aborted");
    await expect(sending).rejects.toBeInstanceOf(TransferCancelledError);
    expect(views[0]!.copies).toEqual([]);
    expect(net.log).toEqual([]);
  });

  test("a cancelled receive keeps waiting for the source's report while the copy runs", async () => {
    const { mem, views, src, dst } = setup({ autoComplete: false });
    const receiving = dst.receive(job("p", 0, [3], [4]));
    const sending = src.send(job("p", 1, [3], [4]));
    await tick();
    dst.cancel("p", "deadline");
    let settled = false;
    receiving.catch(() => {}).finally(() => (settled = true));
    await tick(20);
    expect(settled).toBe(false);
    views[0]!.completeAll();
    await sending;
    await expect(receiving).rejects.toThrow(/plan p was cancelled: deadline/);
    expect(mem[1]!.get(4)).toBe("0:3"); // landed before the receive let go of its blocks
  });

  test("a source that cancelled (or is cancelled later) answers the ready at once: not copied", async () => {
    const { views, net, src, dst } = setup();
    src.cancel("x", "aborted before execute");
    await expect(dst.receive(job("x", 0, [1], [1]))).rejects.toThrow(
      /rank 0 did not copy: not copied: the plan was cancelled \(aborted before execute\)/,
    );
    const receiving = dst.receive(job("y", 0, [1], [1]));
    await tick();
    src.cancel("y", "aborted");
    await expect(receiving).rejects.toThrow(/not copied/);
    expect(views[0]!.copies).toEqual([]);
    expect(net.log.filter((l) => l.includes("done"))).toHaveLength(2);
  });

  test("a copy that times out fails both sides and breaks the pair; later plans fail at once", async () => {
    const { views, broken, src, dst } = setup({ timeoutMs: 150, autoComplete: false });
    const receiving = dst.receive(job("slow", 0, [1], [1]));
    await expect(src.send(job("slow", 1, [1], [1]))).rejects.toBeInstanceOf(TransferTimeoutError);
    let settled = false;
    receiving.catch(() => {}).finally(() => (settled = true));
    await tick(5);
    expect(settled).toBe(false); // the copy may still land: the destination keeps its blocks
    views[0]!.completeAll();
    await expect(receiving).rejects.toThrow(
      /rank 0 did not copy: plan slow: the copy into rank 1's cache not complete after 150 ms \(it completed later\)/,
    );
    expect(broken).toEqual(["0/1: plan slow: the copy into rank 1's cache not complete after 150 ms"]);
    await expect(src.send(job("next", 1, [1], [1]))).rejects.toThrow(
      /cannot send to rank 1 over CUDA IPC: its CUDA IPC pair was dropped/,
    );
    // A destination that still sends ready gets an answer rather than a timeout.
    await expect(dst.receive(job("next2", 0, [1], [1]))).rejects.toThrow(/not copied: its CUDA IPC pair was dropped/);
    expect(views[0]!.copies).toHaveLength(1);
  });

  test("a copy that cannot start or fails on the device fails the plan, tells the destination, breaks the pair", async () => {
    for (const how of ["failEnqueue", "failWait"] as const) {
      const { views, broken, src, dst } = setup();
      views[0]![how] = `cuda error (${how})`;
      const receiving = dst.receive(job("f", 0, [1], [1]));
      await expect(src.send(job("f", 1, [1], [1]))).rejects.toThrow(`cuda error (${how})`);
      await expect(receiving).rejects.toThrow(`cuda error (${how})`);
      expect(broken).toHaveLength(1);
    }
  });

  test("a source that never reports: the receive times out and breaks the pair", async () => {
    const { broken, dst } = setup({ timeoutMs: 30 });
    await expect(dst.receive(job("lost", 0, [1], [1]))).rejects.toThrow(
      "plan lost: rank 0 did not report its copy within 60 ms",
    );
    expect(broken).toEqual(["1/0: plan lost: rank 0 did not report its copy within 60 ms"]);
  });

  test("bad jobs are refused naming the plan; close ends pending plans and unmaps once", async () => {
    const { views, src, dst } = setup();
    await expect(src.send(job("bad", 1, [1, 2], [3]))).rejects.toThrow(
      "plan bad: 2 source blocks but 1 destination blocks",
    );
    await expect(src.send(job("nobody", 5, [1], [1]))).rejects.toThrow(
      "plan nobody: cannot send to rank 5 over CUDA IPC: no mapping of its cache",
    );
    const sending = src.send(job("open", 1, [1], [1]));
    const receiving = src.receive(job("open2", 1, [1], [1]));
    await src.close();
    await src.close();
    await expect(sending).rejects.toThrow(/closed/);
    await expect(receiving).rejects.toThrow(/closed/);
    expect(views[0]!.disposed).toBe(1);
    await dst.close();
  });
});
