/**
 * Hand-written checks of the runtime's per-step messages (messages.ts registers them): the token
 * deltas a worker sends every step, one item per running sequence, which the schema walks field by
 * field at both ends of the hop, and the heartbeats. Items carrying logprobs go to the schema.
 * @module
 */
import {
  arrayOf,
  count,
  countList,
  ENVELOPE,
  type FastCheck,
  finite,
  nonNegative,
  optional,
  shape,
  str,
} from "./fast_check.ts";

const tokenDeltaItem = shape({ requestId: str, tokenIds: countList, text: str });

/** Fast checks by runtime message type. */
export const RUNTIME_FAST_CHECKS: Readonly<Record<string, FastCheck>> = {
  token_delta: shape({ ...ENVELOPE, items: arrayOf(tokenDeltaItem) }),
  heartbeat: shape({ ...ENVELOPE, seq: count, sentAt: finite, busyMs: optional(nonNegative) }),
};
