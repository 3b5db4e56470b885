/**
 * Length-prefixed frames: 4 magic bytes "LMP1", a big-endian uint32 payload length, the payload.
 * The magic lets a receiver resynchronise after garbage or a bad length instead of tearing the
 * connection down: it reports one error and scans forward to the next magic.
 * @module
 */
import { ProtocolError } from "./protocol_errors.ts";

/** "LMP1": the first four bytes of every frame. */
const FRAME_MAGIC: Uint8Array = new Uint8Array([0x4c, 0x4d, 0x50, 0x31]);
/** Magic + length. */
export const FRAME_HEADER_BYTES = 8;
/** Default largest accepted payload (64 MiB); larger lengths are treated as corruption. */
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;

/** Wraps a payload in a frame header. */
export function encodeFrame(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_BYTES + payload.byteLength);
  out.set(FRAME_MAGIC, 0);
  new DataView(out.buffer).setUint32(4, payload.byteLength, false);
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** One decoded frame payload, or the reason bytes were skipped. */
export type FrameResult = { ok: true; payload: Uint8Array } | { ok: false; error: ProtocolError };

/** Incremental frame decoder: push arbitrary chunks, get whole payloads and errors in order. */
export class FrameDecoder {
  #buf = new Uint8Array(64 * 1024);
  #start = 0;
  #end = 0;
  /** True while skipping garbage: the error for that run was already reported. */
  #resyncing = false;

  constructor(readonly maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES) {
    if (!Number.isInteger(maxFrameBytes) || maxFrameBytes <= 0) {
      throw new RangeError(`maxFrameBytes must be a positive integer, got ${maxFrameBytes}`);
    }
  }

  /** Bytes held waiting for the rest of a frame. */
  get buffered(): number {
    return this.#end - this.#start;
  }

  /** Appends a chunk and returns every frame (or error) it completes. */
  push(chunk: Uint8Array): FrameResult[] {
    this.#append(chunk);
    const out: FrameResult[] = [];
    for (;;) {
      const avail = this.#end - this.#start;
      if (avail < FRAME_MAGIC.length) break;
      if (!this.#magicAt(this.#start)) {
        this.#skipToMagic(out, `bad frame magic (expected "LMP1")`, "bad_magic");
        continue;
      }
      if (avail < FRAME_HEADER_BYTES) break;
      const len = new DataView(this.#buf.buffer, this.#buf.byteOffset + this.#start + 4, 4).getUint32(0, false);
      if (len === 0 || len > this.maxFrameBytes) {
        this.#start += 1; // the magic was not a real frame start
        this.#skipToMagic(out, `bad frame length ${len} (must be 1..${this.maxFrameBytes})`, "bad_length");
        continue;
      }
      if (avail < FRAME_HEADER_BYTES + len) break;
      const from = this.#start + FRAME_HEADER_BYTES;
      out.push({ ok: true, payload: this.#buf.slice(from, from + len) });
      this.#start = from + len;
      this.#resyncing = false;
    }
    if (this.#start === this.#end) this.#start = this.#end = 0;
    return out;
  }

  #magicAt(i: number): boolean {
    const b = this.#buf;
    return b[i] === 0x4c && b[i + 1] === 0x4d && b[i + 2] === 0x50 && b[i + 3] === 0x31;
  }

  #skipToMagic(out: FrameResult[], message: string, code: "bad_magic" | "bad_length"): void {
    if (!this.#resyncing) {
      out.push({ ok: false, error: new ProtocolError(`${message}; skipping to the next frame`, code) });
      this.#resyncing = true;
    }
    let i = this.#start;
    const last = this.#end - FRAME_MAGIC.length;
    while (i <= last && !this.#magicAt(i)) i++;
    if (i <= last) {
      this.#start = i;
      this.#resyncing = false; // a new problem after this point is a new error
    } else this.#start = Math.max(this.#start, this.#end - (FRAME_MAGIC.length - 1)); // may be a partial magic
  }

  #append(chunk: Uint8Array): void {
    const need = this.#end + chunk.byteLength;
    if (need > this.#buf.byteLength) {
      const live = this.#end - this.#start;
      if (live + chunk.byteLength <= this.#buf.byteLength / 2) {
        this.#buf.copyWithin(0, this.#start, this.#end);
      } else {
        let cap = this.#buf.byteLength;
        while (cap < (live + chunk.byteLength) * 2) cap *= 2;
        const next = new Uint8Array(cap);
        next.set(this.#buf.subarray(this.#start, this.#end));
        this.#buf = next;
      }
      this.#start = 0;
      this.#end = live;
    }
    this.#buf.set(chunk, this.#end);
    this.#end += chunk.byteLength;
  }
}
