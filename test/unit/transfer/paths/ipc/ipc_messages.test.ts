// The CUDA IPC relay messages through msgpackr frames: the 64-byte handle survives byte for byte,
// every field round-trips, and a wrong-sized handle, an unknown stage or a missing field is rejected
// naming the field.
import { expect, test } from "bun:test";
import { encodeMessage } from "../../../../../lib/protocol/message_codec.ts";
import type { Message } from "../../../../../lib/protocol/messages.ts";
import { ProtocolError } from "../../../../../lib/protocol/protocol_errors.ts";
import {
  expectBytesFieldRejected,
  expectRejectedField,
  expectRoundTripsWithBytes,
} from "../../../protocol/round_trip.ts";

const handle = Uint8Array.from({ length: 64 }, (_, i) => (i * 53 + 7) & 0xff);

test("every CUDA IPC relay message survives encode/decode, the handle byte for byte", () => {
  const samples: Message[] = [
    {
      type: "ipc_offer",
      id: 1,
      rank: 0,
      epoch: 3,
      peerRank: 1,
      stage: "handle",
      handle,
      numBlocks: 4096,
      blockBytes: 29_360_128,
    },
    {
      type: "ipc_offer",
      id: 2,
      rank: 1,
      epoch: 3,
      peerRank: 0,
      stage: "handle",
      error: "cannot export rank 1's KV cache: CUDA IPC handles are not available",
    },
    { type: "ipc_offer", id: 3, rank: 0, epoch: 3, peerRank: 1, stage: "opened" },
    {
      type: "ipc_offer",
      id: 4,
      rank: 1,
      epoch: 3,
      peerRank: 0,
      stage: "opened",
      error: "cannot map rank 0's cache: peer access unsupported",
    },
    { type: "ipc_answer", replyTo: 1, peerRank: 1, stage: "handle", handle, numBlocks: 4000, blockBytes: 29_360_128 },
    {
      type: "ipc_answer",
      replyTo: 3,
      peerRank: 1,
      stage: "opened",
      error: "rank 1: cannot map rank 0's cache: peer access unsupported",
    },
  ];
  expectRoundTripsWithBytes(samples, "handle", handle);
});

test("a handle of the wrong size or type, an unknown stage and a missing rank are rejected naming the field", () => {
  expectBytesFieldRejected(
    "ipc_answer",
    "handle",
    64,
    [new Uint8Array(128), "x".repeat(64), Array.from(handle)],
    (bad) => ({ type: "ipc_answer", peerRank: 0, stage: "handle", handle: bad }),
  );
  expectRejectedField({ type: "ipc_offer", rank: 0, epoch: 1, peerRank: 1, stage: "mapped" }, "stage");
  expectRejectedField({ type: "ipc_offer", epoch: 1, peerRank: 1, stage: "opened" }, "rank");
  expect(() =>
    encodeMessage({ type: "ipc_offer", rank: 0, epoch: 1, peerRank: 1, stage: "handle", handle: new Uint8Array(16) })
  ).toThrow(ProtocolError);
});
