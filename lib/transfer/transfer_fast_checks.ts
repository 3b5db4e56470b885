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
import { isCountListElement } from "../protocol/envelope.ts";
import type { FastCheck } from "../protocol/messages.ts";

type Fields = Record<string, unknown>;

const count = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const finite = (v: unknown) => typeof v === "number" && Number.isFinite(v);
const planId = (v: unknown) => typeof v === "string" && v.length > 0;
const str = (v: unknown) => typeof v === "string";
const optional = (check: (v: unknown) => boolean) => (v: unknown) => v === undefined || check(v);
const countList = (v: unknown) => Array.isArray(v) && v.every(isCountListElement);
const oneOf = (...values: string[]) => (v: unknown) => typeof v === "string" && values.includes(v);

const ENVELOPE = { type: str, id: optional(count), replyTo: optional(count) };

/** A check of an object whose every key is in `fields` and passes its check (absent keys read as undefined). */
function shape(fields: Record<string, (v: unknown) => boolean>): FastCheck {
  const keys = Object.keys(fields);
  return (m) => {
    for (const k in m) if (!Object.hasOwn(fields, k)) return false;
    for (const k of keys) if (!fields[k]!(m[k])) return false;
    return true;
  };
}

const isObject = (v: unknown): v is Fields => typeof v === "object" && v !== null && !Array.isArray(v);
const block = shape({ hash: str, parent: str, srcBlock: count, generation: count });
const nonNegative = (v: unknown) => finite(v) && (v as number) >= 0;

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
