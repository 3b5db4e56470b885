/**
 * Codec helpers shared by the protocol message tests: a round trip through one msgpackr frame,
 * decoding a raw (unchecked) payload, and the checks the relay-message tests make on byte fields.
 * @module
 */
import { expect } from "bun:test";
import { FrameDecoder } from "../../../lib/protocol/frame_codec.ts";
import { decodeMessage, encodeMessage, encodeUnchecked } from "../../../lib/protocol/message_codec.ts";
import type { Message } from "../../../lib/protocol/messages.ts";

/** Encodes `m` into one frame and decodes it back; throws the decoder's error if any. */
export function roundTrip(m: Message): Message {
  const frames = new FrameDecoder().push(encodeMessage(m));
  expect(frames.length).toBe(1);
  const f = frames[0]!;
  if (!f.ok) throw f.error;
  const d = decodeMessage(f.payload);
  if (!d.ok) throw d.error;
  return d.message;
}

/** Decodes a payload encoded without the schema check (the 8-byte frame header stripped). */
export const decodeUnchecked = (raw: unknown) => decodeMessage(encodeUnchecked(raw).subarray(8));

/** Compares with byte arrays as plain arrays (msgpackr may hand back a Buffer). */
export const plain = (m: unknown) =>
  JSON.parse(JSON.stringify(m, (_k, v) => (v instanceof Uint8Array ? Array.from(v) : v)));

/**
 * Every sample survives the round trip, and the byte field `key` of the first comes back as a
 * Uint8Array equal to `bytes` byte for byte.
 */
export function expectRoundTripsWithBytes(samples: Message[], key: string, bytes: Uint8Array): void {
  for (const m of samples) expect(plain(roundTrip(m))).toEqual(plain(m));
  const back = roundTrip(samples[0]!) as unknown as Record<string, Uint8Array>;
  expect(back[key]).toBeInstanceOf(Uint8Array);
  expect(Array.from(back[key]!)).toEqual(Array.from(bytes));
}

/** Decoding `raw` fails naming `field`. */
export function expectRejectedField(raw: unknown, field: string): void {
  const d = decodeUnchecked(raw);
  expect(d.ok).toBe(false);
  if (!d.ok) expect(d.error.details.field).toBe(field);
}

/**
 * For each bad value, decoding `withBytes(bad)` fails naming `messageType` and `field`, with a
 * message that says the `size` bytes expected.
 */
export function expectBytesFieldRejected(
  messageType: string,
  field: string,
  size: number,
  bads: unknown[],
  withBytes: (bad: unknown) => unknown,
): void {
  for (const bad of bads) {
    const d = decodeUnchecked(withBytes(bad));
    expect(d.ok).toBe(false);
    if (d.ok) continue;
    expect(d.error.details).toMatchObject({ messageType, field });
    expect(d.error.message).toContain(`${size} bytes`);
  }
}
