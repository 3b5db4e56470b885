// Message round trips through msgpackr frames, and rejections that name the type and field.
import { expect, test } from "bun:test";
import { decodeMessage, encodeMessage } from "../../../lib/protocol/message_codec.ts";
import { isMessageType, type Message, registerMessages } from "../../../lib/protocol/messages.ts";
import { ProtocolError } from "../../../lib/protocol/protocol_errors.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../../../lib/core/sampling_params.ts";
import { z } from "zod";
import { decodeUnchecked, roundTrip } from "./round_trip.ts";

const samples: Message[] = [
  { type: "hello", role: "worker", rank: 3, epoch: 2, pid: 1234 },
  {
    type: "route_query",
    id: 7,
    requestId: "r1",
    blockHashes: ["a".repeat(32), "b".repeat(32)],
    promptTokens: 40,
    maxTokens: 16,
    ingressRank: 1,
  },
  { type: "route_result", replyTo: 7, requestId: "r1", rank: 2, reason: "cost", matchedBlocks: 2, feasible: true },
  {
    type: "dispatch",
    requestId: "r1",
    promptTokenIds: [1, 2, 3],
    sampling: { ...DEFAULT_SAMPLING_PARAMS, stop: ["\n"], seed: 5 },
    arrivalTime: 12.5,
  },
  {
    type: "token_delta",
    items: [{ requestId: "r1", tokenIds: [4, 5], text: "ab", logprobs: [-0.5, -1.25] }, {
      requestId: "r2",
      tokenIds: [],
      text: "",
    }],
  },
  {
    type: "finish",
    requestId: "r1",
    reason: "length",
    tokenIds: [6],
    text: "c",
    output: {
      tokenIds: [4, 5, 6],
      text: "abc",
      metrics: { arrivalTime: 1, firstTokenTime: 2, finishTime: 3, numCachedTokens: 16, rank: 1 },
    },
  },
  {
    type: "finish",
    requestId: "r9",
    reason: "error",
    tokenIds: [],
    text: "",
    error: { name: "CapacityError", message: "too long" },
  },
  {
    type: "block_delta",
    delta: {
      rank: 1,
      epoch: 1,
      baseVersion: 4,
      version: 5,
      capacity: { numBlocks: 10, blockSize: 16, numFree: 5, numReclaimable: 3 },
      load: { numRunning: 1, numWaiting: 0, runningTokens: 30, waitingTokens: 0 },
      added: [{ hash: "h", parent: "", block: 3, generation: 2, refCount: 1, lastAccess: 1.5, accessCount: 1 }],
      removed: [{ hash: "g", block: 1, generation: 1 }],
      touched: [],
    },
    allocated: ["r1"],
  },
  { type: "error", code: "schema", message: "bad", messageType: "dispatch", field: "sampling.topP" },
];

test("every sample message survives encode/decode unchanged", () => {
  for (const m of samples) expect(roundTrip(m)).toEqual(m);
});

test("a schema mismatch names the message type and the field path", () => {
  const d = decodeUnchecked({
    type: "dispatch",
    requestId: "x",
    promptTokenIds: [1, -2],
    sampling: DEFAULT_SAMPLING_PARAMS,
    arrivalTime: 0,
  });
  expect(d.ok).toBe(false);
  if (d.ok) return;
  expect(d.error.code).toBe("schema");
  expect(d.error.details.messageType).toBe("dispatch");
  expect(d.error.details.field).toBe("promptTokenIds.1");
  expect(d.error.message).toContain("-2");
});

test("an unknown type and a non-map payload are rejected with the offending value", () => {
  const u = decodeUnchecked({ type: "teleport", id: 4 });
  expect(!u.ok && u.error.code).toBe("unknown_type");
  expect(!u.ok && u.error.message).toContain('"teleport"');
  expect(!u.ok && u.error.details.id).toBe(4);
  const a = decodeUnchecked([1, 2]);
  expect(!a.ok && a.error.details.field).toBe("type");
});

test("undecodable bytes are a ProtocolError, not a throw", () => {
  for (const bad of [[0x92, 0x01], [0x81, 0xa1], [0xd4, 0x01, 0x02]]) {
    const d = decodeMessage(new Uint8Array(bad)); // truncated array, truncated map, unknown extension
    expect(d.ok).toBe(false);
    expect(!d.ok && d.error).toBeInstanceOf(ProtocolError);
    expect(!d.ok && d.error.code).toBe("undecodable");
  }
});

test("encoding an invalid message throws naming the field", () => {
  expect(() => encodeMessage({ type: "heartbeat", seq: -1, sentAt: 0 } as Message)).toThrow(/heartbeat.*"seq"/);
});

test("a -Infinity logprob survives the round trip", () => {
  const m: Message = {
    type: "token_delta",
    items: [{ requestId: "r", tokenIds: [1], text: "", logprobs: [-Infinity] }],
  };
  expect(roundTrip(m)).toEqual(m);
});

test("a higher layer's family is unknown until registered, then decodes; a clash names the type", () => {
  const Ping = z.object({ type: z.literal("test_ping"), n: z.number() });
  expect(isMessageType("test_ping")).toBe(false);
  expect(!decodeUnchecked({ type: "test_ping", n: 1 }).ok).toBe(true);
  const register = registerMessages as (
    family: Record<string, z.ZodType>,
    checks?: Record<string, (m: Record<string, unknown>) => boolean>,
  ) => void;
  register({ test_ping: Ping });
  register({ test_ping: Ping }); // the same schema again: no-op
  expect(isMessageType("test_ping")).toBe(true);
  const d = decodeUnchecked({ type: "test_ping", n: 2 });
  expect(d.ok && d.message).toEqual({ type: "test_ping", n: 2 } as unknown as Message);
  expect(() => register({ test_ping: z.object({ type: z.literal("test_ping") }) })).toThrow(
    /"test_ping".*another schema/,
  );
  expect(() => register({ hello: z.object({}) })).toThrow(/"hello"/);
  expect(() => register({ test_pong: z.object({}) }, { test_other: () => true })).toThrow(/"test_other"/);
});
