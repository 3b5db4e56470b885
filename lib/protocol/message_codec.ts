/**
 * Message <-> frame bytes: msgpackr payloads validated by the message's zod schema. Decoding never
 * throws past this module's result type; failures become ProtocolErrors naming type and field.
 * @module
 */
import { Packr } from "msgpackr";
import { encodeFrame } from "./frame_codec.ts";
import { fastCheckOf, isMessageType, type Message, messageSchema } from "./messages.ts";
import { ProtocolError } from "./protocol_errors.ts";

// Plain maps, no record extension: every peer (and every runtime) decodes the same objects.
const packr = new Packr({ useRecords: false, mapsAsObjects: true });

/** Encodes a message as one frame. Validates first: sending a bad message is the sender's bug. */
export function encodeMessage(message: Message): Uint8Array {
  const checked = validateMessage(message);
  if (!checked.ok) throw checked.error;
  return encodeFrame(packr.pack(message));
}

/** Encodes raw bytes of any value as a frame without validation (tests, fault injection). */
export function encodeUnchecked(value: unknown): Uint8Array {
  return encodeFrame(packr.pack(value));
}

/** A decoded message or why it was rejected. */
export type DecodeResult = { ok: true; message: Message } | { ok: false; error: ProtocolError };

/** Decodes and validates one frame payload. */
export function decodeMessage(payload: Uint8Array): DecodeResult {
  let value: unknown;
  try {
    value = packr.unpack(payload);
  } catch (e) {
    return {
      ok: false,
      error: new ProtocolError(
        `undecodable frame payload (${payload.byteLength} bytes): ${(e as Error).message}`,
        "undecodable",
        {},
        { cause: e },
      ),
    };
  }
  return validateMessage(value);
}

/** Checks a decoded value against the schema of its `type`. */
export function validateMessage(value: unknown): DecodeResult {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return {
      ok: false,
      error: new ProtocolError(`message must be a map with a "type" field, got ${describe(value)}`, "schema", {
        field: "type",
      }),
    };
  }
  const rec = value as Record<string, unknown>;
  const id = typeof rec.id === "number" ? rec.id : undefined;
  const type = rec.type;
  if (!isMessageType(type)) {
    return {
      ok: false,
      error: new ProtocolError(`unknown message type ${JSON.stringify(type)}`, "unknown_type", { field: "type", id }),
    };
  }
  // Hot messages (the transfer phases): a hand-written check vouches for most; the schema sees the rest.
  if (fastCheckOf(type)?.(rec)) return { ok: true, message: rec as Message };
  const parsed = messageSchema(type).safeParse(value);
  if (parsed.success) return { ok: true, message: parsed.data as Message };
  const issue = parsed.error.issues[0];
  const field = issue ? issue.path.map(String).join(".") : "";
  const got = issue ? describe(fieldValue(rec, issue.path)) : "?";
  return {
    ok: false,
    error: new ProtocolError(
      `invalid ${type} message: field "${field}" ${issue?.message ?? "is invalid"} (got ${got})`,
      "schema",
      { messageType: type, field, id },
    ),
  };
}

function fieldValue(root: unknown, path: readonly PropertyKey[]): unknown {
  let v = root;
  for (const k of path) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

function describe(v: unknown): string {
  if (v === undefined) return "nothing";
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (typeof v === "object" && v !== null) return "a map";
  return String(v);
}
