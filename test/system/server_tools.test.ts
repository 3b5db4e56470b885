// Tools, reasoning and vLLM's metric set against the real server process (CPU backend, two ranks of
// the tiny random-weight Qwen3 model with the real tokenizer and chat template), started with
// `--reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser hermes`, through the
// official `openai` client and raw HTTP. The model's text is random, so these check the surface:
// tools reach the prompt, replies carry the reasoning fields (a reply without </think> is all
// reasoning), refusals name their field, and every vLLM family is there per engine from start-up.
// The parsers' behaviour on given text is tested in test/unit/server (reply_parsing, chat_tools).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { metricValue, postJson, type ServerProcess, startTinyServer, stopServerProcess } from "./server_process.ts";

const MODEL = "tiny-tools";

let server: ServerProcess;
let client: OpenAI;
let startupMetrics: string;

// deno-lint-ignore no-explicit-any
type Json = any;

const post = (path: string, body: unknown) => postJson(server, path, body);

beforeAll(async () => {
  server = await startTinyServer([
    "--gpus",
    "2",
    "--served-model-name",
    MODEL,
    "--max-model-len",
    "512",
    "--reasoning-parser",
    "qwen3",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
  ], 120_000);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
  startupMetrics = await (await fetch(`${server.url}/metrics`)).text();
}, 150_000);

afterAll(() => stopServerProcess(server));

const tools: OpenAI.ChatCompletionTool[] = [{
  type: "function",
  function: { name: "get_weather", description: "Weather of a city", parameters: { type: "object", properties: {} } },
}];
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Weather in Köln?" }];

describe("vLLM's metric families", () => {
  test("present for both engines at start-up, zero before traffic", () => {
    const families = [
      "vllm:num_requests_running",
      "vllm:num_preemptions_total",
      "vllm:iteration_tokens_total_count",
      "vllm:request_queue_time_seconds_count",
      "vllm:request_prefill_time_seconds_count",
      "vllm:request_decode_time_seconds_count",
      "vllm:request_inference_time_seconds_count",
      "vllm:request_time_per_output_token_seconds_count",
      "vllm:request_prompt_tokens_count",
      "vllm:request_generation_tokens_count",
      "vllm:request_params_n_count",
      "vllm:prompt_tokens_total",
      "vllm:generation_tokens_total",
    ];
    for (const family of families) {
      for (const engine of ["0", "1"]) {
        expect({ family, engine, value: metricValue(startupMetrics, family, { engine }) }).toEqual({
          family,
          engine,
          value: 0,
        });
      }
    }
    expect(metricValue(startupMetrics, "vllm:request_success_total", { engine: "1", finished_reason: "length" }))
      .toBe(0);
  });
});

