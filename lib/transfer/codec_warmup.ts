/**
 * Start-up warm-up of the message codec on the transfer phases. Plans are rare next to step
 * traffic, so their encode and decode paths would stay in the runtime's slow (not yet optimized)
 * tiers for the first plans, whose first encodes cost far more than later ones, and a plan's
 * critical path crosses about a dozen encodes and decodes in three processes.
 * Each process that takes part in transfers runs these messages through the codec before it
 * declares itself ready.
 * @module
 */
import { parseSetting, readSetting } from "../runtime/env.ts";
import { FrameDecoder } from "../protocol/frame_codec.ts";
import { decodeMessage, encodeMessage } from "../protocol/message_codec.ts";
import type { Message } from "../protocol/messages.ts";
// The phase messages register themselves with the codec when this module loads.
import "./transfer_messages.ts";

/** Rounds of {@link warmTransferCodec} by default. */
const DEFAULT_CODEC_WARMUP_ROUNDS = 1000;

/** Rounds from LMPOOL_CODEC_WARMUP (0 turns the warm-up off), else the default. */
export function codecWarmupRounds(text?: string): number {
  const n = text === undefined ? readSetting("LMPOOL_CODEC_WARMUP") : parseSetting("LMPOOL_CODEC_WARMUP", text);
  return n ?? DEFAULT_CODEC_WARMUP_ROUNDS;
}

/** One message of each transfer phase and ack shape, as a 1-block plan sends them. */
export function transferSampleMessages(): Message[] {
  const planId = "warmup-1", hash = "0".repeat(32);
  const base = { planId, srcRank: 0, dstRank: 1 };
  return [
    {
      type: "transfer_prepare",
      id: 1,
      ...base,
      mode: "copy",
      srcEpoch: 1,
      dstEpoch: 1,
      blocks: [{ hash, parent: hash, srcBlock: 3, generation: 2 }],
      deadline: 1.7e12,
    },
    { type: "transfer_execute", id: 2, ...base, srcBlocks: [3] },
    { type: "transfer_execute", id: 3, ...base, srcBlocks: [3], dstBlocks: [5] },
    { type: "transfer_publish", id: 4, planId },
    { type: "transfer_finalize", id: 5, planId, mode: "move" },
    { type: "transfer_abort", id: 6, planId, reason: "warm-up" },
    {
      type: "transfer_ack",
      replyTo: 1,
      planId,
      phase: "prepare",
      rank: 1,
      ok: true,
      dstBlocks: [5],
      handledMs: 0.05,
      receivedAt: 1.7e12,
    },
    {
      type: "transfer_ack",
      replyTo: 2,
      planId,
      phase: "execute",
      rank: 0,
      ok: true,
      bytes: 1 << 20,
      elapsedMs: 0.2,
      handledMs: 0.3,
      receivedAt: 1.7e12,
    },
    {
      type: "transfer_ack",
      replyTo: 5,
      planId,
      phase: "finalize",
      rank: 0,
      ok: true,
      released: 1,
      handledMs: 0.01,
      receivedAt: 1.7e12,
    },
  ];
}

/** Encodes and decodes every transfer sample `rounds` times; returns the milliseconds it took. */
export function warmTransferCodec(rounds: number = DEFAULT_CODEC_WARMUP_ROUNDS): number {
  if (!Number.isInteger(rounds) || rounds < 0) {
    throw new RangeError(`rounds must be a non-negative integer, got ${rounds}`);
  }
  const t0 = performance.now();
  const samples = transferSampleMessages();
  const decoder = new FrameDecoder();
  for (let r = 0; r < rounds; r++) {
    for (const m of samples) {
      for (const frame of decoder.push(encodeMessage(m))) {
        if (!frame.ok) throw frame.error;
        const back = decodeMessage(frame.payload);
        if (!back.ok) throw back.error;
      }
    }
  }
  return performance.now() - t0;
}
