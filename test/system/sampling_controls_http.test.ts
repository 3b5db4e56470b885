// Sampling controls and top logprobs through the real server process (CPU backend, tiny
// random-weight Qwen3 model with the real tokenizer), with the official `openai` client and raw
// HTTP: min_p 1.0 is greedy, logit_bias forces a token, allowed_token_ids restricts the output,
// bad_words never appear, penalties change a repetitive output, logprobs: k / top_logprobs: k have
// vLLM's shapes, and bad values are 400s naming the field.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { postJson, type ServerProcess, startTinyServer, stopServerProcess } from "./server_process.ts";

const MODEL = "tiny-test";
const PROMPT = "Once upon a time in a small village";

let server: ServerProcess;
let client: OpenAI;

// deno-lint-ignore no-explicit-any
type Json = any;

const post = (path: string, body: unknown) => postJson(server, path, body);

/** Output token ids of one completion (logprobs with tokens as ids), plus the response. */
async function completionIds(extra: Record<string, unknown>): Promise<{ c: Json; ids: number[] }> {
  const c: Json = await client.completions.create({
    model: MODEL,
    prompt: PROMPT,
    max_tokens: 12,
    ignore_eos: true,
    logprobs: 0,
    return_tokens_as_token_ids: true,
    ...extra,
  } as OpenAI.CompletionCreateParamsNonStreaming);
  const ids = (c.choices[0].logprobs.tokens as string[]).map((t) => Number(t.slice("token_id:".length)));
  return { c, ids };
}

async function tokenize(text: string): Promise<number[]> {
  return ((await (await post("/tokenize", { model: MODEL, prompt: text, add_special_tokens: false })).json()) as Json)
    .tokens;
}

let greedy: number[];

