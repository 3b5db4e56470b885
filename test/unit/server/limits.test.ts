// Input bounds of the app (body bytes, prompt characters, float32/int32 fields), request time
// limits, streams that fail mid-way, and the bounded drain, against the GenerationEngine double.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { WorkerDiedError } from "../../../lib/core/errors.ts";
import { type HttpServer, startHttpServer } from "../../../lib/runtime/http_server.ts";
import { type AppOptions, createApp, type ServerApp } from "../../../lib/server/app.ts";
import { FLOAT32_MAX, isFloat32In } from "../../../lib/server/number_schemas.ts";
import { inlinePromptTokenizer } from "../../../lib/server/prompt_tokenizer.ts";
import { MAX_SEED } from "../../../lib/server/schemas.ts";
import { FakeEngine } from "./fake_engine.ts";
import { readSse } from "./sse_helpers.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

function setup(o: Partial<AppOptions> = {}): { engine: FakeEngine; app: ServerApp } {
  const engine = new FakeEngine();
  return { engine, app: createApp({ engine, servedModelName: "served", ...o }) };
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("body size limit", () => {
  const routes: Array<[string, unknown]> = [
    ["/v1/completions", { prompt: "a" }],
    ["/v1/chat/completions", { messages: [{ role: "user", content: "a" }] }],
    ["/tokenize", { prompt: "a" }],
    ["/detokenize", { tokens: [65] }],
  ];

  test("every body route: 413 with an OpenAI error naming the flag and both sizes", async () => {
    const { engine, app } = setup({ maxRequestBytes: 100 });
    for (const [path, small] of routes) {
      expect((await post(app, path, small)).status).toBe(200);
      const big = JSON.stringify({ ...(small as object), pad: "x".repeat(200) });
      const res = await post(app, path, big);
      expect({ path, status: res.status }).toEqual({ path, status: 413 });
      const err: Json = await res.json();
      expect(err.error).toEqual({
        message: expect.stringContaining(`${big.length} bytes exceeds --max-request-bytes 100`),
        type: "RequestTooLargeError",
        param: null,
        code: 413,
      });
    }
    expect(engine.requests).toHaveLength(2); // only the small generation requests ran
  });

  test("the default limit is 4 MiB", async () => {
    const { app } = setup();
    expect(app.context.maxRequestBytes).toBe(4194304);
    const res = await post(app, "/tokenize", JSON.stringify({ prompt: "a", pad: "x".repeat(4194304) }));
    expect(res.status).toBe(413);
  });

  describe("over HTTP", () => {
    let http: HttpServer;
    let engine: FakeEngine;
    beforeAll(async () => {
      engine = new FakeEngine();
      const app = createApp({ engine, maxRequestBytes: 1000 });
      http = await startHttpServer({
        hostname: "127.0.0.1",
        port: 0,
        fetch: app.fetch,
        maxRequestBodySize: 1000 + 64 * 1024,
      });
    });
    afterAll(() => http.stop(true));

    test("a chunked body without Content-Length is cut off at the limit, not read whole", async () => {
      let sent = 0;
      const chunk = new TextEncoder().encode(`{"prompt":"${"y".repeat(200)}`);
      async function* body() {
        // Far more than the limit: the server must answer without waiting for all of it.
        for (let i = 0; i < 50; i++) {
          sent += chunk.byteLength;
          yield chunk;
          await sleep(2);
        }
      }
      const res = await fetch(`${http.url}/v1/completions`, {
        method: "POST",
        body: body() as unknown as ReadableStream<Uint8Array>,
        headers: { "content-type": "application/json" },
      });
      expect(res.status).toBe(413);
      const err: Json = await res.json();
      expect(err.error.type).toBe("RequestTooLargeError");
      expect(err.error.message).toMatch(/at least \d+ bytes exceeds --max-request-bytes 1000/);
      expect(sent).toBeLessThan(50 * chunk.byteLength);
      expect(engine.requests).toHaveLength(0);
    });

    test("a declared Content-Length over the limit is refused before the body is read", async () => {
      const res = await fetch(`${http.url}/tokenize`, {
        method: "POST",
        body: JSON.stringify({ prompt: "z".repeat(5000) }),
      });
      expect(res.status).toBe(413);
      expect(((await res.json()) as Json).error.message).toContain("exceeds --max-request-bytes 1000");
    });
  });
});

describe("prompt characters are bounded before tokenizing", () => {
  // The fake tokenizer spends one token per character; the bound allows 4 characters per token.
  function counted() {
    const engine = new FakeEngine();
    let encoded = 0;
    const tok = engine.tokenizer;
    const spy = {
      ...tok,
      eosTokenIds: tok.eosTokenIds,
      encode: (t: string) => (encoded++, tok.encode(t)),
      decode: tok.decode.bind(tok),
      applyChatTemplate: tok.applyChatTemplate.bind(tok),
    };
    const app = createApp({ engine, tokenizer: inlinePromptTokenizer(spy, 4) });
    return { app, encodedCount: () => encoded };
  }

  test("completions, chat, and /tokenize: 400 naming the param, nothing tokenized", async () => {
    const { app, encodedCount } = counted();
    const long = "x".repeat(64 * 4 + 1);
    const cases: Array<[string, unknown, string]> = [
      ["/v1/completions", { prompt: long }, "prompt"],
      ["/v1/completions", { prompt: ["ok", long] }, "prompt[1]"],
      ["/v1/chat/completions", { messages: [{ role: "user", content: long }] }, "messages"],
      ["/v1/chat/completions", {
        messages: [{ role: "user", content: long.slice(200) }, { role: "user", content: long.slice(200) }, {
          role: "user",
          content: long.slice(100),
        }],
      }, "messages"],
      ["/tokenize", { prompt: long }, "prompt"],
      ["/tokenize", { messages: [{ role: "user", content: long }] }, "messages"],
    ];
    for (const [path, body, param] of cases) {
      const res = await post(app, path, body);
      const err: Json = await res.json();
      expect({ path, param, status: res.status, got: err.error.param }).toEqual({
        path,
        param,
        status: 400,
        got: param,
      });
      expect(err.error.code).toBe(400);
      expect(err.error.message).toContain("64 tokens");
    }
    expect(encodedCount()).toBe(0);
    // At the bound the text is tokenized (and then measured in tokens, as before).
    expect((await post(app, "/tokenize", { prompt: "x".repeat(64 * 4) })).status).toBe(200);
    expect(encodedCount()).toBe(1);
  });
});

describe("numbers are checked as float32 and int32", () => {
  test("the helpers read values as the native step will", () => {
    expect(isFloat32In(1e308, { min: 0, max: FLOAT32_MAX })).toBe(false);
    expect(isFloat32In(3e38, { min: 0, max: FLOAT32_MAX })).toBe(true);
    expect(isFloat32In(1e-50, { min: 0, minExclusive: true, max: 1 })).toBe(false);
    expect(isFloat32In(1e-30, { min: 0, minExclusive: true, max: 1 })).toBe(true);
    expect(isFloat32In(Number.NaN, { min: 0, max: 1 })).toBe(false);
  });

  const cases: Array<[string, Record<string, unknown>]> = [
    ["temperature", { temperature: 1e308 }],
    ["temperature", { temperature: -1e-50 }],
    ["top_p", { top_p: 1e-50 }],
    ["top_p", { top_p: 1.0000001 }],
    ["max_tokens", { max_tokens: 2 ** 31 }],
    ["top_k", { top_k: 2 ** 31 }],
    ["min_tokens", { min_tokens: 2 ** 31 }],
    ["n", { n: 2 ** 31 }],
    ["seed", { seed: MAX_SEED + 1 }],
    ["stop_token_ids[0]", { stop_token_ids: [2 ** 31] }],
    ["logprobs", { logprobs: 2 ** 32 }],
    ["presence_penalty", { presence_penalty: 1e308 }],
    ["frequency_penalty", { frequency_penalty: -1e39 }],
    ["repetition_penalty", { repetition_penalty: 1e300 }],
    ["min_p", { min_p: 1.5 }],
    ["best_of", { best_of: 1e308 }],
    ["logit_bias", { logit_bias: { "5": 1e308 } }],
  ];
  for (const [param, fields] of cases) {
    test(`${param} = ${JSON.stringify(Object.values(fields)[0])} is a 400 naming it`, async () => {
      const { engine, app } = setup();
      const res = await post(app, "/v1/completions", { prompt: "a", ...fields });
      expect(res.status).toBe(400);
      const err: Json = await res.json();
      expect(err.error.param).toBe(param);
      expect(err.error.type).toBe("BadRequestError");
      expect(engine.requests).toHaveLength(0);
    });
  }

  test("the message names the range and the value", async () => {
    const { app } = setup();
    const err: Json = await (await post(app, "/v1/completions", { prompt: "a", temperature: 1e308 })).json();
    expect(err.error.message).toBe(
      "Invalid value for 'temperature': must be a finite float32 in [0, 3.4e38] (got 1e+308)",
    );
    const chat: Json = await (await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "a" }],
      max_completion_tokens: 2 ** 31,
      top_logprobs: 2 ** 31,
    })).json();
    expect(chat.error.param).toBe("max_completion_tokens");
    expect(chat.error.message).toContain("[1, 2147483647]");
  });

  test("edge values that fit pass: the largest seed with n choices, float32 max temperature, top_p 1", async () => {
    const { engine, app } = setup();
    const res = await post(app, "/v1/completions", {
      prompt: "a",
      max_tokens: 1,
      seed: MAX_SEED,
      n: 128,
      temperature: 3.4e38,
      top_p: 1,
    });
    expect(res.status).toBe(200);
    expect(engine.requests.at(-1)!.params.seed).toBe(Number.MAX_SAFE_INTEGER);
  });
});

