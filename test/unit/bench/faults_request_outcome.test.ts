// The fault suite's request classification against a real local HTTP server that answers each
// way a broken server can: every answer lands in completed, clear error or lost as the suite's
// rule says, and nothing outlives its deadline.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sendClassified } from "../../../bench/faults/request_outcome.ts";

const enc = new TextEncoder();
const sse = (events: string[], end = true) =>
  new Response(
    new ReadableStream({
      async start(c) {
        for (const e of events) c.enqueue(enc.encode(`data: ${e}\n\n`));
        if (end) c.close();
      },
    }),
    { headers: { "content-type": "text/event-stream" } },
  );

const chunk = (text: string, finish: string | null = null) =>
  JSON.stringify({ choices: [{ index: 0, text, finish_reason: finish }] });
const errorBody = {
  error: {
    message: "temperature must be a finite float32",
    type: "invalid_request_error",
    param: "temperature",
    code: null,
  },
};

let server: ReturnType<typeof Bun.serve>;
let base = "";

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      await req.text();
      switch (path) {
        case "/ok":
          return Response.json({ choices: [{ index: 0, text: "hi", finish_reason: "length" }] });
        case "/tokenize":
          return Response.json({ count: 2, max_model_len: 8, tokens: [1, 2] });
        case "/bad-request":
          return Response.json(errorBody, { status: 400 });
        case "/too-large":
          return new Response("payload too large", { status: 413 });
        case "/garbage-200":
          return new Response("<html>oops</html>", { status: 200 });
        case "/no-finish":
          return Response.json({ choices: [{ index: 0, text: "hi", finish_reason: null }] });
        case "/stream-ok":
          return sse([chunk("a"), chunk("b", "stop"), "[DONE]"]);
        case "/stream-error":
          return sse([chunk("a"), JSON.stringify(errorBody), "[DONE]"]);
        case "/stream-no-done":
          return sse([chunk("a"), chunk("b", "length")]);
        case "/stream-error-no-done":
          return sse([chunk("a"), JSON.stringify(errorBody)]);
        case "/stream-abort":
          return sse([chunk("a", "abort"), "[DONE]"]);
        case "/stream-garbage":
          return sse(["not json", "[DONE]"]);
        case "/stream-hang":
          return sse([chunk("a")], false);
        case "/hang":
          return new Promise<Response>(() => {});
        default:
          return new Response("no", { status: 404 });
      }
    },
  });
  base = `http://127.0.0.1:${server.port}`;
});

afterAll(() => server.stop(true));

const send = (path: string, stream = false, deadlineMs = 5000, more = {}) =>
  sendClassified(base, { label: path, path, body: { prompt: "x" }, stream, deadlineMs, ...more });

test("finished answers are completed, OpenAI error bodies are clear errors", async () => {
  expect((await send("/ok")).kind).toBe("completed");
  expect((await send("/tokenize")).kind).toBe("completed");
  const bad = await send("/bad-request");
  expect([bad.kind, bad.status, bad.detail]).toEqual(["clear_error", 400, "temperature must be a finite float32"]);
  const s = await send("/stream-ok", true);
  expect([s.kind, s.detail]).toEqual(["completed", "stop"]);
  expect(s.firstTokenAt).not.toBeNull();
  expect((await send("/stream-error", true)).kind).toBe("clear_error");
});

test("an error without an OpenAI body, garbage, or a 200 that is not finished is lost", async () => {
  for (
    const [path, stream, why] of [
      ["/too-large", false, "not JSON"],
      ["/garbage-200", false, "not JSON"],
      ["/no-finish", false, "not a finished answer"],
      ["/stream-no-done", true, "without [DONE]"],
      ["/stream-error-no-done", true, "without [DONE]"],
      ["/stream-abort", true, "no error event"],
      ["/stream-garbage", true, "not JSON"],
      ["/ok", true, "not an event stream"],
    ] as const
  ) {
    const o = await send(path, stream);
    expect(`${path}: ${o.kind}`).toBe(`${path}: lost`);
    expect(o.detail).toContain(why);
  }
});

test("a hung answer is lost at its deadline, a hang-up on purpose is cancelled, a refused connection is a transport loss", async () => {
  const t0 = performance.now();
  const hung = await send("/hang", false, 300);
  expect([hung.kind, hung.transport]).toEqual(["lost", false]);
  expect(hung.detail).toContain("300 ms deadline");
  const hungStream = await send("/stream-hang", true, 300);
  expect(hungStream.kind).toBe("lost");
  expect(performance.now() - t0).toBeLessThan(3000);

  const cancel = new AbortController();
  const cancelled = await send("/stream-hang", true, 5000, {
    cancel: cancel.signal,
    onFirstToken: () => cancel.abort(),
  });
  expect(cancelled.kind).toBe("cancelled");

  const dead = Bun.serve({ port: 0, fetch: () => new Response("x") });
  const port = dead.port;
  dead.stop(true);
  const refused = await sendClassified(`http://127.0.0.1:${port}`, {
    label: "refused",
    path: "/ok",
    body: {},
    stream: false,
    deadlineMs: 2000,
  });
  expect([refused.kind, refused.transport]).toEqual(["lost", true]);
});
