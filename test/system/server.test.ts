// The real server process (examples/serve.ts, CPU backend, tiny random-weight Qwen3 model with the
// real tokenizer) driven by the official `openai` client and raw HTTP.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { tinyModelDir } from "../helpers/tiny_model_dir.ts";
import { metricValue, type ServerProcess, startServerProcess, stopServerProcess } from "./server_process.ts";

const KEY = "test-key";
const MODEL = "tiny-test";
const MAX_MODEL_LEN = 256;

let server: ServerProcess;
let client: OpenAI;

// deno-lint-ignore no-explicit-any
type Json = any;

function api(path: string, init: RequestInit & { auth?: boolean } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (init.auth !== false) headers.set("authorization", `Bearer ${KEY}`);
  if (init.body !== undefined) headers.set("content-type", "application/json");
  return fetch(`${server.url}${path}`, { ...init, headers });
}

const postJson = (path: string, body: unknown) =>
  api(path, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body) });
const scrape = async () => (await api("/metrics")).text();

beforeAll(async () => {
  const dir = await tinyModelDir();
  server = await startServerProcess([
    "--model",
    dir,
    "--port",
    "0",
    "--backend",
    "cpu",
    "--api-key",
    KEY,
    "--served-model-name",
    MODEL,
    "--max-model-len",
    String(MAX_MODEL_LEN),
  ]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
});

afterAll(() => stopServerProcess(server));

describe("server process", () => {
  test("health, models, version", async () => {
    expect((await api("/health", { auth: false })).status).toBe(200);
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    expect(((await (await api("/version")).json()) as Json).version).toMatch(/^\d+\.\d+\.\d+/);
  });

  test("completions: plain and streamed, with usage that matches /tokenize", async () => {
    const prompt = "The quick brown fox";
    const tok: Json = await (await postJson("/tokenize", { prompt })).json();
    const c = await client.completions.create(
      {
        model: MODEL,
        prompt,
        max_tokens: 6,
        temperature: 0,
        ignore_eos: true,
      } as OpenAI.CompletionCreateParamsNonStreaming,
    );
    expect(c.choices[0]!.finish_reason).toBe("length");
    expect(c.usage).toEqual({ prompt_tokens: tok.count, completion_tokens: 6, total_tokens: tok.count + 6 });
    const stream = await client.completions.create({
      model: MODEL,
      prompt,
      max_tokens: 6,
      temperature: 0,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.CompletionCreateParamsStreaming);
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    // Greedy on the same prompt: streamed text equals the plain one.
    expect(text).toBe(c.choices[0]!.text);
    expect(usage?.completion_tokens).toBe(6);
  });

  test("chat: plain and streamed with usage; seeded n choices differ and reproduce", async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "system", content: "Be brief." }, {
      role: "user",
      content: "Hello!",
    }];
    const chat = await client.chat.completions.create(
      {
        model: MODEL,
        messages,
        max_tokens: 5,
        seed: 5,
        n: 2,
        ignore_eos: true,
      } as OpenAI.ChatCompletionCreateParamsNonStreaming,
    );
    expect(chat.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(chat.choices[0]!.message.role).toBe("assistant");
    expect(chat.choices[0]!.message.content).not.toBe(chat.choices[1]!.message.content);
    expect(chat.usage?.completion_tokens).toBe(10);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 5,
      seed: 5,
      n: 2,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const texts = ["", ""];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      for (const ch of chunk.choices) texts[ch.index] += ch.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(texts).toEqual(chat.choices.map((c) => c.message.content ?? ""));
    expect(usage?.prompt_tokens).toBe(chat.usage?.prompt_tokens);
  });

  test("metrics: vLLM and lmpool series present, request series move", async () => {
    const before = await scrape();
    for (
      const name of [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:cache_config_info",
        "lmpool_transfers_total",
        "lmpool_transfer_blocks_total",
        "lmpool_transfer_bytes_total",
        "lmpool_kv_blocks",
      ]
    ) {
      expect(before).toContain(`${name}{`);
    }
    expect(before).toContain("# TYPE lmpool_route_decisions counter");
    const labels = { model_name: MODEL, engine: "0" };
    const count = (text: string, name: string) => metricValue(text, name, labels) ?? 0;
    await client.completions.create(
      {
        model: MODEL,
        prompt: "metrics please",
        max_tokens: 3,
        ignore_eos: true,
      } as OpenAI.CompletionCreateParamsNonStreaming,
    );
    const after = await scrape();
    expect(count(after, "vllm:time_to_first_token_seconds_count")).toBe(
      count(before, "vllm:time_to_first_token_seconds_count") + 1,
    );
    expect(count(after, "vllm:e2e_request_latency_seconds_count")).toBe(
      count(before, "vllm:e2e_request_latency_seconds_count") + 1,
    );
    expect(count(after, "vllm:generation_tokens_total")).toBe(count(before, "vllm:generation_tokens_total") + 3);
    expect(count(after, "vllm:prompt_tokens_total")).toBeGreaterThan(count(before, "vllm:prompt_tokens_total"));
    expect(count(after, "vllm:prefix_cache_queries_total")).toBeGreaterThan(
      count(before, "vllm:prefix_cache_queries_total"),
    );
    expect(metricValue(after, "vllm:cache_config_info", labels)).toBe(1);
  });

  test("bad inputs get the right 4xx bodies and a valid request still succeeds", async () => {
    const longPrompt = "hello ".repeat(MAX_MODEL_LEN);
    const cases: Array<[string, unknown, number, string | null]> = [
      ["/v1/completions", { model: MODEL, prompt: "a", temperature: -1 }, 400, "temperature"],
      ["/v1/completions", { model: MODEL, prompt: "a", top_p: 1.5 }, 400, "top_p"],
      ["/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: "a" }], n: 0 }, 400, "n"],
      ["/v1/completions", { model: MODEL, prompt: longPrompt }, 400, "prompt"],
      ["/v1/completions", { model: MODEL, prompt: "a", max_tokens: MAX_MODEL_LEN }, 400, "max_tokens"],
      ["/v1/completions", { model: MODEL, prompt: "a", max_tokens: "many" }, 400, "max_tokens"],
      ["/v1/chat/completions", { model: MODEL, messages: "hi" }, 400, "messages"],
      ["/v1/completions", "{ not json", 400, null],
      ["/v1/completions", { model: "other", prompt: "a" }, 404, "model"],
    ];
    for (const [path, body, status, param] of cases) {
      const res = await postJson(path, body);
      expect({ path, body, status: res.status }).toEqual({ path, body, status });
      const err: Json = await res.json();
      expect(err.error.param).toBe(param);
      expect(typeof err.error.message).toBe("string");
      expect(err.error.type).toBe(status === 404 ? "NotFoundError" : "BadRequestError");
      expect(err.error.code).toBe(status);
    }
    const over: Json = await (await postJson("/v1/completions", { prompt: "a", max_tokens: MAX_MODEL_LEN })).json();
    expect(over.error.message).toContain(String(MAX_MODEL_LEN));
    const wrongKey = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "wrong", maxRetries: 0 });
    expect(await wrongKey.completions.create({ model: MODEL, prompt: "a" }).catch((e: unknown) => e)).toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
    expect((await api("/v1/completions", { method: "POST", body: "{}", auth: false })).status).toBe(401);
    expect((await api("/v1/nothing")).status).toBe(404);
    expect((await api("/v1/completions")).status).toBe(405);
    const ok = await client.completions.create({ model: MODEL, prompt: "still fine", max_tokens: 2 });
    expect(ok.choices).toHaveLength(1);
  });

  test("a streaming client that disconnects leaves no live blocks", async () => {
    const abort = new AbortController();
    const stream = await client.chat.completions.create(
      {
        model: MODEL,
        messages: [{ role: "user", content: "go on forever" }],
        max_tokens: 200,
        ignore_eos: true,
        stream: true,
      } as OpenAI.ChatCompletionCreateParamsStreaming,
      { signal: abort.signal },
    );
    let chunks = 0;
    let sawLive = false;
    try {
      for await (const _ of stream) {
        if (++chunks === 3) {
          sawLive = (metricValue(await scrape(), "lmpool_kv_blocks", { engine: "0", state: "live" }) ?? 0) > 0;
          abort.abort();
        }
      }
    } catch {
      // the client's abort
    }
    expect(sawLive).toBe(true);
    let text = "";
    for (let i = 0; i < 200; i++) {
      text = await scrape();
      if (
        metricValue(text, "lmpool_kv_blocks", { engine: "0", state: "live" }) === 0 &&
        metricValue(text, "vllm:num_requests_running", { engine: "0" }) === 0
      ) break;
      await Bun.sleep(10);
    }
    expect(metricValue(text, "lmpool_kv_blocks", { engine: "0", state: "live" })).toBe(0);
    expect(metricValue(text, "vllm:kv_cache_usage_perc", { engine: "0" })).toBe(0);
    expect(metricValue(text, "vllm:num_requests_running", { engine: "0" })).toBe(0);
  });

  // Last: it stops the server. The open stream keeps the request in flight while we probe.
  test("SIGTERM: new requests get 503, the in-flight stream finishes, exit code 0", async () => {
    const res = await postJson("/v1/completions", {
      model: MODEL,
      prompt: "long one",
      max_tokens: 40,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let sse = dec.decode((await reader.read()).value);
    server.proc.kill("SIGTERM");
    await Bun.sleep(50);
    const refused = await postJson("/v1/completions", { model: MODEL, prompt: "late", max_tokens: 1 });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as Json).error.type).toBe("ServiceUnavailableError");
    expect((await api("/health")).status).toBe(503);
    for (let r = await reader.read(); !r.done; r = await reader.read()) sse += dec.decode(r.value);
    expect(sse.endsWith("data: [DONE]\n\n")).toBe(true);
    const events = sse.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    expect(events.at(-1).usage.completion_tokens).toBe(40);
    expect(events.at(-2).choices[0].finish_reason).toBe("length");
    expect(await server.exited).toBe(0);
    expect(server.output()).toContain("Shut down cleanly.");
  });
});
