// Tools, reasoning and the chat-template fields end to end over a real listener, with raw HTTP/SSE
// and the official `openai` client, against the engine double replaying fixed replies: tool calls
// and reasoning in the message and as streamed deltas (which add up to the message),
// finish_reason tool_calls, include_reasoning and parallel_tool_calls, tool_choice "required" and a
// named function (their reply shapes; the schema itself is tested against the real model in
// test/system/server_forced_tool_choice.test.ts), the 400s (auto without the server flags, empty
// tools, reserved template variables, continue_final_message with the generation prompt), and what
// the template receives.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { type HttpServer, startHttpServer } from "../../../lib/runtime/http_server.ts";
import { createApp } from "../../../lib/server/app.ts";
import { FakeEngine } from "./fake_engine.ts";
import { readSse } from "./sse_helpers.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

interface Served {
  engine: FakeEngine;
  http: HttpServer;
  client: OpenAI;
}

async function start(replyParsers: Parameters<typeof createApp>[0]["replyParsers"]): Promise<Served> {
  const engine = new FakeEngine();
  engine.model.maxModelLen = 4096;
  const app = createApp({ engine, servedModelName: "fake", replyParsers });
  const http = await startHttpServer({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  return { engine, http, client: new OpenAI({ baseURL: `${http.url}/v1`, apiKey: "none", maxRetries: 0 }) };
}

let parsing: Served;
let plain: Served;
beforeAll(async () => {
  parsing = await start({ reasoningParser: "qwen3", enableAutoToolChoice: true, toolCallParser: "hermes" });
  plain = await start(undefined);
});
afterAll(async () => {
  await parsing.http.stop(true);
  await plain.http.stop(true);
});

const tools = [{
  type: "function" as const,
  function: { name: "get_weather", description: "d", parameters: { type: "object", properties: {} } },
}];
const messages = [{ role: "user" as const, content: "weather in Köln?" }];
const REPLY = [
  "<think>\nThe user wants",
  " the weather.\n</th",
  "ink>\n\nChecking. <tool",
  '_call>\n{"name": "get_weather", "arguments": {"city": "Köln"}}\n</tool_call>',
  '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Bonn"}}\n</tool_call>',
];

function post(s: Served, body: unknown): Promise<Response> {
  return fetch(`${s.http.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "fake", max_tokens: 50, ...body as object }),
  });
}

describe("tool calls and reasoning in the reply", () => {
  test("non-streamed (raw HTTP): reasoning, content before the calls, tool_calls, finish_reason tool_calls", async () => {
    parsing.engine.replyPieces = REPLY;
    const res = await post(parsing, { messages, tools });
    expect(res.status).toBe(200);
    const body: Json = await res.json();
    const choice = body.choices[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.reasoning).toBe("\nThe user wants the weather.\n");
    expect(choice.message.reasoning_content).toBe(choice.message.reasoning);
    expect(choice.message.content).toBe("\n\nChecking. ");
    expect(choice.message.tool_calls.map((c: Json) => c.function)).toEqual([
      { name: "get_weather", arguments: '{"city": "Köln"}' },
      { name: "get_weather", arguments: '{"city": "Bonn"}' },
    ]);
    expect(choice.message.tool_calls[0]).toMatchObject({
      type: "function",
      id: expect.stringMatching(/^chatcmpl-tool-/),
    });
  });

  test("streamed (raw SSE): vLLM's delta shapes, adding up to the non-streamed message", async () => {
    parsing.engine.replyPieces = REPLY;
    const events = await readSse(await post(parsing, { messages, tools, stream: true }));
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1) as Json[];
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    const deltas = chunks.slice(1).map((c) => c.choices[0].delta);
    expect(deltas.map((d) => d.reasoning ?? "").join("")).toBe("\nThe user wants the weather.\n");
    expect(deltas.map((d) => d.content ?? "").join("")).toBe("\n\nChecking. ");
    // No delta carries a partial tag: "</th" waited for "ink>", "<tool" for "_call>".
    for (const d of deltas) expect(JSON.stringify(d)).not.toMatch(/<\/th|<tool/);
    const calls = deltas.flatMap((d) => d.tool_calls ?? []);
    expect(calls.map((c: Json) => [c.index, c.type, c.function.name, c.function.arguments])).toEqual([
      [0, "function", "get_weather", '{"city": "Köln"}'],
      [1, "function", "get_weather", '{"city": "Bonn"}'],
    ]);
    expect(chunks.at(-1).choices[0].finish_reason).toBe("tool_calls");
  });

  test("openai client: tool calls, streamed and not; parallel_tool_calls false keeps one", async () => {
    parsing.engine.replyPieces = REPLY;
    const c = await parsing.client.chat.completions.create({ model: "fake", messages, tools, max_tokens: 50 });
    expect(c.choices[0]!.finish_reason).toBe("tool_calls");
    expect(c.choices[0]!.message.tool_calls!.map((t) => (t as Json).function.name)).toEqual([
      "get_weather",
      "get_weather",
    ]);
    const one = await parsing.client.chat.completions.create({
      model: "fake",
      messages,
      tools,
      max_tokens: 50,
      parallel_tool_calls: false,
    });
    expect(one.choices[0]!.message.tool_calls).toHaveLength(1);
    const stream = await parsing.client.chat.completions.create({
      model: "fake",
      messages,
      tools,
      max_tokens: 50,
      stream: true,
    });
    const args: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const t of chunk.choices[0]?.delta.tool_calls ?? []) {
        args[t.index] = (args[t.index] ?? "") + t.function!.arguments;
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(args).toEqual(['{"city": "Köln"}', '{"city": "Bonn"}']);
    expect(finish).toBe("tool_calls");
  });

  test("invalid JSON in the tags is plain content, streamed and not, with finish_reason stop", async () => {
    parsing.engine.replyPieces = ["</think>", "Hi <tool_call>{oops", "}</tool_call>"];
    const body: Json = await (await post(parsing, { messages, tools })).json();
    expect(body.choices[0].message).toMatchObject({ content: "Hi <tool_call>{oops}</tool_call>", reasoning: null });
    expect(body.choices[0].message.tool_calls).toBeUndefined();
    expect(body.choices[0].finish_reason).toBe("stop");
    const chunks = (await readSse(await post(parsing, { messages, tools, stream: true }))).slice(0, -1) as Json[];
    expect(chunks.map((c) => c.choices[0].delta.content ?? "").join("")).toBe("Hi <tool_call>{oops}</tool_call>");
    expect(chunks.at(-1).choices[0].finish_reason).toBe("stop");
  });

  test("tool_choice none: tools are rendered but the reply is not parsed for calls", async () => {
    parsing.engine.replyPieces = ['</think><tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'];
    const body: Json = await (await post(parsing, { messages, tools, tool_choice: "none" })).json();
    expect(body.choices[0].message.tool_calls).toBeUndefined();
    expect(body.choices[0].message.content).toContain("<tool_call>");
    const prompt = parsing.engine.tokenizer.decode(parsing.engine.requests.at(-1)!.promptTokenIds);
    expect(prompt).toContain('<tools>[{"type":"function","function":{"name":"get_weather"');
  });

  test("include_reasoning false leaves the reasoning out; enable_thinking false makes it all content", async () => {
    parsing.engine.replyPieces = ["<think>r</think>", "answer"];
    const dropped: Json = await (await post(parsing, { messages, include_reasoning: false })).json();
    expect(dropped.choices[0].message).toMatchObject({ content: "answer", reasoning: null });
    const stream = (await readSse(await post(parsing, { messages, include_reasoning: false, stream: true })))
      .slice(0, -1) as Json[];
    expect(stream.some((c) => c.choices[0].delta.reasoning !== undefined)).toBe(false);
    parsing.engine.replyPieces = ["no thinking here"];
    const off = await parsing.client.chat.completions.create({
      model: "fake",
      messages,
      max_tokens: 50,
      chat_template_kwargs: { enable_thinking: false },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(off.choices[0]!.message.content).toBe("no thinking here");
    expect((off.choices[0]!.message as Json).reasoning).toBeNull();
    const prompt = parsing.engine.tokenizer.decode(parsing.engine.requests.at(-1)!.promptTokenIds);
    expect(prompt).toContain('<vars>{"enable_thinking":false}');
  });

  test("without a reasoning parser the reply is content as it was, with no reasoning field", async () => {
    plain.engine.replyPieces = ["<think>r</think>", "answer"];
    const body: Json = await (await post(plain, { messages })).json();
    expect(body.choices[0].message).toEqual({ role: "assistant", content: "<think>r</think>answer" });
  });
});

describe("forced tool choice without any server flag (the engine double ignores the schema)", () => {
  test('a named function: the reply is its arguments, content "", finish_reason stop; streamed as deltas', async () => {
    plain.engine.replyPieces = ['{"city": ', '"Köln"}'];
    const tool_choice = { type: "function", function: { name: "get_weather" } };
    const body: Json = await (await post(plain, { messages, tools, tool_choice })).json();
    expect(body.choices[0].finish_reason).toBe("stop");
    expect(body.choices[0].message.content).toBe("");
    expect(body.choices[0].message.tool_calls.map((c: Json) => c.function)).toEqual([
      { name: "get_weather", arguments: '{"city": "Köln"}' },
    ]);
    const stream = await plain.client.chat.completions.create({
      model: "fake",
      messages,
      tools,
      tool_choice: tool_choice as never,
      stream: true,
    });
    const deltas: Json[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      deltas.push(...(chunk.choices[0]?.delta.tool_calls ?? []));
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("stop");
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas[0]).toMatchObject({ index: 0, type: "function", function: { name: "get_weather" } });
    expect(deltas.map((d) => d.function.arguments).join("")).toBe('{"city": "Köln"}');
  });

  test('"required": each array element is a call, finish_reason tool_calls; streamed whole at the end', async () => {
    plain.engine.replyPieces = ['[{"name": "get_weather", "para', 'meters": {"city": "Bonn"}}]'];
    const body: Json = await (await post(plain, { messages, tools, tool_choice: "required" })).json();
    expect(body.choices[0].finish_reason).toBe("tool_calls");
    expect(body.choices[0].message.content).toBe("");
    expect(body.choices[0].message.tool_calls.map((c: Json) => c.function)).toEqual([
      { name: "get_weather", arguments: '{"city": "Bonn"}' },
    ]);
    const stream = await plain.client.chat.completions.create({
      model: "fake",
      messages,
      tools,
      tool_choice: "required",
      stream: true,
    });
    const withCalls: Json[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.tool_calls) withCalls.push(chunk.choices[0]);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("tool_calls");
    expect(withCalls).toHaveLength(1);
    expect(withCalls[0].delta.tool_calls[0]).toMatchObject({
      index: 0,
      function: { name: "get_weather", arguments: '{"city": "Bonn"}' },
    });
  });
});

describe("the 400s", () => {
  const errorOf = async (s: Served, body: unknown) => {
    const res = await post(s, body);
    return { status: res.status, error: ((await res.json()) as Json).error };
  };

  test("tool_choice auto without --enable-auto-tool-choice is a 400 naming it", async () => {
    const auto = await errorOf(plain, { messages, tools });
    expect(auto.status).toBe(400);
    expect(auto.error).toMatchObject({
      param: "tool_choice",
      message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    });
  });

  test("vLLM's tool checks: empty tools, a tool_choice without tools, an unknown named tool", async () => {
    expect((await errorOf(parsing, { messages, tools: [] })).error.message).toContain("must not be an empty array");
    expect((await errorOf(parsing, { messages, tool_choice: "auto" })).error.message).toContain(
      "When using `tool_choice`, `tools` must be set.",
    );
    const unknown = await errorOf(parsing, {
      messages,
      tools,
      tool_choice: { type: "function", function: { name: "nope" } },
    });
    expect(unknown.error.message).toContain("does not match any of the specified `tools`");
  });

  test("chat_template_kwargs may not set what the request sets; continue_final_message needs no generation prompt", async () => {
    const reserved = await errorOf(parsing, { messages, chat_template_kwargs: { add_generation_prompt: false } });
    expect(reserved.status).toBe(400);
    expect(reserved.error.param).toBe("chat_template_kwargs.add_generation_prompt");
    const both = await errorOf(parsing, { messages, continue_final_message: true });
    expect(both.error.message).toContain("Cannot set both `continue_final_message` and `add_generation_prompt`");
  });

  test("bad assistant tool_calls: arguments that are not JSON, tool_calls on a user message", async () => {
    const badArgs = await errorOf(parsing, {
      messages: [...messages, {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{x" } }],
      }],
    });
    expect(badArgs.error.param).toBe("messages[1].tool_calls[0].function.arguments");
    const onUser = await errorOf(parsing, {
      messages: [{
        role: "user",
        content: "x",
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }],
      }],
    });
    expect(onUser.error.param).toBe("messages[0].tool_calls");
  });
});

describe("what the template receives", () => {
  test("assistant tool_calls (arguments parsed), tool messages with their ids, continue_final_message", async () => {
    plain.engine.replyPieces = ["ok"];
    const res = await post(plain, {
      messages: [
        ...messages,
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Köln"}' } }],
        },
        { role: "tool", content: "sunny", tool_call_id: "c1" },
        { role: "assistant", content: "It is" },
      ],
      tools,
      tool_choice: "none",
      add_generation_prompt: false,
      continue_final_message: true,
    });
    expect(res.status).toBe(200);
    const prompt = plain.engine.tokenizer.decode(plain.engine.requests.at(-1)!.promptTokenIds);
    expect(prompt).toContain(
      '<calls>[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":{"city":"Köln"}}}]',
    );
    expect(prompt).toContain("<tool>sunny<id>c1");
    // The final message stays open: the prompt ends with its content.
    expect(prompt.endsWith("<assistant>It is")).toBe(true);
    const body: Json = await res.json();
    expect(body.choices[0].message.role).toBe("assistant");
  });
});
