// The CUDA IPC relay messages through msgpackr frames: the 64-byte handle survives byte for byte,
// every field round-trips, and a wrong-sized handle, an unknown stage or a missing field is rejected
// naming the field.
import { expect, test } from "bun:test";
import { FrameDecoder } from "../../../lib/protocol/frame_codec.ts";
import { decodeMessage, encodeMessage, encodeUnchecked } from "../../../lib/protocol/message_codec.ts";
import type { Message } from "../../../lib/protocol/messages.ts";
import { ProtocolError } from "../../../lib/protocol/protocol_errors.ts";

function roundTrip(m: Message): Message {
  const frames = new FrameDecoder().push(encodeMessage(m));
  expect(frames.length).toBe(1);
  const f = frames[0]!;
  if (!f.ok) throw f.error;
  const d = decodeMessage(f.payload);
  if (!d.ok) throw d.error;
  return d.message;
}

/** Compares with byte arrays as plain arrays (msgpackr may hand back a Buffer). */
const plain = (m: unknown) => JSON.parse(JSON.stringify(m, (_k, v) => (v instanceof Uint8Array ? Array.from(v) : v)));

const handle = Uint8Array.from({ length: 64 }, (_, i) => (i * 53 + 7) & 0xff);

test("every CUDA IPC relay message survives encode/decode, the handle byte for byte", () => {
  const samples: Message[] = [
    { type: "ipc_offer", id: 1, rank: 0, epoch: 3, peerRank: 1, stage: "handle", handle, numBlocks: 4096, blockBytes: 29_360_128 },
    { type: "ipc_offer", id: 2, rank: 1, epoch: 3, peerRank: 0, stage: "handle", error: "cannot export rank 1's KV cache: CUDA IPC handles are not available" },
    { type: "ipc_offer", id: 3, rank: 0, epoch: 3, peerRank: 1, stage: "opened" },
    { type: "ipc_offer", id: 4, rank: 1, epoch: 3, peerRank: 0, stage: "opened", error: "cannot map rank 0's cache: peer access unsupported" },
    { type: "ipc_answer", replyTo: 1, peerRank: 1, stage: "handle", handle, numBlocks: 4000, blockBytes: 29_360_128 },
    { type: "ipc_answer", replyTo: 3, peerRank: 1, stage: "opened", error: "rank 1: cannot map rank 0's cache: peer access unsupported" },
  ];
  for (const m of samples) expect(plain(roundTrip(m))).toEqual(plain(m));
  const back = roundTrip(samples[0]!) as { handle: Uint8Array };
  expect(back.handle).toBeInstanceOf(Uint8Array);
  expect(Array.from(back.handle)).toEqual(Array.from(handle));
});

test("a handle of the wrong size or type, an unknown stage and a missing rank are rejected naming the field", () => {
  for (const bad of [new Uint8Array(128), "x".repeat(64), Array.from(handle)]) {
    const d = decodeMessage(encodeUnchecked({ type: "ipc_answer", peerRank: 0, stage: "handle", handle: bad }).subarray(8));
    expect(d.ok).toBe(false);
    if (d.ok) continue;
    expect(d.error.details).toMatchObject({ messageType: "ipc_answer", field: "handle" });
    expect(d.error.message).toContain("64 bytes");
  }
  const stage = decodeMessage(encodeUnchecked({ type: "ipc_offer", rank: 0, epoch: 1, peerRank: 1, stage: "mapped" }).subarray(8));
  expect(stage.ok).toBe(false);
  if (!stage.ok) expect(stage.error.details.field).toBe("stage");
  const noRank = decodeMessage(encodeUnchecked({ type: "ipc_offer", epoch: 1, peerRank: 1, stage: "opened" }).subarray(8));
  expect(noRank.ok).toBe(false);
  if (!noRank.ok) expect(noRank.error.details.field).toBe("rank");
  expect(() => encodeMessage({ type: "ipc_offer", rank: 0, epoch: 1, peerRank: 1, stage: "handle", handle: new Uint8Array(16) })).toThrow(ProtocolError);
});
