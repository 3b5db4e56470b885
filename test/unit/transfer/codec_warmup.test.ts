import { expect, test } from "bun:test";
import { codecWarmupRounds, transferSampleMessages, warmTransferCodec } from "../../../lib/transfer/codec_warmup.ts";
import { validateMessage } from "../../../lib/protocol/message_codec.ts";

test("every warm-up sample is a valid message, and every transfer message type is sampled", () => {
  const samples = transferSampleMessages();
  for (const m of samples) expect(validateMessage(m)).toMatchObject({ ok: true });
  const types = new Set(samples.map((m) => m.type));
  for (
    const t of [
      "transfer_prepare",
      "transfer_execute",
      "transfer_publish",
      "transfer_finalize",
      "transfer_abort",
      "transfer_ack",
    ]
  ) expect(types.has(t as never)).toBe(true);
});

test("the warm-up round-trips the samples and reports its time", () => {
  expect(warmTransferCodec(3)).toBeGreaterThanOrEqual(0);
  expect(warmTransferCodec(0)).toBeGreaterThanOrEqual(0);
  expect(() => warmTransferCodec(-1)).toThrow(/rounds/);
});

test("LMPOOL_CODEC_WARMUP: default, off, bad values named", () => {
  expect(codecWarmupRounds(undefined)).toBe(1000);
  expect(codecWarmupRounds("0")).toBe(0);
  expect(codecWarmupRounds("250")).toBe(250);
  expect(() => codecWarmupRounds("lots")).toThrow(/LMPOOL_CODEC_WARMUP.*"lots"/);
  expect(() => codecWarmupRounds("-3")).toThrow(/LMPOOL_CODEC_WARMUP/);
});
