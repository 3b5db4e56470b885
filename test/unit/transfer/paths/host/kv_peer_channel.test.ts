// The CPU-backend data path: packed payloads between workers over their own Unix sockets, in
// either arrival order, intact across arbitrary chunking, with cancellation and source checks; and
// the host-copy KvDataPath's gather -> send -> receive -> scatter on real native KV caches.
import { afterEach, expect, test } from "bun:test";
import { native } from "../../../../../ffi/native.ts";
import { HostCopyDataPath } from "../../../../../lib/transfer/paths/host/host_copy_data_path.ts";
import { TransferPayloadError } from "../../../../../lib/transfer/paths/kv_data_path.ts";
import { KvPeerChannel, TransferCancelledError } from "../../../../../lib/transfer/paths/host/kv_peer_channel.ts";
import { connectUnix, tempSocketPath } from "../../../../../lib/runtime/unix_socket.ts";
import { createRandomModel } from "../../../../helpers/random_model.ts";

const open: KvPeerChannel[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
});

async function pair(): Promise<[KvPeerChannel, KvPeerChannel, string[]]> {
  const paths = [tempSocketPath("a"), tempSocketPath("b")];
  const chans = await Promise.all(
    [0, 1].map((rank) =>
      KvPeerChannel.listen({ rank, socketPath: paths[rank]!, peerSocketPath: (r) => paths[r]!, log: () => {} })
    ),
  );
  open.push(...chans);
  return [chans[0]!, chans[1]!, paths];
}

const bytes = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 131 + seed) & 0xff);

test("a payload arrives intact whether it comes before or after the receive", async () => {
  const [a, b] = await pair();
  const early = bytes(100_000, 1);
  await a.send("early", 1, early);
  await new Promise((r) => setTimeout(r, 20));
  expect(await b.receive("early", 0)).toEqual(early);
  const late = b.receive("late", 0);
  const big = bytes(3_000_000, 2);
  await a.send("late", 1, big);
  expect(await late).toEqual(big);
  // Both directions at once on the same pair.
  const back = bytes(5000, 3);
  const [, got] = await Promise.all([b.send("back", 0, back), a.receive("back", 1)]);
  expect(got).toEqual(back);
  expect(a.counters).toMatchObject({ framesSent: 2, framesReceived: 1, bytesReceived: 5000 });
});

test("frames split at every byte boundary still parse", async () => {
  const [, b, paths] = await pair();
  const payload = bytes(37, 9);
  // Build the frame by hand, as a peer writes it, and trickle it one byte at a time.
  const id = new TextEncoder().encode("trickle");
  const head = new Uint8Array(20 + id.length);
  const dv = new DataView(head.buffer);
  dv.setUint32(0, 0x4c4b5631);
  dv.setUint32(4, 0);
  dv.setUint32(8, id.length);
  dv.setBigUint64(12, BigInt(payload.length));
  head.set(id, 20);
  const frame = new Uint8Array([...head, ...payload]);
  const s = await connectUnix(paths[1]!);
  const got = b.receive("trickle", 0);
  for (const x of frame) {
    s.write(Uint8Array.of(x));
    await new Promise((r) => setTimeout(r, 0));
  }
  expect(await got).toEqual(payload);
  s.close();
});

test("cancel rejects a pending receive and drops a late payload; a wrong sender is refused", async () => {
  const [a, b] = await pair();
  const pending = b.receive("p", 0);
  b.cancel("p", "test abort");
  await expect(pending).rejects.toBeInstanceOf(TransferCancelledError);
  await a.send("p", 1, bytes(10, 1));
  await new Promise((r) => setTimeout(r, 20));
  expect(b.counters.dropped).toBe(1);
  await expect(b.receive("p", 0)).rejects.toThrow(/cancelled/);
  await a.send("q", 1, bytes(10, 1));
  await expect(b.receive("q", 2)).rejects.toThrow(/came from rank 0, expected rank 2/);
});

test("host-copy data path moves blocks between two native KV caches byte-exactly", async () => {
  const [a, b] = await pair();
  const { model } = createRandomModel(native(), { arch: "qwen3", tie: true, seed: 11 });
  using src = model.createKvCache(8, 16);
  using dst = model.createKvCache(8, 16);
  const fill = bytes(3 * src.blockBytes, 5);
  src.scatter(Int32Array.of(2, 5, 7), fill);
  const untouched = dst.gather(Int32Array.of(0, 3));
  const send = new HostCopyDataPath(src, a);
  const recv = new HostCopyDataPath(dst, b);
  const job = (planId: string, peerRank: number, srcBlocks: number[], dstBlocks: number[]) => ({
    planId,
    peerRank,
    srcBlocks: Int32Array.from(srcBlocks),
    dstBlocks: Int32Array.from(dstBlocks),
  });
  const [sent, received] = await Promise.all([
    send.send(job("kv", 1, [5, 2, 7], [6, 1, 4])),
    recv.receive(job("kv", 0, [5, 2, 7], [6, 1, 4])),
  ]);
  expect(sent).toBe(3 * src.blockBytes);
  expect(received).toBe(sent);
  expect(dst.gather(Int32Array.of(6, 1, 4))).toEqual(src.gather(Int32Array.of(5, 2, 7)));
  expect(dst.gather(Int32Array.of(0, 3))).toEqual(untouched);
  // A payload of the wrong size is refused before any block is written.
  await send.send(job("short", 1, [5], [0]));
  await expect(recv.receive(job("short", 0, [5, 2], [0, 3]))).rejects.toBeInstanceOf(TransferPayloadError);
  expect(dst.gather(Int32Array.of(0, 3))).toEqual(untouched);
  model.dispose();
});
