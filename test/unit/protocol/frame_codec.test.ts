// Frame boundaries, split chunks, and resynchronisation after garbage or bad lengths.
import { expect, test } from "bun:test";
import { encodeFrame, FRAME_HEADER_BYTES, FrameDecoder } from "../../../lib/protocol/frame_codec.ts";

const bytes = (...v: number[]) => new Uint8Array(v);
const okPayloads = (r: ReturnType<FrameDecoder["push"]>) =>
  r.filter((x) => x.ok).map((x) => (x.ok ? Array.from(x.payload) : []));

test("frames split at every byte boundary decode to the same payloads", () => {
  const stream = new Uint8Array([
    ...encodeFrame(bytes(1, 2, 3)),
    ...encodeFrame(bytes(9)),
    ...encodeFrame(new Uint8Array(300).fill(7)),
  ]);
  for (const step of [1, 2, 3, 5, 8, 13, stream.length]) {
    const d = new FrameDecoder();
    const got: number[][] = [];
    for (let i = 0; i < stream.length; i += step) got.push(...okPayloads(d.push(stream.subarray(i, i + step))));
    expect(got.length).toBe(3);
    expect(got[0]).toEqual([1, 2, 3]);
    expect(got[1]).toEqual([9]);
    expect(got[2]!.length).toBe(300);
    expect(d.buffered).toBe(0);
  }
});

test("garbage before a frame is reported once and skipped", () => {
  const d = new FrameDecoder();
  const r = d.push(new Uint8Array([0xde, 0xad, 0xbe, 0xef, 0x00, 0x11, ...encodeFrame(bytes(5, 6))]));
  const errors = r.filter((x) => !x.ok);
  expect(errors.length).toBe(1);
  expect(errors[0]!.ok ? "" : errors[0]!.error.code).toBe("bad_magic");
  expect(okPayloads(r)).toEqual([[5, 6]]);
});

test("a frame length beyond the limit is rejected and the next frame still decodes", () => {
  const d = new FrameDecoder(1024);
  const bad = encodeFrame(bytes(1));
  new DataView(bad.buffer).setUint32(4, 1 << 30, false);
  const r = d.push(new Uint8Array([...bad, ...encodeFrame(bytes(42))]));
  const err = r.find((x) => !x.ok);
  expect(err && !err.ok ? err.error.message : "").toContain("bad frame length 1073741824");
  expect(okPayloads(r)).toEqual([[42]]);
});

test("a zero length is a bad length", () => {
  const d = new FrameDecoder();
  const zero = new Uint8Array(FRAME_HEADER_BYTES);
  zero.set([0x4c, 0x4d, 0x50, 0x31]);
  const r = d.push(new Uint8Array([...zero, ...encodeFrame(bytes(3))]));
  expect(r.some((x) => !x.ok && x.error.code === "bad_length")).toBe(true);
  expect(okPayloads(r)).toEqual([[3]]);
});

test("a partial magic at the end of a garbage chunk survives to the next chunk", () => {
  const d = new FrameDecoder();
  const frame = encodeFrame(bytes(8, 8));
  expect(okPayloads(d.push(new Uint8Array([1, 2, 3, 4, 5, ...frame.subarray(0, 2)])))).toEqual([]);
  expect(okPayloads(d.push(frame.subarray(2)))).toEqual([[8, 8]]);
});
