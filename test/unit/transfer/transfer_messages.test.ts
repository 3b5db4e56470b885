// The transfer phase messages join the protocol's registry when their module loads: the codec
// (which never imports the transfer layer) then encodes, decodes and fast-checks them.
import { expect, test } from "bun:test";
import { fastCheckOf, isMessageType, type Message } from "../../../lib/protocol/messages.ts";
import "../../../lib/transfer/transfer_messages.ts";
import { roundTrip } from "../protocol/round_trip.ts";

const samples: Message[] = [
  {
    type: "transfer_prepare",
    id: 1,
    planId: "p1",
    mode: "copy",
    srcRank: 0,
    dstRank: 1,
    srcEpoch: 1,
    dstEpoch: 1,
    blocks: [{ hash: "h", parent: "", srcBlock: 3, generation: 2 }],
    deadline: 1e12,
  },
  { type: "transfer_execute", planId: "p1", srcRank: 0, dstRank: 1, srcBlocks: [3] },
  { type: "transfer_publish", planId: "p1" },
  { type: "transfer_finalize", planId: "p1", mode: "move" },
  { type: "transfer_abort", planId: "p1", reason: "deadline" },
  { type: "transfer_ack", replyTo: 1, planId: "p1", phase: "prepare", rank: 1, ok: true, dstBlocks: [7] },
];

test("every phase message is registered with a fast check and survives encode/decode unchanged", () => {
  for (const m of samples) {
    expect(isMessageType(m.type)).toBe(true);
    expect(fastCheckOf(m.type)).toBeDefined();
    expect(roundTrip(m)).toEqual(m);
  }
});

test("a bad phase message is still refused by its schema, naming the field", () => {
  expect(() =>
    roundTrip({ type: "transfer_ack", planId: "p1", phase: "launch", rank: 1, ok: true } as unknown as Message)
  ).toThrow(/transfer_ack.*"phase"/);
});
