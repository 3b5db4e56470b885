// NcclDataPath with fake pairs: halves post in call order and resolve with the payload bytes; a
// timeout or a cancel after posting aborts and drops that peer's pair (and reports it once), later
// plans with the peer fail at once, a cancel before posting rejects without posting, and close()
// disposes the pairs.
import { describe, expect, test } from "bun:test";
import type { KvTransferJob } from "../../../../../lib/transfer/paths/kv_data_path.ts";
import type { NcclPair } from "../../../../../ffi/kv_transfer.ts";
import { TransferTimeoutError } from "../../../../../lib/transfer/paths/direct_data_path.ts";
import { NcclDataPath, type PairLink } from "../../../../../lib/transfer/paths/nccl/nccl_data_path.ts";
import { FakePair } from "./fake_nccl_pair.ts";

// The native pair is a PairLink (checked at compile time).
const _nativePairIsALink: (p: NcclPair) => PairLink = (p) => p;
void _nativePairIsALink;

const kv = { handle: 1n, numBlocks: 64, blockBytes: 1000 };

function job(planId: string, peerRank: number, n = 2): KvTransferJob {
  return {
    planId,
    peerRank,
    srcBlocks: Int32Array.from({ length: n }, (_, i) => i),
    dstBlocks: Int32Array.from({ length: n }, (_, i) => 10 + i),
  };
}

describe("NcclDataPath", () => {
  test("posts halves in call order and resolves with the payload bytes", async () => {
    const pair = new FakePair();
    const path = new NcclDataPath(kv, new Map([[1, pair]]), { timeoutMs: 1000 });
    const a = path.send(job("a", 1, 2)), b = path.receive(job("b", 1, 3));
    expect(pair.posted).toEqual(["send:0,1", "recv:10,11,12"]);
    pair.completeAll();
    expect(await a).toBe(2000);
    expect(await b).toBe(3000);
    expect(path.blockBytes).toBe(1000);
  });

  test("a timeout aborts and drops the pair once; later plans with that peer fail at once", async () => {
    const pair = new FakePair(), broken: string[] = [];
    const path = new NcclDataPath(kv, new Map([[1, pair]]), {
      timeoutMs: 20,
      onPairBroken: (peer, why) => broken.push(`${peer}: ${why}`),
    });
    await expect(path.send(job("slow", 1))).rejects.toBeInstanceOf(TransferTimeoutError);
    expect(pair.aborted && pair.disposed).toBe(true);
    expect(broken).toHaveLength(1);
    expect(broken[0]).toContain("plan slow: send with rank 1 not complete after 20 ms");
    await expect(path.receive(job("next", 1))).rejects.toThrow(/cannot recv with rank 1: its NCCL pair was aborted/);
    expect(pair.posted).toEqual(["send:0,1"]);
  });

  test("cancel after posting aborts the pair and the pending half rejects; before posting it never posts", async () => {
    const pair = new FakePair();
    const path = new NcclDataPath(kv, new Map([[2, pair]]), { timeoutMs: 5000 });
    const pending = path.receive(job("p", 2));
    path.cancel("p", "plan aborted by the control plane");
    await expect(pending).rejects.toThrow(/aborted/);
    expect(pair.aborted).toBe(true);

    const other = new FakePair();
    const path2 = new NcclDataPath(kv, new Map([[2, other]]), { timeoutMs: 5000 });
    path2.cancel("q", "deadline");
    await expect(path2.send(job("q", 2))).rejects.toThrow(/plan q was cancelled: deadline/);
    expect(other.posted).toEqual([]);
    expect(other.aborted).toBe(false);
  });

  test("mismatched id lists and unknown peers are errors; close disposes every pair", async () => {
    const pair = new FakePair();
    const path = new NcclDataPath(kv, new Map([[1, pair]]), { timeoutMs: 100 });
    const bad: KvTransferJob = { ...job("m", 1, 2), dstBlocks: Int32Array.of(1) };
    await expect(path.send(bad)).rejects.toBeInstanceOf(RangeError);
    await expect(path.send(job("u", 7))).rejects.toThrow(/no NCCL pair with that rank/);
    await path.close();
    await path.close();
    expect(pair.disposed).toBe(true);
    expect(() => new NcclDataPath(kv, new Map(), { timeoutMs: 0 })).toThrow(RangeError);
  });
});