beforeAll(async () => {
  server = await startTinyServer(["--served-model-name", MODEL, "--max-model-len", "256"]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
  greedy = (await completionIds({ temperature: 0 })).ids;
});

afterAll(() => stopServerProcess(server));

describe("sampling controls", () => {
  test("min_p 1.0 at temperature 1 is greedy, whatever the seed", async () => {
    for (const seed of [1, 2, 3]) {
      expect((await completionIds({ temperature: 1, min_p: 1, seed })).ids).toEqual(greedy);
    }
    // Without min_p the same seeds sample something else (the control is not a no-op).
    const sampled = await Promise.all([1, 2, 3].map((seed) => completionIds({ temperature: 1, seed })));
    expect(sampled.some((s) => s.ids.join() !== greedy.join())).toBe(true);
  });

  test("logit_bias +100 forces a token; allowed_token_ids restricts the output", async () => {
    const forced = 1234;
    const biased = await completionIds({ temperature: 1, seed: 7, logit_bias: { [forced]: 100 } });
    expect(biased.ids).toEqual(Array(12).fill(forced));
    const allowed = [220, 1234, 5000];
    const restricted = await completionIds({ temperature: 1.5, seed: 9, allowed_token_ids: allowed });
    for (const id of restricted.ids) expect(allowed).toContain(id);
  });

  test("bad_words never appear in the output, even when logit_bias pushes them", async () => {
    // "the" is one token without a leading space; vLLM's rule bans that form (and " the" when it
    // is one token too).
    const [the] = await tokenize("the");
    const spaced = await tokenize(" the");
    const banned = spaced.length === 1 ? [the!, spaced[0]!] : [the!];
    const pushed = await completionIds({ temperature: 0, logit_bias: { [the!]: 100 } });
    expect(pushed.ids).toEqual(Array(12).fill(the));
    const { ids } = await completionIds({ temperature: 0, logit_bias: { [the!]: 100 }, bad_words: ["the"] });
    for (const t of banned) expect(ids).not.toContain(t);
  });

  test("penalties change a repetitive output", async () => {
    const long = (await completionIds({ temperature: 0, max_tokens: 32 })).ids;
    const repeats = (ids: number[]) => ids.length - new Set(ids).size;
    const penalized = (await completionIds({
      temperature: 0,
      max_tokens: 32,
      frequency_penalty: 2,
      presence_penalty: 2,
      repetition_penalty: 2,
    })).ids;
    expect(penalized).not.toEqual(long);
    expect(repeats(penalized)).toBeLessThanOrEqual(repeats(long));
    // A negative presence penalty rewards repeats instead.
    const rewarded = (await completionIds({ temperature: 0, max_tokens: 32, presence_penalty: -2 })).ids;
    expect(repeats(rewarded)).toBeGreaterThanOrEqual(repeats(long));
  });
});

describe("top logprobs", () => {
  test("completions logprobs: 5 lists the chosen token and the 5 most likely, sorted, on every position", async () => {
    const c: Json = await client.completions.create({
      model: MODEL,
      prompt: PROMPT,
      max_tokens: 6,
      temperature: 1,
      seed: 3,
      ignore_eos: true,
      logprobs: 5,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    const lp = c.choices[0].logprobs;
    expect(lp.top_logprobs).toHaveLength(lp.tokens.length);
    lp.top_logprobs.forEach((top: Record<string, number>, i: number) => {
      const entries = Object.entries(top);
      expect(entries.length).toBeGreaterThanOrEqual(5);
      expect(entries.length).toBeLessThanOrEqual(6);
      // The chosen token comes first, with its own logprob.
      expect(entries[0]![0]).toBe(lp.tokens[i]);
      expect(entries[0]![1]).toBe(lp.token_logprobs[i]);
      const rest = entries.slice(1).map(([, v]) => v);
      for (let j = 1; j < rest.length; j++) expect(rest[j]!).toBeLessThanOrEqual(rest[j - 1]!);
      expect(entries.reduce((s, [, v]) => s + Math.exp(v), 0)).toBeLessThanOrEqual(1 + 1e-4);
    });
  });

  test("chat top_logprobs: 3 gives 3 alternatives per token, greedy: the chosen one first and most likely", async () => {
    const r: Json = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 5,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = r.choices[0].logprobs.content;
    expect(content.length).toBeGreaterThan(0);
    for (const t of content) {
      expect(t.top_logprobs).toHaveLength(3);
      expect(t.top_logprobs[0].token).toBe(t.token);
      expect(t.top_logprobs[0].logprob).toBe(t.logprob);
      expect(t.top_logprobs[1].logprob).toBeLessThanOrEqual(t.logprob);
      expect(t.top_logprobs[2].logprob).toBeLessThanOrEqual(t.top_logprobs[1].logprob);
    }
  });

  test("streamed chunks carry their tokens' alternatives", async () => {
    const stream = await client.completions.create({
      model: MODEL,
      prompt: PROMPT,
      max_tokens: 4,
      temperature: 0,
      ignore_eos: true,
      logprobs: 2,
      stream: true,
    } as OpenAI.CompletionCreateParamsStreaming);
    let positions = 0;
    for await (const chunk of stream) {
      const lp: Json = chunk.choices[0]?.logprobs;
      if (!lp) continue;
      positions += lp.tokens.length;
      for (const top of lp.top_logprobs) expect(Object.keys(top).length).toBeGreaterThanOrEqual(2);
    }
    expect(positions).toBe(4);
  });
});

describe("bad values are 400s naming the field", () => {
  const cases: [string, string, Record<string, unknown>][] = [
    ["presence_penalty", "/v1/completions", { presence_penalty: 3 }],
    ["frequency_penalty", "/v1/completions", { frequency_penalty: -2.5 }],
    ["repetition_penalty", "/v1/completions", { repetition_penalty: 0 }],
    ["min_p", "/v1/completions", { min_p: 1.5 }],
    ["logit_bias", "/v1/completions", { logit_bias: { abc: 1 } }],
    ["logit_bias", "/v1/completions", { logit_bias: { "999999": 1 } }],
    ["allowed_token_ids", "/v1/completions", { allowed_token_ids: [] }],
    ["allowed_token_ids", "/v1/completions", { allowed_token_ids: [999999] }],
    ["bad_words", "/v1/completions", { bad_words: [""] }],
    ["logprobs", "/v1/completions", { logprobs: 21 }],
    ["top_logprobs", "/v1/chat/completions", { top_logprobs: 2 }],
    ["top_logprobs", "/v1/chat/completions", { logprobs: true, top_logprobs: 21 }],
  ];
  for (const [param, path, fields] of cases) {
    test(`${path} ${JSON.stringify(fields)}`, async () => {
      const body = path === "/v1/completions"
        ? { prompt: PROMPT, max_tokens: 2, ...fields }
        : { messages: [{ role: "user", content: "Hi" }], max_tokens: 2, ...fields };
      const res = await post(path, body);
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error.param).toBe(param);
    });
  }
});
