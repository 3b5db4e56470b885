// The NCCL relay messages through msgpackr frames: the 128-byte unique id survives byte for byte,
// every field round-trips, and a wrong-sized id or a missing field is rejected naming the field.
import { expect, test } from "bun:test";
import { encodeMessage } from "../../../../../lib/protocol/message_codec.ts";
import type { Message } from "../../../../../lib/protocol/messages.ts";
import { ProtocolError } from "../../../../../lib/protocol/protocol_errors.ts";
import {
  expectBytesFieldRejected,
  expectRejectedField,
  expectRoundTripsWithBytes,
} from "../../../protocol/round_trip.ts";

const id = Uint8Array.from({ length: 128 }, (_, i) => (i * 37 + 11) & 0xff);

test("every NCCL relay message survives encode/decode, the unique id byte for byte", () => {
  const samples: Message[] = [
    { type: "nccl_id_offer", id: 3, rank: 0, epoch: 1, peerRank: 1, uniqueId: id },
    { type: "nccl_id_offer", id: 4, rank: 1, epoch: 2, peerRank: 0 },
    { type: "nccl_id_offer", id: 5, rank: 1, epoch: 2, peerRank: 0, unavailable: "libnccl.so.2 not found" },
    { type: "nccl_id", replyTo: 3, peerRank: 1, uniqueId: id },
    { type: "nccl_id", replyTo: 4, peerRank: 0, error: "rank 1 cannot join: libnccl.so.2 not found" },
    { type: "nccl_pair_status", rank: 1, peerRank: 0, ok: true },
    { type: "nccl_pair_status", rank: 1, peerRank: 0, ok: false, error: "plan p1 timed out" },
    { type: "nccl_pair_down", peerRank: 1, reason: "rank 1 lost its NCCL pair with rank 0" },
  ];
  expectRoundTripsWithBytes(samples, "uniqueId", id);
});

test("a unique id of the wrong size or type is rejected naming the field; so is a missing rank", () => {
  expectBytesFieldRejected(
    "nccl_id",
    "uniqueId",
    128,
    [new Uint8Array(127), "x".repeat(128), Array.from(id)],
    (bad) => ({ type: "nccl_id", peerRank: 0, uniqueId: bad }),
  );
  expectRejectedField({ type: "nccl_pair_status", peerRank: 0, ok: true }, "rank");
  expect(() => encodeMessage({ type: "nccl_id_offer", rank: 0, epoch: 1, peerRank: 1, uniqueId: new Uint8Array(16) }))
    .toThrow(ProtocolError);
});
