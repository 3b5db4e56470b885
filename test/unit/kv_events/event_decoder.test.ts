// The subscriber's decoder against payloads written by hand (msgpackr, not LMPool's encoder), in
// the forms llm-d's decoder accepts and refuses: batch arrays of three only, array- or map-encoded
// events, hashes as uint64, int64 or bytes, trailing fields absent; then LMPool's own encoding.
import { expect, test } from "bun:test";
import { Packr } from "msgpackr";
import { encodeEventBatch } from "../../../lib/kv_events/event_batch.ts";
import { decodeEventBatch, parseTopic } from "../../../lib/kv_events/subscriber/event_decoder.ts";

const packr = new Packr({ useRecords: false, variableMapSize: true });
const pack = (v: unknown) => packr.pack(v);

test("llm-d's topic form", () => {
  expect(parseTopic("kv@10.0.0.7:8000@Qwen/Qwen3-0.6B")).toEqual({ pod: "10.0.0.7:8000", model: "Qwen/Qwen3-0.6B" });
  expect(parseTopic("plain")).toEqual({ pod: "plain", model: "" });
});

test("array and map events, every hash form, omitted trailing fields", () => {
  const b = decodeEventBatch(pack([
    1.25,
    [
      ["BlockStored", [1, 0xffffffffffffffffn, -1n], null, [1, 2], 1],
      {
        type: "BlockStored",
        block_hashes: [new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9])],
        parent_block_hash: 7,
        token_ids: [3],
        block_size: 1,
        medium: "GPU",
        group_idx: 0,
      },
      ["BlockRemoved", [5]],
      { type: "AllBlocksCleared" },
    ],
    2,
  ]));
  expect(b.dataParallelRank).toBe(2);
  expect(b.events[0]).toMatchObject({ blockHashes: [1n, 0xffffffffffffffffn, 0xffffffffffffffffn], medium: null });
  expect(b.events[1]).toMatchObject({ blockHashes: [0x0203040506070809n], parentBlockHash: 7n, groupIdx: 0 });
  expect(b.events.map((e) => e.type)).toEqual(["BlockStored", "BlockStored", "BlockRemoved", "AllBlocksCleared"]);
});

test("what llm-d refuses is refused", () => {
  expect(() => decodeEventBatch(pack([1.0, []]))).toThrow(/array of 3 fields/);
  expect(() => decodeEventBatch(pack({ ts: 1, events: [], data_parallel_rank: 0 }))).toThrow(/array of 3 fields/);
  expect(() => decodeEventBatch(pack([1.0, [["BlockStored", [1], null, [1]]], 0]))).toThrow(/at least 5 fields/);
  expect(() => decodeEventBatch(pack([1.0, [["BlockStored", [1.5], null, [1], 1]], 0]))).toThrow(/not an integer/);
  expect(() => decodeEventBatch(pack([1.0, [["Evicted", [1]]], 0]))).toThrow(/unknown tag "Evicted"/);
  expect(() => decodeEventBatch(pack([1.0, [["BlockRemoved", [1], 5]], 0]))).toThrow(/medium is not a string/);
  expect(() => decodeEventBatch(pack([1.0, [["BlockStored", [1], null, [1], 1, null, "GPU", null, null, -1]], 0])))
    .toThrow(/group_idx is negative/);
});

test("LMPool's encoding decodes: float ts, uint64 hashes, the rank, extra_keys", () => {
  const b = decodeEventBatch(encodeEventBatch(1700000000, [
    {
      type: "BlockStored",
      blockHashes: [0xfedcba9876543210n, 1n],
      parentBlockHash: null,
      tokenIds: [1, 2, 3, 4],
      blockSize: 2,
      extraKeys: [["salt"], null],
    },
    { type: "BlockRemoved", blockHashes: [9n] },
  ], 1));
  expect(b.ts).toBeCloseTo(1700000000, 3);
  expect(b.dataParallelRank).toBe(1);
  expect(b.events[0]).toEqual({
    type: "BlockStored",
    blockHashes: [0xfedcba9876543210n, 1n],
    parentBlockHash: null,
    tokenIds: [1, 2, 3, 4],
    blockSize: 2,
    loraId: null,
    medium: "GPU",
    loraName: null,
    extraKeys: [["salt"], null],
    groupIdx: null,
  });
  expect(b.events[1]).toEqual({ type: "BlockRemoved", blockHashes: [9n], medium: "GPU", groupIdx: null });
});
