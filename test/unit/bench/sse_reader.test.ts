// SSE parsing over arbitrary network chunking.
import { expect, test } from "bun:test";
import { readSseData } from "../../../bench/driver/sse_reader.ts";

function streamOf(chunks: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const x of chunks) c.enqueue(typeof x === "string" ? enc.encode(x) : x);
      c.close();
    },
  });
}

async function collect(chunks: (string | Uint8Array)[]): Promise<string[]> {
  const out: string[] = [];
  for await (const d of readSseData(streamOf(chunks))) out.push(d);
  return out;
}

test("events split anywhere, with CRLF, comments, other fields and multi-line data", async () => {
  const text =
    ': keep-alive\r\ndata: {"a":1}\r\n\r\nevent: x\ndata:{"b":2}\n\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n';
  const expected = ['{"a":1}', '{"b":2}', "line1\nline2", "[DONE]"];
  expect(await collect([text])).toEqual(expected);
  for (const size of [1, 2, 3, 7]) {
    const parts: string[] = [];
    for (let i = 0; i < text.length; i += size) parts.push(text.slice(i, i + size));
    expect(await collect(parts)).toEqual(expected);
  }
});

test("a multi-byte character split across chunks survives", async () => {
  const bytes = new TextEncoder().encode('data: "héllo ✓"\n\n');
  expect(await collect([bytes.slice(0, 9), bytes.slice(9, 15), bytes.slice(15)])).toEqual(['"héllo ✓"']);
});

test("a final event without its blank line is still delivered", async () => {
  expect(await collect(["data: x\n\ndata: last"])).toEqual(["x", "last"]);
});
