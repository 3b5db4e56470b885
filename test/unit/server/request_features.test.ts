// The request fields the server implements itself, end to end in-process (app.fetch) against the
// engine double: stop_reason and include_stop_str_in_output, continuous usage on every chunk,
// echo in chat, return_tokens_as_token_ids, truncate_prompt_tokens, request ids, session_id and
// GET /v1/models/{id}. The double generates c, j, q, x, e, l, ... for seed 0 and a 2-token prompt.
import { describe, expect, test } from "bun:test";
import { createApp, type ServerApp } from "../../../lib/server/app.ts";
import { FakeEngine } from "./fake_engine.ts";
import { readSse } from "./sse_helpers.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

function setup(): { engine: FakeEngine; app: ServerApp } {
  const engine = new FakeEngine();
  return { engine, app: createApp({ engine, servedModelName: "served" }) };
}

function post(app: ServerApp, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return app.fetch(
    new Request(`http://x${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    }),
  );
}

const base = { prompt: "hi", seed: 0, max_tokens: 6 };
const q = "q".charCodeAt(0);

describe("stop_reason and include_stop_str_in_output", () => {
  test("a stop token id: stop_reason is the id; its text only with include_stop_str_in_output", async () => {
    const { app } = setup();
    const plain: Json = await (await post(app, "/v1/completions", { ...base, stop_token_ids: [q] })).json();
    expect(plain.choices[0]).toMatchObject({ text: "cj", finish_reason: "stop", stop_reason: q });
    const incl: Json = await (await post(app, "/v1/completions", {
      ...base,
      stop_token_ids: [q],
      include_stop_str_in_output: true,
    })).json();
    expect(incl.choices[0]).toMatchObject({ text: "cjq", stop_reason: q });
  });

  test("a stop string: stop_reason is the string; streamed and chat the same", async () => {
    const { app } = setup();
    const body: Json = await (await post(app, "/v1/completions", { ...base, stop: ["zz", "q"] })).json();
    expect(body.choices[0]).toMatchObject({ text: "cj", finish_reason: "stop", stop_reason: "q" });
    const events = await readSse(
      await post(app, "/v1/completions", { ...base, stop: "q", include_stop_str_in_output: true, stream: true }),
    );
    const chunks = events.filter((e): e is Json => e !== "[DONE]");
    expect(chunks.map((c) => c.choices[0].text).join("")).toBe("cjq");
    expect(chunks.at(-1).choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: "q" });
    const chat: Json = await (await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "" }],
      seed: 0,
      max_tokens: 6,
      stop: "z",
    })).json();
    expect(chat.choices[0].stop_reason).toBe(chat.choices[0].finish_reason === "stop" ? "z" : null);
  });

  test("length and min_tokens: no stop_reason; the stop token before min_tokens is ordinary text", async () => {
    const { app } = setup();
    const body: Json = await (await post(app, "/v1/completions", { ...base, stop_token_ids: [q], min_tokens: 3 }))
      .json();
    expect(body.choices[0]).toMatchObject({ text: "cjqxel", finish_reason: "length", stop_reason: null });
  });
});

describe("stream_options", () => {
  test("continuous_usage_stats: every chunk carries the usage so far; the last chunk the total", async () => {
    const { app } = setup();
    const events = await readSse(
      await post(app, "/v1/completions", {
        ...base,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    );
    const chunks = events.filter((e): e is Json => e !== "[DONE]");
    const withChoice = chunks.filter((c) => c.choices.length > 0);
    expect(withChoice.map((c) => c.usage.completion_tokens)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const c of withChoice) expect(c.usage.prompt_tokens).toBe(2);
    expect(chunks.at(-1).usage).toEqual({ prompt_tokens: 2, completion_tokens: 6, total_tokens: 8 });
    // Chat: the role chunk too.
    const chat = (await readSse(
      await post(app, "/v1/chat/completions", {
        messages: [{ role: "user", content: "x" }],
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    )).filter((e): e is Json => e !== "[DONE]");
    expect(chat.filter((c) => c.choices.length > 0).map((c) => c.usage.completion_tokens)).toEqual([0, 1, 2, 3]);
  });

  test("include_usage alone: usage null on choice chunks, as before", async () => {
    const { app } = setup();
    const events = await readSse(
      await post(app, "/v1/completions", { ...base, stream: true, stream_options: { include_usage: true } }),
    );
    const chunks = events.filter((e): e is Json => e !== "[DONE]").filter((c) => c.choices.length > 0);
    for (const c of chunks) expect(c.usage).toBeNull();
  });
});

describe("chat: echo, roles", () => {
  test("echo repeats the last message when it has the reply's role", async () => {
    const { app } = setup();
    const messages = [{ role: "user", content: "hi" }, { role: "assistant", content: "Once" }];
    const body: Json = await (await post(app, "/v1/chat/completions", {
      messages,
      echo: true,
      add_generation_prompt: false,
      max_tokens: 2,
    })).json();
    expect(body.choices[0].message.role).toBe("assistant");
    expect(body.choices[0].message.content).toMatch(/^Once..$/);
    // With a generation prompt the reply is a new assistant turn: the user message is not echoed.
    const fresh: Json = await (await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "hi" }],
      echo: true,
      max_tokens: 2,
    })).json();
    expect(fresh.choices[0].message.content).toHaveLength(2);
    const streamed = (await readSse(
      await post(app, "/v1/chat/completions", {
        messages,
        echo: true,
        add_generation_prompt: false,
        max_tokens: 2,
        stream: true,
      }),
    )).filter((e): e is Json => e !== "[DONE]");
    expect(streamed[0].choices[0].delta).toEqual({ role: "assistant", content: "Once" });
  });

  test("tool_choice none without tools is accepted; auto is a 400 naming it", async () => {
    const { app } = setup();
    const messages = [{ role: "user", content: "x" }];
    expect((await post(app, "/v1/chat/completions", { messages, max_tokens: 1, tool_choice: "none" })).status).toBe(
      200,
    );
    const res = await post(app, "/v1/chat/completions", { messages, max_tokens: 1, tool_choice: "auto" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.param).toBe("tool_choice");
  });
});

describe("prompt and output options", () => {
  test("return_tokens_as_token_ids names logprob tokens by id", async () => {
    const { app } = setup();
    const body: Json = await (await post(app, "/v1/completions", {
      ...base,
      max_tokens: 2,
      logprobs: 0,
      return_tokens_as_token_ids: true,
    })).json();
    expect(body.choices[0].logprobs.tokens).toEqual(["token_id:99", "token_id:106"]);
    const chat: Json = await (await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "x" }],
      max_tokens: 1,
      logprobs: true,
      return_tokens_as_token_ids: true,
    })).json();
    expect(chat.choices[0].logprobs.content[0].token).toMatch(/^token_id:\d+$/);
  });

  test("truncate_prompt_tokens keeps the last (or first) tokens; more than max_model_len is a 400", async () => {
    const { engine, app } = setup();
    const ids = (s: string) => [...s].map((c) => c.charCodeAt(0));
    await post(app, "/v1/completions", { prompt: "hello", max_tokens: 1, truncate_prompt_tokens: 2 });
    expect(engine.requests.at(-1)!.promptTokenIds).toEqual(ids("lo"));
    await post(app, "/v1/completions", {
      prompt: "hello",
      max_tokens: 1,
      truncate_prompt_tokens: 2,
      truncation_side: "right",
    });
    expect(engine.requests.at(-1)!.promptTokenIds).toEqual(ids("he"));
    // A prompt longer than the context is fine once truncated.
    const long = await post(app, "/v1/completions", {
      prompt: "y".repeat(500),
      max_tokens: 1,
      truncate_prompt_tokens: -1,
    });
    expect(long.status).toBe(400); // 64 tokens of prompt leave no room for one more
    expect(((await long.json()) as Json).error.param).toBe("prompt");
    const ok = await post(app, "/v1/completions", {
      prompt: "y".repeat(500),
      max_tokens: 1,
      truncate_prompt_tokens: 60,
    });
    expect(ok.status).toBe(200);
    expect(engine.requests.at(-1)!.promptTokenIds).toHaveLength(60);
    const tooMany = await post(app, "/v1/completions", { prompt: "a", truncate_prompt_tokens: 65 });
    expect(tooMany.status).toBe(400);
    expect(((await tooMany.json()) as Json).error.param).toBe("truncate_prompt_tokens");
  });

  test("session_id routes the request's session (before user)", async () => {
    const { engine, app } = setup();
    await post(app, "/v1/completions", { prompt: "a", max_tokens: 1, session_id: "s1", user: "u" });
    expect(engine.requests.at(-1)!.options.sessionId).toBe("s1");
  });
});

describe("request ids and the model route", () => {
  test("X-Request-Id is echoed and names the response; the body's request_id too", async () => {
    const { app } = setup();
    const res = await post(app, "/v1/completions", { prompt: "a", max_tokens: 1 }, { "x-request-id": "abc-1" });
    expect(res.headers.get("x-request-id")).toBe("abc-1");
    expect(((await res.json()) as Json).id).toBe("cmpl-abc-1");
    const byBody: Json = await (await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "x" }],
      max_tokens: 1,
      request_id: "r2",
    })).json();
    expect(byBody.id).toBe("chatcmpl-r2");
    // Two requests with one id both run (the engine's ids stay unique).
    const [a, b] = await Promise.all(
      [1, 2].map(() => post(app, "/v1/completions", { prompt: "a", max_tokens: 2 }, { "x-request-id": "same" })),
    );
    expect([a!.status, b!.status]).toEqual([200, 200]);
    const bad = await post(app, "/v1/completions", { prompt: "a" }, { "x-request-id": "x".repeat(300) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Json).error.param).toBe("X-Request-Id");
  });

  test("GET /v1/models/{id}: the card of the served model, 404 for another", async () => {
    const { app } = setup();
    const res = await app.fetch(new Request("http://x/v1/models/served"));
    expect(res.status).toBe(200);
    expect((await res.json()) as Json).toMatchObject({ id: "served", object: "model", max_model_len: 64 });
    const other = await app.fetch(new Request("http://x/v1/models/gpt-9"));
    expect(other.status).toBe(404);
    expect(((await other.json()) as Json).error).toMatchObject({ type: "NotFoundError", code: 404, param: "model" });
  });
});
