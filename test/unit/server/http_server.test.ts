// The app behind a real Bun listener, driven by the official `openai` client: wire compatibility
// of the JSON and SSE shapes, and a TCP disconnect mid-stream aborting the engine requests.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { type HttpServer, startHttpServer } from "../../../lib/runtime/http_server.ts";
import { createApp } from "../../../lib/server/app.ts";
import { FakeEngine } from "./fake_engine.ts";

let engine: FakeEngine;
let http: HttpServer;
let client: OpenAI;

beforeAll(async () => {
  engine = new FakeEngine();
  const app = createApp({ engine, servedModelName: "fake", apiKey: "k" });
  http = await startHttpServer({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  client = new OpenAI({ baseURL: `${http.url}/v1`, apiKey: "k", maxRetries: 0 });
});
afterAll(() => http.stop(true));

describe("openai client over HTTP", () => {
  test("port 0 binds a real port", () => {
    expect(http.port).toBeGreaterThan(0);
    expect(http.url).toBe(`http://127.0.0.1:${http.port}`);
  });

  test("completions and chat, plain and streamed, with usage", async () => {
    const c = await client.completions.create({ model: "fake", prompt: "hello", max_tokens: 4, seed: 1 });
    expect(c.choices[0]!.text).toHaveLength(4);
    expect(c.usage?.total_tokens).toBe(9);
    const chat = await client.chat.completions.create({
      model: "fake",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 3,
    });
    expect(chat.choices[0]!.message.content).toHaveLength(3);
    const stream = await client.chat.completions.create({
      model: "fake",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(chat.choices[0]!.message.content!);
    expect(usage?.completion_tokens).toBe(3);
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["fake"]);
  });

  test("errors surface as typed openai errors", async () => {
    const bad = await client.completions.create({ model: "fake", prompt: "a", temperature: -1 }).catch((e: unknown) =>
      e
    );
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("temperature");
    const wrongKey = new OpenAI({ baseURL: `${http.url}/v1`, apiKey: "nope", maxRetries: 0 });
    expect(await wrongKey.models.list().catch((e: unknown) => e)).toBeInstanceOf(OpenAI.AuthenticationError);
  });

  test("a client that drops the connection mid-stream aborts its request", async () => {
    engine.tokenDelayMs = 3;
    const before = engine.requests.length;
    const abort = new AbortController();
    const stream = await client.completions.create({ model: "fake", prompt: "a", max_tokens: 50, stream: true }, {
      signal: abort.signal,
    });
    let got = 0;
    try {
      for await (const _ of stream) if (++got === 3) abort.abort();
    } catch {
      // the client's own abort error
    }
    for (let i = 0; i < 100 && engine.live > 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(engine.live).toBe(0);
    expect(engine.requests[before]!.finishReason).toBe("abort");
    engine.tokenDelayMs = 0;
  });

  test("a client that drops the connection while waiting for a non-streamed answer aborts it", async () => {
    engine.tokenDelayMs = 3;
    const before = engine.requests.length;
    const abort = new AbortController();
    const pending = client.completions.create({ model: "fake", prompt: "a", max_tokens: 50 }, { signal: abort.signal })
      .catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 20));
    expect(engine.live).toBe(1);
    abort.abort();
    await pending;
    for (let i = 0; i < 100 && engine.live > 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(engine.live).toBe(0);
    expect(engine.requests[before]!.finishReason).toBe("abort");
    engine.tokenDelayMs = 0;
  });
});

describe("serve() shutdown", () => {
  test("close() drains: 503 for new requests, the open stream completes, then the engine shuts down", async () => {
    const { serve } = await import("../../../lib/server/serve.ts");
    const fake = new FakeEngine();
    fake.tokenDelayMs = 1;
    const running = await serve({ engine: fake, port: 0 });
    const res = await fetch(`${running.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ prompt: "a", max_tokens: 20, stream: true }),
    });
    const reader = res.body!.getReader();
    let sse = new TextDecoder().decode((await reader.read()).value);
    let closed = false;
    const closing = running.close().then(() => (closed = true));
    expect(
      (await fetch(`${running.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "a" }) })).status,
    ).toBe(503);
    expect((await fetch(`${running.url}/health`)).status).toBe(503);
    expect(closed).toBe(false);
    for (let r = await reader.read(); !r.done; r = await reader.read()) sse += new TextDecoder().decode(r.value);
    expect(sse.endsWith("data: [DONE]\n\n")).toBe(true);
    await closing;
    expect(fake.healthy).toBe(false); // the fake's shutdown() ran
    expect(await fetch(`${running.url}/health`).then(() => "answered", () => "refused")).toBe("refused");
  });
});
