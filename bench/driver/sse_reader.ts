/**
 * Reads server-sent events from a fetch() body: yields the data of each event (multi-line data
 * joined with "\n"), skipping comments and other fields. Lines may end in \n, \r\n or \r, and
 * network chunks may split a line or a UTF-8 character anywhere.
 * @module
 */

/** Yields each event's data, in order. */
export async function* readSseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = "";
  let data: string[] = [];
  const takeLine = (line: string): string | undefined => {
    if (line === "") {
      const event = data.length ? data.join("\n") : undefined;
      data = [];
      return event;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    return undefined;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      // A trailing \r may be the first half of \r\n: keep it until more arrives.
      for (let m = /\r\n|\n|\r(?!$)/.exec(buffer); m; m = /\r\n|\n|\r(?!$)/.exec(buffer)) {
        const event = takeLine(buffer.slice(0, m.index));
        buffer = buffer.slice(m.index + m[0].length);
        if (event !== undefined) yield event;
      }
      if (done) break;
    }
    const tail = takeLine(buffer.replace(/\r$/, ""));
    if (tail !== undefined) yield tail;
    const last = takeLine("");
    if (last !== undefined) yield last;
  } finally {
    reader.releaseLock();
  }
}
