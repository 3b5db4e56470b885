/**
 * Hand-written checks of the transfer phase messages and their acks, which cross the critical path
 * of every plan several times (transfer_messages.ts registers them with the codec). Each says only
 * "certainly valid": a message it accepts is one its zod schema accepts unchanged (known fields
 * only, so nothing would be stripped); anything else goes on to the schema, which also writes the
 * error. The schema checks are a large share of a small plan's dispatch-to-publish time: a plan
 * crosses a dozen encodes and decodes in three processes, each rare enough to run cold, where a
 * schema check costs far more than in a hot loop.
 * @module
 */
import {
  count,
  countList,
  ENVELOPE,
  finite,
  isObject,
  nonNegative,
  oneOf,
  optional,
  shape,
  str,
} from "../protocol/fast_check.ts";
import type { FastCheck } from "../protocol/messages.ts";

const planId = (v: unknown) => typeof v === "string" && v.length > 0;
const block = shape({ hash: str, parent: str, srcBlock: count, generation: count });

/** Fast checks by message type (the caller has checked `type` itself). */
export const TRANSFER_FAST_CHECKS: Readonly<Record<string, FastCheck>> = {
  transfer_prepare: shape({
    ...ENVELOPE,
    planId,
    mode: oneOf("copy", "move"),
    srcRank: count,
    dstRank: count,
    srcEpoch: count,
    dstEpoch: count,
    blocks: (v) => Array.isArray(v) && v.length > 0 && v.every((b) => isObject(b) && block(b)),
    deadline: finite,
  }),
  transfer_execute: shape({
    ...ENVELOPE,
    planId,
    srcRank: count,
    dstRank: count,
    srcBlocks: countList,
    dstBlocks: optional(countList),
  }),
  transfer_publish: shape({ ...ENVELOPE, planId }),
  transfer_finalize: shape({ ...ENVELOPE, planId, mode: oneOf("copy", "move") }),
  transfer_abort: shape({ ...ENVELOPE, planId, reason: str }),
  transfer_ack: shape({
    ...ENVELOPE,
    planId,
    phase: oneOf("prepare", "execute", "publish", "finalize", "abort"),
    rank: count,
    ok: (v) => typeof v === "boolean",
    dstBlocks: optional(countList),
    bytes: optional(count),
    elapsedMs: optional(nonNegative),
    released: optional(count),
    handledMs: optional(nonNegative),
    receivedAt: optional(finite),
    error: optional(str),
  }),
};
