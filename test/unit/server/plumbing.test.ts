// Router matching, lifecycle accounting and the SSE encoder on their own.
import { describe, expect, test } from "bun:test";
import { byteProgress } from "../../../lib/server/progress.ts";
import { ServerLifecycle } from "../../../lib/server/lifecycle.ts";
import { Router } from "../../../lib/server/router.ts";
import { SSE_DONE, sseEvent, sseResponse } from "../../../lib/server/sse.ts";

describe("router", () => {
  test("found, not found, method not allowed, HEAD and trailing slash", () => {
    const r = new Router<string>().add("GET", "/a", "ga").add("POST", "/a", "pa");
    expect(r.match("GET", "/a")).toEqual({ kind: "found", handler: "ga" });
    expect(r.match("post", "/a/")).toEqual({ kind: "found", handler: "pa" });
    expect(r.match("HEAD", "/a")).toEqual({ kind: "found", handler: "ga" });
    expect(r.match("GET", "/b")).toEqual({ kind: "not_found" });
    expect(r.match("DELETE", "/a")).toEqual({ kind: "method_not_allowed", allow: ["GET", "POST"] });
    expect(() => r.add("GET", "/a", "again")).toThrow(RangeError);
  });
});

describe("lifecycle", () => {
  test("drain resolves when the last scope closes; client abort aborts the scope", async () => {
    const life = new ServerLifecycle();
    const client = new AbortController();
    const a = life.open(client.signal);
    const b = life.open();
    expect(life.inFlight).toBe(2);
    let done = false;
    const drained = life.drain().then(() => (done = true));
    expect(life.draining).toBe(true);
    client.abort();
    expect(a.signal.aborted).toBe(true);
    expect(b.signal.aborted).toBe(false);
    a.close();
    a.close();
    await Promise.resolve();
    expect(done).toBe(false);
    b.close();
    await drained;
    expect(life.inFlight).toBe(0);
  });
});

describe("sse", () => {
  test("events are data lines; the stream ends with [DONE] and closes the scope", async () => {
    expect(sseEvent({ a: 1 })).toBe('data: {"a":1}\n\n');
    const life = new ServerLifecycle();
    const scope = life.open();
    async function* chunks() {
      yield { n: 1 };
      yield { n: 2 };
    }
    const res = sseResponse(chunks(), scope);
    expect(await res.text()).toBe(`data: {"n":1}\n\ndata: {"n":2}\n\n${SSE_DONE}`);
    expect(life.inFlight).toBe(0);
  });

  test("cancel aborts the scope and closes the producer", async () => {
    const life = new ServerLifecycle();
    const scope = life.open();
    let closed = false;
    async function* chunks() {
      try {
        for (let i = 0;; i++) yield { i };
      } finally {
        closed = true;
      }
    }
    const reader = sseResponse(chunks(), scope).body!.getReader();
    await reader.read();
    await reader.cancel();
    expect(scope.signal.aborted).toBe(true);
    expect(closed).toBe(true);
    expect(life.inFlight).toBe(0);
  });
});

describe("progress", () => {
  test("plain lines at each new 10% when not a terminal", () => {
    const lines: string[] = [];
    const p = byteProgress("Gen", { write: (t) => lines.push(t), isTTY: false });
    for (const done of [0, 5, 10, 15, 55, 100]) p.update(done, 100);
    p.done();
    expect(lines).toEqual([
      "Gen   0% (0.0/0.0 MB)\n",
      "Gen  10% (0.0/0.0 MB)\n",
      "Gen  55% (0.0/0.0 MB)\n",
      "Gen 100% (0.0/0.0 MB)\n",
    ]);
  });

  test("one redrawn line on a terminal, ended by done()", () => {
    const out: string[] = [];
    const p = byteProgress("Load", { write: (t) => out.push(t), isTTY: true });
    p.update(5e6, 10e6);
    p.update(10e6, 10e6);
    p.done();
    expect(out).toEqual(["\rLoad  50% (5.0/10.0 MB)", "\rLoad 100% (10.0/10.0 MB)", "\n"]);
  });
});
