/**
 * Fields shared by every message: `id` numbers a request whose reply carries it back as `replyTo`.
 * @module
 */
import { z } from "zod";

/** A non-negative integer (ranks, block ids, counts). */
export const Count = z.number().int().nonnegative();

/** Any number, including -Infinity and NaN (a logprob can be -Infinity). */
export const AnyNumber = z.custom<number>((v) => typeof v === "number", { message: "expected a number" });

/** Correlation fields present on every message. */
export const envelope = {
  /** Set by a sender that expects a reply. */
  id: Count.optional(),
  /** Set on a reply: the `id` of the message it answers. */
  replyTo: Count.optional(),
};
