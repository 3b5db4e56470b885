/**
 * Fields shared by every message: `id` numbers a request whose reply carries it back as `replyTo`.
 * @module
 */
import { z } from "zod";

/** A non-negative integer (ranks, block ids, counts). */
export const Count = z.number().int().nonnegative();

/** What {@link CountList} accepts as an element: a non-negative integer. */
export function isCountListElement(x: unknown): x is number {
  return typeof x === "number" && Number.isInteger(x) && x >= 0;
}

/**
 * A list of non-negative integers (token ids, block ids), checked in one loop and passed through
 * without a copy: z.array(Count) took 0.3 ms per 9k-token prompt at both ends of every dispatch. A
 * bad element is reported at its index, like an array schema's.
 */
export const CountList = z.custom<number[]>((v) => Array.isArray(v), { message: "expected an array" }).superRefine(
  (v, ctx) => {
    for (let i = 0; i < v.length; i++) {
      if (!isCountListElement(v[i])) {
        ctx.addIssue({ code: "custom", path: [i], message: "expected a non-negative integer" });
        return;
      }
    }
  },
);

/** Any number, including -Infinity and NaN (a logprob can be -Infinity). */
export const AnyNumber = z.custom<number>((v) => typeof v === "number", { message: "expected a number" });

/** Correlation fields present on every message. */
export const envelope = {
  /** Set by a sender that expects a reply. */
  id: Count.optional(),
  /** Set on a reply: the `id` of the message it answers. */
  replyTo: Count.optional(),
};