describe("request time limit", () => {
  test("a bad x-request-timeout is a 400 naming the header", async () => {
    const { engine, app } = setup();
    for (const v of ["soon", "0", "-2", "", "1e20"]) {
      const res = await post(app, "/v1/completions", { prompt: "a" }, { "x-request-timeout": v });
      expect(res.status).toBe(400);
      const err: Json = await res.json();
      expect(err.error.param).toBe("x-request-timeout");
      expect(err.error.message).toContain(JSON.stringify(v));
    }
    expect(engine.requests).toHaveLength(0);
  });

  test("non-streaming: 504 at the limit, even from an engine that stops answering; its requests are aborted", async () => {
    const { engine, app } = setup();
    engine.tokenDelayMs = 5;
    const started = performance.now();
    const res = await post(app, "/v1/completions", { prompt: "a", max_tokens: 60 }, { "x-request-timeout": "0.05" });
    expect(res.status).toBe(504);
    expect(performance.now() - started).toBeLessThan(1000);
    const err: Json = await res.json();
    expect(err.error).toMatchObject({ type: "RequestTimeoutError", code: 504 });
    expect(err.error.message).toContain("x-request-timeout: 0.05");
    for (let i = 0; i < 100 && engine.live > 0; i++) await sleep(2);
    expect(engine.live).toBe(0);
    expect(engine.requests[0]!.finishReason).toBe("abort");
    expect(app.context.lifecycle.inFlight).toBe(0);

    const hung = setup({ requestTimeoutSeconds: 0.05 });
    hung.engine.hangAfterFirstToken = true;
    const res2 = await post(hung.app, "/v1/completions", { prompt: "a", max_tokens: 5 });
    expect(res2.status).toBe(504);
    expect(((await res2.json()) as Json).error.message).toContain("--request-timeout 0.05");
  });

  test("the header only shortens the server's limit", async () => {
    const { engine, app } = setup({ requestTimeoutSeconds: 0.05 });
    engine.tokenDelayMs = 5;
    const res = await post(app, "/v1/completions", { prompt: "a", max_tokens: 60 }, { "x-request-timeout": "100" });
    expect(res.status).toBe(504);
  });

  test("streaming: an error event, the usage so far, then [DONE]", async () => {
    const { engine, app } = setup();
    engine.tokenDelayMs = 5;
    const res = await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "a" }],
      max_tokens: 40,
      stream: true,
      stream_options: { include_usage: true },
    }, {
      "x-request-timeout": "0.1",
    });
    expect(res.status).toBe(200);
    const events = await readSse(res);
    expect(events.at(-1)).toBe("[DONE]");
    const usage = events.at(-2) as Json;
    const error = events.at(-3) as Json;
    expect(error.error.type).toBe("RequestTimeoutError");
    expect(usage.choices).toEqual([]);
    const streamed = events.filter((e: Json) => e?.choices?.[0]?.delta?.content).length;
    expect(streamed).toBeGreaterThan(0);
    expect(usage.usage.completion_tokens).toBeGreaterThanOrEqual(streamed);
    expect(usage.usage.completion_tokens).toBeLessThan(40);
    for (let i = 0; i < 100 && engine.live > 0; i++) await sleep(2);
    expect(engine.live).toBe(0);
    expect(app.context.lifecycle.inFlight).toBe(0);
  });
});

