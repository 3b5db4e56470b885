/**
 * Building blocks of hand-written message checks (messages.ts's FastCheck): each says only
 * "certainly valid", for the plain shapes a hot message has; anything else goes on to the schema.
 * An object check accepts known keys only, so nothing the schema would strip passes unchecked.
 * @module
 */
import { isCountListElement } from "./envelope.ts";

/**
 * A hand-written check of a hot message that only ever says "certainly valid": a message it
 * accepts is one the type's schema accepts unchanged; anything else goes on to the schema, which
 * also writes the error.
 */
export type FastCheck = (fields: Record<string, unknown>) => boolean;

/** A field check. */
export type FieldCheck = (v: unknown) => boolean;

export const count: FieldCheck = (v) => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
export const finite: FieldCheck = (v) => typeof v === "number" && Number.isFinite(v);
export const nonNegative: FieldCheck = (v) => finite(v) && (v as number) >= 0;
export const str: FieldCheck = (v) => typeof v === "string";
export const bool: FieldCheck = (v) => typeof v === "boolean";
export const countList: FieldCheck = (v) => Array.isArray(v) && v.every(isCountListElement);
export const optional = (check: FieldCheck): FieldCheck => (v) => v === undefined || check(v);
export const oneOf = (...values: string[]): FieldCheck => (v) => typeof v === "string" && values.includes(v);

/** The envelope fields every message may carry. */
export const ENVELOPE = { type: str, id: optional(count), replyTo: optional(count) };

/** A plain object (not null, not an array). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A check of an object whose every key is in `fields` and passes its check (absent keys read as undefined). */
export function shape(fields: Record<string, FieldCheck>): FastCheck {
  const keys = Object.keys(fields);
  return (m) => {
    for (const k in m) if (!Object.hasOwn(fields, k)) return false;
    for (const k of keys) if (!fields[k]!(m[k])) return false;
    return true;
  };
}

/** An array whose every element is an object that `element` accepts. */
export function arrayOf(element: FastCheck): FieldCheck {
  return (v) => Array.isArray(v) && v.every((e) => isObject(e) && element(e));
}
