// The OpenAI-compatible app end to end in-process (app.fetch), against a GenerationEngine double.
import { describe, expect, test } from "bun:test";
import { createApp, type ServerApp } from "../../../lib/server/app.ts";
import { FakeEngine } from "./fake_engine.ts";
import { readSse } from "./sse_helpers.ts";

function setup(apiKey?: string): { engine: FakeEngine; app: ServerApp } {
  const engine = new FakeEngine();
  return { engine, app: createApp({ engine, servedModelName: "served", apiKey }) };
}

function post(app: ServerApp, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return app.fetch(
    new Request(`http://x${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    }),
  );
}

// deno-lint-ignore no-explicit-any
type Json = any;

describe("completions", () => {
  test("non-streaming: text, usage, finish_reason, and the request the engine saw", async () => {
    const { engine, app } = setup();
    const res = await post(app, "/v1/completions", {
      model: "served",
      prompt: "hello",
      max_tokens: 5,
      temperature: 0,
      seed: 3,
      stop: "zz",
    });
    expect(res.status).toBe(200);
    const body: Json = await res.json();
    expect(body.object).toBe("text_completion");
    expect(body.model).toBe("served");
    expect(body.id).toMatch(/^cmpl-/);
    expect(body.choices).toHaveLength(1);
    expect(body.choices[0].text).toHaveLength(5);
    expect(body.choices[0].finish_reason).toBe("length");
    expect(body.usage).toEqual({ prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 });
    const seen = engine.requests[0]!;
    expect(seen.promptTokenIds).toEqual([..."hello"].map((c) => c.charCodeAt(0)));
    expect(seen.params.temperature).toBe(0);
    expect(seen.params.stop).toEqual(["zz"]);
    expect(seen.params.seed).toBe(3);
  });

  test("n choices use seed + i, so they differ and are reproducible", async () => {
    const { engine, app } = setup();
    const a: Json = await (await post(app, "/v1/completions", { prompt: "hi", max_tokens: 6, n: 3, seed: 10 })).json();
    const b: Json = await (await post(app, "/v1/completions", { prompt: "hi", max_tokens: 6, n: 3, seed: 10 })).json();
    expect(a.choices.map((c: Json) => c.index)).toEqual([0, 1, 2]);
    expect(new Set(a.choices.map((c: Json) => c.text)).size).toBe(3);
    expect(b.choices.map((c: Json) => c.text)).toEqual(a.choices.map((c: Json) => c.text));
    expect(engine.requests.slice(0, 3).map((r) => r.params.seed)).toEqual([10, 11, 12]);
    expect(a.usage.completion_tokens).toBe(18);
  });

  test("prompt lists and token ids: choice index = prompt * n + j; usage counts each prompt once", async () => {
    const { engine, app } = setup();
    const body: Json = await (await post(app, "/v1/completions", { prompt: ["ab", "cde"], n: 2, max_tokens: 2 }))
      .json();
    expect(body.choices.map((c: Json) => c.index)).toEqual([0, 1, 2, 3]);
    expect(body.usage.prompt_tokens).toBe(5);
    expect(engine.requests.map((r) => r.promptTokenIds.length)).toEqual([2, 2, 3, 3]);
    const ids: Json = await (await post(app, "/v1/completions", { prompt: [[65, 66], [67]], max_tokens: 1 })).json();
    expect(ids.choices).toHaveLength(2);
    expect(engine.requests.slice(4).map((r) => r.promptTokenIds)).toEqual([[65, 66], [67]]);
    const flat: Json = await (await post(app, "/v1/completions", { prompt: [70, 71, 72], max_tokens: 1, echo: true }))
      .json();
    expect(flat.choices[0].text.startsWith("FGH")).toBe(true);
  });

  test("streaming: chunks add up to the text, usage chunk last, then [DONE]", async () => {
    const { app } = setup();
    const res = await post(app, "/v1/completions", {
      prompt: "hey",
      max_tokens: 4,
      seed: 1,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = await readSse(res);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1) as Json[];
    const usage = chunks.at(-1);
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toEqual({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
    const text = chunks.slice(0, -1).map((c) => c.choices[0].text).join("");
    const plain: Json = await (await post(app, "/v1/completions", { prompt: "hey", max_tokens: 4, seed: 1 })).json();
    expect(text).toBe(plain.choices[0].text);
    expect(chunks.at(-2).choices[0].finish_reason).toBe("length");
    expect(chunks[0].usage).toBeNull();
  });

  test("logprobs: chosen-token logprobs with tokens and offsets", async () => {
    const { app } = setup();
    const body: Json = await (await post(app, "/v1/completions", { prompt: "a", max_tokens: 3, logprobs: 0 })).json();
    const lp = body.choices[0].logprobs;
    expect(lp.token_logprobs).toEqual([-0.5, -0.5, -0.5]);
    expect(lp.tokens.join("")).toBe(body.choices[0].text);
    expect(lp.text_offset).toEqual([0, 1, 2]);
    expect(lp.top_logprobs[0]).toEqual({ [lp.tokens[0]]: -0.5 });
  });
});

describe("chat completions", () => {
  test("non-streaming renders the chat template and returns an assistant message", async () => {
    const { engine, app } = setup();
    const res = await post(app, "/v1/chat/completions", {
      model: "served",
      messages: [{ role: "system", content: "S" }, { role: "user", content: [{ type: "text", text: "U" }] }],
      max_completion_tokens: 3,
    });
    const body: Json = await res.json();
    expect(res.status).toBe(200);
    expect(body.object).toBe("chat.completion");
    expect(body.choices[0].message.role).toBe("assistant");
    expect(body.choices[0].message.content).toHaveLength(3);
    const rendered = "<system>S\n<user>U\n<assistant>";
    expect(engine.requests[0]!.promptTokenIds).toEqual([...rendered].map((c) => c.charCodeAt(0)));
    expect(body.usage.prompt_tokens).toBe(rendered.length);
  });

  test("streaming: role first, content deltas, finish_reason, usage, [DONE]; logprobs per token", async () => {
    const { app } = setup();
    const req = { messages: [{ role: "user", content: "x" }], max_tokens: 4, seed: 2, logprobs: true, n: 2 };
    const events = await readSse(
      await post(app, "/v1/chat/completions", { ...req, stream: true, stream_options: { include_usage: true } }),
    );
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1) as Json[];
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    expect(chunks[0].object).toBe("chat.completion.chunk");
    const plain: Json = await (await post(app, "/v1/chat/completions", req)).json();
    for (const i of [0, 1]) {
      const mine = chunks.filter((c) => c.choices[0]?.index === i);
      expect(mine.map((c) => c.choices[0].delta.content ?? "").join("")).toBe(plain.choices[i].message.content);
      expect(mine.at(-1).choices[0].finish_reason).toBe("length");
      const lps = mine.flatMap((c) => c.choices[0].logprobs?.content ?? []);
      expect(lps.map((l: Json) => l.token).join("")).toBe(plain.choices[i].message.content);
    }
    expect(plain.choices[0].message.content).not.toBe(plain.choices[1].message.content);
    expect(chunks.at(-1).usage.completion_tokens).toBe(8);
  });

  test("without max_tokens chat fills the context, or stops at the server's default", async () => {
    const { engine, app } = setup();
    await post(app, "/v1/chat/completions", { messages: [{ role: "user", content: "x" }] });
    expect(engine.requests[0]!.params.maxTokens).toBe(64 - "<user>x\n<assistant>".length);
    const capped = createApp({ engine, defaultChatMaxTokens: 5 });
    await capped.fetch(
      new Request("http://x/v1/chat/completions", {
        method: "POST",
        body: JSON.stringify({ messages: [{ role: "user", content: "x" }] }),
      }),
    );
    expect(engine.requests[1]!.params.maxTokens).toBe(5);
  });

  test("x-session-id header (else user) becomes the session id; cache_salt passes through", async () => {
    const { engine, app } = setup();
    await post(app, "/v1/chat/completions", { messages: [{ role: "user", content: "x" }], max_tokens: 1, user: "u1" }, {
      "x-session-id": "s9",
    });
    await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "x" }],
      max_tokens: 1,
      user: "u1",
      cache_salt: "t",
    });
    expect(engine.requests[0]!.options.sessionId).toBe("s9");
    expect(engine.requests[1]!.options.sessionId).toBe("u1");
    expect(engine.requests[1]!.options.cacheSalt).toBe("t");
  });
});

describe("bad input never reaches the engine", () => {
  const cases: Array<[string, string, unknown, number, string | null, RegExp]> = [
    ["negative temperature", "/v1/completions", { prompt: "a", temperature: -1 }, 400, "temperature", /-1/],
    ["top_p above 1", "/v1/completions", { prompt: "a", top_p: 1.5 }, 400, "top_p", /1\.5/],
    ["n = 0", "/v1/chat/completions", { messages: [{ role: "user", content: "a" }], n: 0 }, 400, "n", /got 0/],
    ["wrong type", "/v1/completions", { prompt: "a", max_tokens: "ten" }, 400, "max_tokens", /"ten"/],
    ["missing prompt", "/v1/completions", { max_tokens: 2 }, 400, "prompt", /prompt/],
    ["missing messages", "/v1/chat/completions", { max_tokens: 2 }, 400, "messages", /messages/],
    [
      "bad message content",
      "/v1/chat/completions",
      { messages: [{ role: "user", content: [{ type: "image_url" }] }] },
      400,
      "messages[0].content",
      /text parts/,
    ],
    ["non-JSON body", "/v1/completions", "{not json", 400, null, /not valid JSON/],
    ["body not an object", "/v1/completions", "[1,2]", 400, null, /JSON object/],
    [
      "prompt over max_model_len",
      "/v1/completions",
      { prompt: "x".repeat(70) },
      400,
      "prompt",
      /64 tokens.*70 input tokens/,
    ],
    [
      "prompt + max_tokens over max_model_len",
      "/v1/completions",
      { prompt: "x".repeat(60), max_tokens: 10 },
      400,
      "max_tokens",
      /64 tokens.*70 tokens \(60 in the prompt, 10 in the completion\)/,
    ],
    ["token id outside vocab", "/v1/completions", { prompt: [1, 999] }, 400, "prompt", /999/],
    ["empty prompt", "/v1/completions", { prompt: "" }, 400, "prompt", /empty/],
    [
      "min_tokens > max_tokens",
      "/v1/completions",
      { prompt: "a", max_tokens: 2, min_tokens: 3 },
      400,
      "min_tokens",
      /3/,
    ],
    [
      "penalty out of range",
      "/v1/completions",
      { prompt: "a", presence_penalty: 2.5 },
      400,
      "presence_penalty",
      /\[-2, 2\]/,
    ],
    ["unknown model", "/v1/completions", { prompt: "a", model: "gpt-9" }, 404, "model", /gpt-9/],
  ];
  for (const [name, path, body, status, param, message] of cases) {
    test(name, async () => {
      const { engine, app } = setup();
      const res = await post(app, path, body);
      expect(res.status).toBe(status);
      const err: Json = await res.json();
      expect(Object.keys(err.error).sort()).toEqual(["code", "message", "param", "type"]);
      expect(err.error.type).toBe(status === 404 ? "NotFoundError" : "BadRequestError");
      expect(err.error.code).toBe(status);
      expect(err.error.param).toBe(param);
      expect(err.error.message).toMatch(message);
      expect(engine.requests).toHaveLength(0);
      // A valid request still works afterwards.
      expect((await post(app, "/v1/completions", { prompt: "ok", max_tokens: 1 })).status).toBe(200);
    });
  }
});

describe("routing, auth, health and draining", () => {
  test("404 unknown route, 405 wrong method with Allow", async () => {
    const { app } = setup();
    const nf = await app.fetch(new Request("http://x/v1/nope"));
    expect(nf.status).toBe(404);
    expect(((await nf.json()) as Json).error.type).toBe("NotFoundError");
    const na = await app.fetch(new Request("http://x/v1/completions"));
    expect(na.status).toBe(405);
    expect(na.headers.get("allow")).toBe("POST");
  });

  test("API key: /v1 needs the Bearer key; probes stay open", async () => {
    const { app } = setup("sekret");
    const body = { prompt: "a", max_tokens: 1 };
    for (
      const headers of [{}, { authorization: "Bearer wrong" }, { authorization: "sekret" }] as Record<string, string>[]
    ) {
      const res = await post(app, "/v1/completions", body, headers);
      expect(res.status).toBe(401);
      expect(((await res.json()) as Json).error.type).toBe("AuthenticationError");
    }
    expect((await post(app, "/v1/completions", body, { authorization: "Bearer sekret" })).status).toBe(200);
    expect((await app.fetch(new Request("http://x/health"))).status).toBe(200);
    expect((await app.fetch(new Request("http://x/v1/models"))).status).toBe(401);
  });

  test("models, version, tokenize, detokenize", async () => {
    const { app } = setup();
    const models: Json = await (await app.fetch(new Request("http://x/v1/models"))).json();
    expect(models.data.map((m: Json) => m.id)).toEqual(["served"]);
    expect(models.data[0].max_model_len).toBe(64);
    expect(((await (await app.fetch(new Request("http://x/version"))).json()) as Json).version).toMatch(
      /^\d+\.\d+\.\d+/,
    );
    const tok: Json = await (await post(app, "/tokenize", { prompt: "AB" })).json();
    expect(tok).toEqual({ count: 2, max_model_len: 64, tokens: [65, 66], token_strs: null });
    const chatTok: Json = await (await post(app, "/tokenize", { messages: [{ role: "user", content: "q" }] })).json();
    expect(chatTok.count).toBe("<user>q\n<assistant>".length);
    expect(await (await post(app, "/detokenize", { tokens: [72, 105] })).json()).toEqual({ prompt: "Hi" });
    expect((await post(app, "/detokenize", { tokens: [72, 1000] })).status).toBe(400);
    expect((await post(app, "/tokenize", {})).status).toBe(400);
  });

  test("unhealthy engine: /health and generation are 503", async () => {
    const { engine, app } = setup();
    engine.healthy = false;
    expect((await app.fetch(new Request("http://x/health"))).status).toBe(503);
    const res = await post(app, "/v1/completions", { prompt: "a" });
    expect(res.status).toBe(503);
    expect(((await res.json()) as Json).error.type).toBe("ServiceUnavailableError");
  });

  test("drain: new requests get 503, the in-flight stream finishes, then drain resolves", async () => {
    const { engine, app } = setup();
    engine.tokenDelayMs = 2;
    const res = await post(app, "/v1/completions", { prompt: "a", max_tokens: 10, stream: true });
    let drained = false;
    const drain = app.drain().then(() => (drained = true));
    expect((await app.fetch(new Request("http://x/health"))).status).toBe(503);
    expect((await post(app, "/v1/completions", { prompt: "a" })).status).toBe(503);
    const metrics = await app.fetch(new Request("http://x/metrics"));
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('lmpool_http_requests_in_flight{model_name="served"} 1\n');
    await new Promise((r) => setTimeout(r, 5));
    expect(drained).toBe(false);
    const events = await readSse(res);
    expect(events.at(-1)).toBe("[DONE]");
    await drain;
    expect(drained).toBe(true);
    expect(engine.requests[0]!.finishReason).toBe("length");
  });
});

describe("failures and disconnects", () => {
  test("a client that cancels mid-stream aborts its engine requests", async () => {
    const { engine, app } = setup();
    engine.tokenDelayMs = 2;
    const res = await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "a" }],
      max_tokens: 40,
      n: 2,
      stream: true,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    for (let i = 0; i < 4; i++) await reader.read(); // two role chunks, then content
    expect(engine.live).toBe(2);
    await reader.cancel();
    for (let i = 0; i < 50 && engine.live > 0; i++) await new Promise((r) => setTimeout(r, 2));
    expect(engine.live).toBe(0);
    expect(engine.requests.map((r) => r.finishReason)).toEqual(["abort", "abort"]);
    expect(app.context.lifecycle.inFlight).toBe(0);
  });

  test("a non-streaming request whose client goes away is aborted", async () => {
    const { engine, app } = setup();
    engine.tokenDelayMs = 2;
    const client = new AbortController();
    const pending = app.fetch(
      new Request("http://x/v1/completions", {
        method: "POST",
        body: JSON.stringify({ prompt: "a", max_tokens: 60 }),
        signal: client.signal,
      }),
    );
    await new Promise((r) => setTimeout(r, 10));
    client.abort();
    await pending;
    expect(engine.live).toBe(0);
    expect(engine.requests[0]!.finishReason).toBe("abort");
  });

  test("an engine error becomes a 500 body, or an error event before [DONE] when streaming", async () => {
    const { engine, app } = setup();
    engine.failAfterFirstToken = new Error("kernel exploded");
    const orig = console.error;
    console.error = () => {};
    try {
      const res = await post(app, "/v1/completions", { prompt: "a", max_tokens: 5 });
      expect(res.status).toBe(500);
      expect(((await res.json()) as Json).error.message).toContain("kernel exploded");
    } finally {
      console.error = orig;
    }
    const events = await readSse(await post(app, "/v1/completions", { prompt: "a", max_tokens: 5, stream: true }));
    expect(events.at(-1)).toBe("[DONE]");
    expect((events.at(-2) as Json).error.message).toContain("kernel exploded");
  });
});

describe("metrics", () => {
  test("request histograms and token counters move after requests", async () => {
    const { app } = setup();
    const scrape = async () => (await app.fetch(new Request("http://x/metrics"))).text();
    const before = await scrape();
    expect(before).toContain('vllm:num_requests_running{model_name="served",engine="0"} 0');
    // Every family has its zero series from the first scrape on, as in vLLM.
    expect(before).toContain('vllm:time_to_first_token_seconds_count{model_name="served",engine="0"} 0\n');
    await post(app, "/v1/completions", { prompt: "abc", max_tokens: 4 });
    await post(app, "/v1/completions", { prompt: "de", max_tokens: 2, stream: true }).then((r) => r.text());
    const after = await scrape();
    const labels = '{model_name="served",engine="0"}';
    expect(after).toContain(`vllm:time_to_first_token_seconds_count${labels} 2`);
    expect(after).toContain(`vllm:e2e_request_latency_seconds_count${labels} 2`);
    expect(after).toContain(`vllm:inter_token_latency_seconds_count${labels} 4`);
    expect(after).toContain(`vllm:prompt_tokens_total${labels} 5`);
    expect(after).toContain(`vllm:generation_tokens_total${labels} 6`);
    expect(after).toContain('vllm:request_success_total{model_name="served",engine="0",finished_reason="length"} 2');
    expect(after).toContain(
      'vllm:cache_config_info{model_name="served",engine="0",block_size="4",num_gpu_blocks="100"} 1',
    );
    expect(after).toContain('lmpool_route_decisions_total{model_name="served",decision="prefix_hit"} 3');
    expect(after).toContain('lmpool_transfer_bytes_total{model_name="served"} 4096');
    expect(after).toContain('lmpool_http_requests_in_flight{model_name="served"} 0\n');
  });
});
