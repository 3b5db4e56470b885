// Structured outputs through the real server process (CPU backend, tiny random-weight Qwen3 with
// the real tokenizer): response_format json_schema on chat, structured_outputs choice and regex on
// completions (streamed and not), and the 400s that name the field: a schema xgrammar cannot
// compile, two constraint kinds at once, an unknown key, structural_tag.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { postJson, type ServerProcess, startTinyServer, stopServerProcess } from "./server_process.ts";

// deno-lint-ignore no-explicit-any
type Json = any;

let server: ServerProcess;
setDefaultTimeout(30_000);

const post = (path: string, body: unknown) => postJson(server, path, body);

beforeAll(async () => {
  server = await startTinyServer();
});

afterAll(() => stopServerProcess(server));

const SCHEMA = {
  type: "object",
  properties: { n: { type: "integer", minimum: 0, maximum: 9 }, c: { enum: ["a", "b"] } },
  required: ["n", "c"],
  additionalProperties: false,
};

test("chat response_format json_schema: the reply parses and satisfies the schema", async () => {
  const res = await post("/v1/chat/completions", {
    messages: [{ role: "user", content: "Give me JSON" }],
    max_tokens: 40,
    temperature: 0.8,
    seed: 4,
    n: 3,
    response_format: { type: "json_schema", json_schema: { name: "r", schema: SCHEMA, strict: true } },
  });
  expect(res.status).toBe(200);
  const body: Json = await res.json();
  let complete = 0;
  for (const choice of body.choices) {
    const text: string = choice.message.content;
    if (choice.finish_reason !== "stop") {
      expect(text.trimStart().startsWith("{")).toBe(true);
      continue;
    }
    complete++;
    const v = JSON.parse(text);
    expect(Object.keys(v).sort()).toEqual(["c", "n"]);
    expect(Number.isInteger(v.n) && v.n >= 0 && v.n <= 9).toBe(true);
    expect(["a", "b"]).toContain(v.c);
  }
  // Any whitespace is allowed between JSON tokens (vLLM's default), so a random model's replies may
  // run out of tokens; without it (disable_any_whitespace) every reply completes.
  const compact = await post("/v1/chat/completions", {
    messages: [{ role: "user", content: "Give me JSON" }],
    max_tokens: 40,
    temperature: 0.8,
    seed: 4,
    n: 3,
    structured_outputs: { json: SCHEMA, disable_any_whitespace: true },
  });
  for (const choice of ((await compact.json()) as Json).choices) {
    expect(choice.finish_reason).toBe("stop");
    const v = JSON.parse(choice.message.content);
    expect(Object.keys(v).sort()).toEqual(["c", "n"]);
    complete++;
  }
  expect(complete).toBeGreaterThanOrEqual(3);
});

test("completions structured_outputs choice (n = 4) and streamed regex", async () => {
  const choices = ["alpha", "beta", "gamma delta"];
  const res = await post("/v1/completions", {
    prompt: "Pick:",
    max_tokens: 16,
    temperature: 1.3,
    seed: 2,
    n: 4,
    structured_outputs: { choice: choices },
  });
  expect(res.status).toBe(200);
  const body: Json = await res.json();
  for (const c of body.choices) {
    expect(c.finish_reason).toBe("stop");
    expect(choices).toContain(c.text);
  }
  const stream = await post("/v1/completions", {
    prompt: "Code:",
    max_tokens: 16,
    temperature: 1,
    seed: 7,
    stream: true,
    structured_outputs: { regex: "[A-Z]{3}-[0-9]{2}" },
  });
  expect(stream.status).toBe(200);
  let text = "";
  for (const line of (await stream.text()).split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    text += JSON.parse(line.slice(6)).choices[0]?.text ?? "";
  }
  expect(text).toMatch(/^[A-Z]{3}-[0-9]{2}$/);
});

test("400s name the field: an invalid schema, two kinds, an unknown key, structural_tag", async () => {
  const cases: Array<[Json, string, RegExp]> = [
    [
      { structured_outputs: { json: { type: "object", properties: { a: { $ref: "#/nowhere" } } } } },
      "structured_outputs",
      /nowhere/,
    ],
    [
      { response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "nope" } } } },
      "response_format",
      /nope|type/i,
    ],
    [{ structured_outputs: { regex: "[a-" } }, "structured_outputs", /Unclosed/],
    [{ structured_outputs: { grammar: "root ::= missing" } }, "structured_outputs", /missing/],
    [{ structured_outputs: { regex: "a", choice: ["a"] } }, "structured_outputs", /multiple/],
    [{ structured_outputs: { whitespace_pattern: " ", regex: "a" } }, "structured_outputs.whitespace_pattern", /./],
    [{ response_format: { type: "structural_tag", format: {} } }, "response_format.type", /structural_tag/],
  ];
  for (const [extra, param, message] of cases) {
    const res = await post("/v1/completions", { prompt: "x", max_tokens: 4, ...extra });
    const body: Json = await res.json();
    expect({ status: res.status, param: body.error?.param }).toEqual({ status: 400, param });
    expect(body.error.message).toMatch(message);
  }
  // The server still serves a constrained request after them.
  const ok = await post("/v1/completions", { prompt: "x", max_tokens: 8, structured_outputs: { choice: ["yes"] } });
  expect(((await ok.json()) as Json).choices[0].text).toBe("yes");
});