describe("streams that fail mid-way", () => {
  // 5xx answers are logged by the app; these are expected.
  let restore: typeof console.error;
  beforeAll(() => {
    restore = console.error;
    console.error = () => {};
  });
  afterAll(() => {
    console.error = restore;
  });

  test("a worker that dies mid-stream: error event (worker_died), usage so far, [DONE]; the non-streamed form is a 503 saying why", async () => {
    const { engine, app } = setup();
    engine.failAfterFirstToken = new WorkerDiedError("worker 1 died while running x: exited with code 9", 1);
    const events = await readSse(
      await post(app, "/v1/completions", {
        prompt: "a",
        max_tokens: 5,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(events.at(-1)).toBe("[DONE]");
    expect((events.at(-3) as Json).error).toMatchObject({ type: "WorkerDiedError", code: 503 });
    expect((events.at(-2) as Json).usage.completion_tokens).toBe(1);
    const noUsage = await readSse(await post(app, "/v1/completions", { prompt: "a", max_tokens: 5, stream: true }));
    expect((noUsage.at(-2) as Json).error.type).toBe("WorkerDiedError");
    const res = await post(app, "/v1/completions", { prompt: "a", max_tokens: 5 });
    expect(res.status).toBe(503);
    const err: Json = await res.json();
    expect(err.error.type).toBe("WorkerDiedError");
    expect(err.error.message).toContain("died (rank 1)");
    expect(err.error.message).toContain("exited with code 9");
  });

  test("a sequence the engine failed on its own (finish reason error) is a 500 naming the engine's reason", async () => {
    const { engine, app } = setup();
    const stream = engine.stream.bind(engine);
    engine.stream = async function* (input, params, options) {
      for await (const d of stream(input, params, options)) {
        if (d.finished) {
          yield {
            ...d,
            finishReason: "error",
            error: { name: "RangeError", message: "row 0: temperature inf must be finite" },
          };
          return;
        }
        yield d;
      }
    };
    const res = await post(app, "/v1/completions", { prompt: "a", max_tokens: 2 });
    expect(res.status).toBe(500);
    const err: Json = await res.json();
    expect(err.error.type).toBe("InternalServerError");
    expect(err.error.message).toContain("RangeError: row 0: temperature inf must be finite");
  });
});

describe("bounded drain", () => {
  test("past the deadline: streams end with a shutdown error and [DONE], non-streamed requests get 503", async () => {
    const { engine, app } = setup();
    engine.tokenDelayMs = 5;
    const stream = await post(app, "/v1/completions", {
      prompt: "a",
      max_tokens: 60,
      stream: true,
      stream_options: { include_usage: true },
    });
    const plain = post(app, "/v1/completions", { prompt: "b", max_tokens: 60 });
    await sleep(20);
    expect(app.context.lifecycle.inFlight).toBe(2);
    const started = performance.now();
    await app.drain(0.05);
    expect(performance.now() - started).toBeLessThan(2000);
    const events = await readSse(stream);
    expect(events.at(-1)).toBe("[DONE]");
    expect((events.at(-3) as Json).error).toMatchObject({ type: "ServerShutdownError", code: 503 });
    expect((events.at(-3) as Json).error.message).toContain("--drain-timeout");
    expect((events.at(-2) as Json).usage.completion_tokens).toBeGreaterThan(0);
    const res = await plain;
    expect(res.status).toBe(503);
    expect(((await res.json()) as Json).error.type).toBe("ServerShutdownError");
    expect(app.context.lifecycle.inFlight).toBe(0);
    expect(engine.live).toBe(0);
  });

  test("a drain that finishes in time ends nothing", async () => {
    const { engine, app } = setup();
    engine.tokenDelayMs = 1;
    const stream = await post(app, "/v1/completions", { prompt: "a", max_tokens: 5, stream: true });
    const [events] = await Promise.all([readSse(stream), app.drain(10)]);
    expect(events.some((e: Json) => e?.error)).toBe(false);
    expect(engine.requests[0]!.finishReason).toBe("length");
  });

  test("an engine that never answers does not hold the drain past its grace", async () => {
    const { engine, app } = setup();
    engine.hangAfterFirstToken = true;
    const plain = post(app, "/v1/completions", { prompt: "a", max_tokens: 5 });
    await sleep(10);
    const started = performance.now();
    await app.drain(0.02, 50);
    expect(performance.now() - started).toBeLessThan(1000);
    expect((await plain).status).toBe(503);
  });
});

describe("health and rank metrics", () => {
  test("rank gauges and restarts come from stats.health; route decisions keep only counters", async () => {
    const { engine, app } = setup();
    const base = engine.stats.bind(engine);
    engine.stats = () => {
      const s = base();
      s.ranks.push({ ...s.ranks[0]!, rank: 1, leakedBlocks: 3 });
      s.health = {
        ranks: [{ rank: 0, up: true, restarts: 0 }, { rank: 1, up: false, restarts: 2 }, {
          rank: 2,
          up: true,
          restarts: 1,
        }],
      };
      s.routing = { ...s.routing, healthy_ranks: 2, reservations: 4, cached_blocks: 17, control_plane_restarts: 1 };
      return s;
    };
    const text = await (await app.fetch(new Request("http://x/metrics"))).text();
    expect(text).toContain('lmpool_healthy_ranks{model_name="served"} 2\n');
    expect(text).toContain('lmpool_rank_up{model_name="served",engine="1"} 0\n');
    expect(text).toContain('lmpool_rank_up{model_name="served",engine="2"} 1\n');
    expect(text).toContain('lmpool_worker_restarts_total{model_name="served",engine="1"} 2\n');
    expect(text).toContain('lmpool_kv_leaked_blocks{model_name="served",engine="1"} 3\n');
    expect(text).toContain('lmpool_kv_leaked_blocks{model_name="served",engine="0"} 0\n');
    expect(text).toContain('lmpool_route_reservations{model_name="served"} 4\n');
    expect(text).toContain('lmpool_control_plane_restarts_total{model_name="served"} 1\n');
    const decisions = text.split("\n").filter((l) => l.startsWith("lmpool_route_decisions_total"));
    expect(decisions.map((l) => /decision="([^"]+)"/.exec(l)![1]).sort()).toEqual(["load_balance", "prefix_hit"]);
    // Some rank serves: healthy.
    expect((await app.fetch(new Request("http://x/health"))).status).toBe(200);
  });

  test("the rank series are there from start-up, before any request", async () => {
    const { app } = setup();
    const text = await (await app.fetch(new Request("http://x/metrics"))).text();
    for (
      const name of [
        "lmpool_healthy_ranks",
        "lmpool_rank_up",
        "lmpool_worker_restarts_total",
        "lmpool_kv_leaked_blocks",
      ]
    ) expect(text).toContain(`${name}{`);
  });
});
