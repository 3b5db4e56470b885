// tool_choice "required" and a named function through the real server process (CPU backend, tiny
// random-weight Qwen3 with the real tokenizer and chat template), started without any tool-call
// flag: the reply is held to the tools' schema, so even a random model's replies are tool calls
// whose arguments parse and satisfy the function's parameters, streamed (a named call's arguments
// as deltas, "required" calls whole in the last chunk) and not; and the 400s naming the field.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { tinyModelDir } from "../helpers/tiny_model_dir.ts";
import { type ServerProcess, startServerProcess, stopServerProcess } from "./server_process.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

let server: ServerProcess;
setDefaultTimeout(30_000);

const post = (body: unknown) =>
  fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

/**
 * logit_bias -100 on every token of whitespace and punctuation only: the schema allows any
 * whitespace between JSON tokens (as vLLM's does), and a random model spends its tokens there
 * (`{\n\n\n`, `\n\n`, ...), so without this its JSON would rarely end within max_tokens.
 */
let noWhitespace: Record<string, number> = {};

beforeAll(async () => {
  const dir = await tinyModelDir();
  const vocab: Record<string, number> = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")).model.vocab;
  // Byte-level BPE spells space, newline, tab and carriage return as \u0120, \u010a, \u0109, \u010d.
  const whitespace = /[\u0120\u010a\u0109\u010d]/;
  const punctuationOrWhitespace = /^[\u0120\u010a\u0109\u010d!-/:-@[-`{-~]+$/;
  noWhitespace = Object.fromEntries(
    Object.entries(vocab).filter(([t]) => whitespace.test(t) && punctuationOrWhitespace.test(t)).map((
      [, id],
    ) => [id, -100]),
  );
  server = await startServerProcess(["--model", dir, "--port", "0", "--backend", "cpu"]);
});

afterAll(() => stopServerProcess(server));

// Small closed schemas, so a random model's JSON ends within max_tokens.
const WEATHER = {
  type: "object",
  properties: { d: { type: "integer", minimum: 0, maximum: 9 } },
  required: ["d"],
  additionalProperties: false,
};
const TIME = {
  type: "object",
  properties: { z: { enum: ["utc", "cet"] } },
  required: ["z"],
  additionalProperties: false,
};
const tools = [
  { type: "function", function: { name: "weather", parameters: WEATHER } },
  { type: "function", function: { name: "time", parameters: TIME } },
];
const base = {
  messages: [{ role: "user", content: "call a tool" }],
  tools,
  max_tokens: 48,
  temperature: 0.8,
  seed: 3,
  n: 3,
  get logit_bias() {
    return noWhitespace;
  },
};

function checkArguments(name: string, args: string): void {
  const v = JSON.parse(args);
  if (name === "weather") {
    expect(Object.keys(v)).toEqual(["d"]);
    expect(Number.isInteger(v.d) && v.d >= 0 && v.d <= 9).toBe(true);
  } else {
    expect(name).toBe("time");
    expect(Object.keys(v)).toEqual(["z"]);
    expect(["utc", "cet"]).toContain(v.z);
  }
}

async function streamChoices(body: unknown): Promise<Map<number, { deltas: Json[]; finish: string | null }>> {
  const res = await post({ ...body as object, stream: true });
  expect(res.status).toBe(200);
  const text = await res.text();
  const out = new Map<number, { deltas: Json[]; finish: string | null }>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const chunk: Json = JSON.parse(line.slice(6));
    for (const c of chunk.choices) {
      const s = out.get(c.index) ?? { deltas: [], finish: null };
      out.set(c.index, s);
      s.deltas.push(c.delta);
      if (c.finish_reason) s.finish = c.finish_reason;
    }
  }
  return out;
}

test("named function: one call to it whose arguments satisfy its parameters; finish_reason stop", async () => {
  const res = await post({ ...base, tool_choice: { type: "function", function: { name: "weather" } } });
  expect(res.status).toBe(200);
  const body: Json = await res.json();
  let complete = 0;
  for (const c of body.choices) {
    expect(c.message.content).toBe("");
    expect(c.message.tool_calls).toHaveLength(1);
    const call = c.message.tool_calls[0];
    expect(call.type).toBe("function");
    expect(call.id).toMatch(/^chatcmpl-tool-/);
    expect(call.function.name).toBe("weather");
    expect(["stop", "length"]).toContain(c.finish_reason);
    if (c.finish_reason !== "stop") continue;
    checkArguments("weather", call.function.arguments);
    complete++;
  }
  expect(complete).toBeGreaterThanOrEqual(1);
});

test("named function streamed: the arguments arrive as deltas and add up to valid JSON", async () => {
  const choices = await streamChoices({ ...base, tool_choice: { type: "function", function: { name: "time" } } });
  expect(choices.size).toBe(3);
  let complete = 0;
  for (const { deltas, finish } of choices.values()) {
    const calls = deltas.flatMap((d) => d.tool_calls ?? []);
    expect(calls.length).toBeGreaterThan(1);
    expect(calls[0]).toMatchObject({ index: 0, type: "function", function: { name: "time" } });
    expect(calls.slice(1).every((c: Json) => c.id === undefined && c.function.name === undefined)).toBe(true);
    expect(deltas.every((d) => d.content === undefined || d.content === "")).toBe(true);
    expect(["stop", "length"]).toContain(String(finish));
    if (finish !== "stop") continue;
    checkArguments("time", calls.map((c: Json) => c.function.arguments).join(""));
    complete++;
  }
  expect(complete).toBeGreaterThanOrEqual(1);
});

test('"required": each reply is one or more calls to the tools, finish_reason tool_calls', async () => {
  const res = await post({ ...base, tool_choice: "required" });
  expect(res.status).toBe(200);
  const body: Json = await res.json();
  let complete = 0;
  for (const c of body.choices) {
    if (c.finish_reason === "length") {
      // Cut short: the array did not parse, so the text comes back as content.
      expect(c.message.content.trimStart().startsWith("[")).toBe(true);
      continue;
    }
    expect(c.finish_reason).toBe("tool_calls");
    expect(c.message.content).toBe("");
    expect(c.message.tool_calls.length).toBeGreaterThanOrEqual(1);
    for (const call of c.message.tool_calls) checkArguments(call.function.name, call.function.arguments);
    complete++;
  }
  expect(complete).toBeGreaterThanOrEqual(1);
});

test('"required" streamed: the calls arrive whole in the last chunk', async () => {
  const choices = await streamChoices({ ...base, tool_choice: "required" });
  let complete = 0;
  for (const { deltas, finish } of choices.values()) {
    if (finish === "length") continue;
    expect(finish).toBe("tool_calls");
    const last = deltas.at(-1);
    expect(deltas.slice(0, -1).every((d) => d.tool_calls === undefined)).toBe(true);
    expect(last.tool_calls.length).toBeGreaterThanOrEqual(1);
    last.tool_calls.forEach((call: Json, i: number) => {
      expect(call.index).toBe(i);
      checkArguments(call.function.name, call.function.arguments);
    });
    complete++;
  }
  expect(complete).toBeGreaterThanOrEqual(1);
});

test("400s naming the field: an unknown function, empty tools, a schema with response_format", async () => {
  const errorOf = async (body: unknown) => {
    const res = await post(body);
    return { status: res.status, error: ((await res.json()) as Json).error };
  };
  const unknown = await errorOf({ ...base, tool_choice: { type: "function", function: { name: "nope" } } });
  expect(unknown.status).toBe(400);
  expect(unknown.error.param).toBe("tool_choice");
  const empty = await errorOf({ ...base, tools: [], tool_choice: "required" });
  expect(empty.status).toBe(400);
  expect(empty.error.message).toContain("must not be an empty array");
  const both = await errorOf({ ...base, tool_choice: "required", response_format: { type: "json_object" } });
  expect(both.status).toBe(400);
  expect(both.error.param).toBe("tool_choice");
  expect(both.error.message).toContain("response_format");
  const badSchema = await errorOf({
    ...base,
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object", minProperties: "x" } } }],
    tool_choice: "required",
  });
  expect(badSchema.status).toBe(400);
  expect(badSchema.error.param).toBe("tools");
});