describe("tools and reasoning through the openai client", () => {
  test("a request with tools renders them into the prompt and answers with the reasoning fields", async () => {
    const plain = (await (await post("/tokenize", { messages })).json()) as Json;
    const withTools = (await (await post("/tokenize", { messages, tools })).json()) as Json;
    expect(withTools.count).toBeGreaterThan(plain.count + 20);
    const prompt = ((await (await post("/detokenize", { tokens: withTools.tokens })).json()) as Json).prompt;
    expect(prompt).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');

    const c = await client.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 8, seed: 1 });
    const message = c.choices[0]!.message as Json;
    // Random weights: the reply is whatever it is, split by the parsers all the same.
    expect("reasoning" in message && "reasoning_content" in message).toBe(true);
    const text = (message.reasoning ?? "") + (message.content ?? "");
    expect(text.length).toBeGreaterThan(0);
    if (!(message.tool_calls?.length > 0)) expect(c.choices[0]!.finish_reason).toBe("length");
  });

  test("streamed: reasoning and content deltas add up to the non-streamed reply of the same seed", async () => {
    const body = { model: MODEL, messages, max_tokens: 8, seed: 3, temperature: 1 };
    const whole = (await client.chat.completions.create(body)).choices[0]!.message as Json;
    const stream = await client.chat.completions.create({ ...body, stream: true });
    let reasoning = "", content = "";
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta as Json;
      reasoning += d?.reasoning ?? "";
      content += d?.content ?? "";
    }
    expect(reasoning).toBe(whole.reasoning ?? "");
    expect(content).toBe(whole.content ?? "");
  });

  test("enable_thinking false: all content; include_reasoning false: no reasoning", async () => {
    const off = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 6,
      seed: 2,
      chat_template_kwargs: { enable_thinking: false },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect((off.choices[0]!.message as Json).reasoning).toBeNull();
    const hidden = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 6,
      seed: 2,
      include_reasoning: false,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect((hidden.choices[0]!.message as Json).reasoning).toBeNull();
  });

  test("continue_final_message through raw HTTP; required is served; a bad combination is a 400 naming the field", async () => {
    const cont = await post("/v1/chat/completions", {
      model: MODEL,
      messages: [...messages, { role: "assistant", content: "It is" }],
      add_generation_prompt: false,
      continue_final_message: true,
      max_tokens: 3,
    });
    expect(cont.status).toBe(200);
    expect(((await cont.json()) as Json).choices[0].message.role).toBe("assistant");
    // "required" is served (held to the tools' schema; server_forced_tool_choice.test.ts checks the calls).
    const required = await post("/v1/chat/completions", {
      model: MODEL,
      messages,
      tools,
      tool_choice: "required",
      max_tokens: 4,
    });
    expect(required.status).toBe(200);
    expect(["length", "tool_calls"]).toContain(((await required.json()) as Json).choices[0].finish_reason);
    const both = await post("/v1/chat/completions", { model: MODEL, messages, continue_final_message: true });
    expect(both.status).toBe(400);
    expect(((await both.json()) as Json).error.message).toContain("continue_final_message");
  });
});

describe("vLLM's request phase metrics after traffic", () => {
  test("every finished request has a queue and an inference time: the workers report when each was first scheduled", async () => {
    const r = await post("/v1/completions", { model: MODEL, prompt: "Hello", max_tokens: 2 });
    expect(r.status).toBe(200);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const sum = (family: string) =>
      ["0", "1"].reduce((acc, engine) => acc + (metricValue(text, family, { engine }) ?? 0), 0);
    const finished = sum("vllm:e2e_request_latency_seconds_count");
    expect(finished).toBeGreaterThan(0);
    expect(sum("vllm:request_queue_time_seconds_count")).toBe(finished);
    expect(sum("vllm:request_inference_time_seconds_count")).toBe(finished);
    expect(sum("vllm:num_preemptions_total")).toBe(0); // reported by the workers, none at this load
  });

  test("iteration_tokens_total counts the workers' steps and their tokens", async () => {
    const r = await post("/v1/completions", { model: MODEL, prompt: "Hello there", max_tokens: 3 });
    expect(r.status).toBe(200);
    // A worker's stats reach the server beside, not before, the reply: wait for them.
    let text = "";
    const sum = (family: string) =>
      ["0", "1"].reduce((acc, engine) => acc + (metricValue(text, family, { engine }) ?? 0), 0);
    for (let i = 0; i < 30; i++) {
      text = await (await fetch(`${server.url}/metrics`)).text();
      if (sum("vllm:iteration_tokens_total_count") >= 3) break;
      await Bun.sleep(100);
    }
    // Three tokens take a prefill step and two decode steps of one token each, at least.
    const steps = sum("vllm:iteration_tokens_total_count");
    expect(steps).toBeGreaterThanOrEqual(3);
    expect(sum("vllm:iteration_tokens_total_sum")).toBeGreaterThanOrEqual(steps + 1);
    for (const engine of ["0", "1"]) {
      expect(metricValue(text, "vllm:iteration_tokens_total_bucket", { engine, le: "+Inf" }))
        .toBe(metricValue(text, "vllm:iteration_tokens_total_count", { engine }));
    }
  });
});
