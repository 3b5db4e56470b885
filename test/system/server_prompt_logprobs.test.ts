// prompt_logprobs, echo with logprobs and the special-token fields against the real server process
// (CPU backend, tiny random-weight Qwen3 model with the real tokenizer), through the official
// `openai` client and raw HTTP/SSE, streamed and not, in vLLM's shapes: prompt_logprobs in each
// completions choice and on the chat response (null first, the prompt token's key first, ranks),
// refused with vLLM's messages where vLLM refuses it; echo's prompt logprobs before the generated
// ones (streamed with the first chunk), max_tokens 0 with echo; special tokens kept with
// skip_special_tokens false.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { postJson, type ServerProcess, startTinyServer, stopServerProcess } from "./server_process.ts";

const MODEL = "tiny-test";
const PROMPT = "Once upon a time in a small village";

let server: ServerProcess;
let client: OpenAI;
let promptIds: number[];
/** <|im_start|>: a special token of the Qwen3 vocabulary. */
let special: number;

// deno-lint-ignore no-explicit-any
type Json = any;

const post = (path: string, body: unknown) => postJson(server, path, body);

/** The `data:` payloads of an SSE response, [DONE] excluded. */
async function sse(res: Response): Promise<Json[]> {
  expect(res.status).toBe(200);
  return (await res.text()).split("\n").filter((l) => l.startsWith("data: ") && l !== "data: [DONE]").map((l) =>
    JSON.parse(l.slice(6))
  );
}

beforeAll(async () => {
  server = await startTinyServer(["--served-model-name", MODEL, "--max-model-len", "256"]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
  promptIds = ((await (await post("/tokenize", { model: MODEL, prompt: PROMPT })).json()) as Json).tokens;
  special = ((await (await post("/tokenize", { model: MODEL, prompt: "<|im_start|>" })).json()) as Json).tokens[0];
});

afterAll(() => stopServerProcess(server));

/** Checks one prompt_logprobs list against the prompt: null first, then the prompt token and k more. */
function checkPromptLogprobs(list: Json[], ids: number[], k: number): void {
  expect(list).toHaveLength(ids.length);
  expect(list[0]).toBeNull();
  list.slice(1).forEach((pos, j) => {
    const own = pos[String(ids[j + 1])];
    expect(own.rank).toBeGreaterThanOrEqual(1);
    expect(own.logprob).toBeLessThanOrEqual(0);
    expect(typeof own.decoded_token).toBe("string");
    const ranks = Object.values(pos).map((e: Json) => e.rank).sort((a, b) => a - b);
    // The k most likely have ranks 1..k; the prompt token adds its own when outside them.
    expect(ranks.slice(0, k)).toEqual(Array.from({ length: k }, (_, i) => i + 1));
    expect(Object.keys(pos).length).toBe(own.rank <= k ? k : k + 1);
    for (const e of Object.values(pos) as Json[]) {
      if (e.rank <= k) expect(e.logprob).toBeGreaterThanOrEqual(own.rank <= k ? -Infinity : own.logprob);
    }
  });
}

describe("prompt_logprobs", () => {
  test("completions through the client: in the choice, null first, the prompt token and k more per position", async () => {
    const c: Json = await client.completions.create({
      model: MODEL,
      prompt: PROMPT,
      max_tokens: 2,
      temperature: 0,
      prompt_logprobs: 3,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    checkPromptLogprobs(c.choices[0].prompt_logprobs, promptIds, 3);
    // decoded_token is the token's own text.
    const pos1 = c.choices[0].prompt_logprobs[1][String(promptIds[1])];
    const text = ((await (await post("/detokenize", { model: MODEL, tokens: [promptIds[1]] })).json()) as Json).prompt;
    expect(pos1.decoded_token).toBe(text);
  });

  test("raw HTTP: the prompt token's key comes first in each position, as vLLM's dict has it", async () => {
    const res = await post("/v1/completions", { model: MODEL, prompt: promptIds, max_tokens: 1, prompt_logprobs: 2 });
    const raw = await res.text();
    const at = raw.indexOf('"prompt_logprobs":[null,{');
    expect(at).toBeGreaterThan(0);
    expect(raw.slice(at + '"prompt_logprobs":[null,{'.length)).toStartWith(`"${promptIds[1]}":{"logprob":`);
    const body = JSON.parse(raw);
    checkPromptLogprobs(body.choices[0].prompt_logprobs, promptIds, 2);
  });

  test("chat through the client: on the response, over the templated prompt; 0 gives the prompt token alone", async () => {
    const c: Json = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hi there" }],
      max_tokens: 2,
      prompt_logprobs: 0,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const list = c.prompt_logprobs as Json[];
    expect(list.length).toBe(c.usage.prompt_tokens);
    expect(list[0]).toBeNull();
    for (const pos of list.slice(1)) expect(Object.keys(pos)).toHaveLength(1);
    expect(c.choices[0].prompt_logprobs).toBeUndefined();
  });

  test("the same values with or without a cached prefix, and n choices each carry them", async () => {
    const body = { model: MODEL, prompt: PROMPT, max_tokens: 1, prompt_logprobs: 1, n: 2, temperature: 1, seed: 3 };
    const a: Json = await (await post("/v1/completions", body)).json();
    const b: Json = await (await post("/v1/completions", body)).json();
    const lps = (c: Json, i: number) =>
      c.choices[i].prompt_logprobs.slice(1).map((pos: Json, j: number) => pos[String(promptIds[j + 1])].logprob);
    for (const [x, y] of [[lps(a, 0), lps(b, 0)], [lps(a, 0), lps(a, 1)]]) {
      x.forEach((v: number, j: number) => expect(v).toBeCloseTo(y[j], 4));
    }
  });

  test("refused as vLLM refuses it: with stream, over 20, -1 (the vocabulary), below -1", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ stream: true, prompt_logprobs: 1 }, "`prompt_logprobs` are not available when `stream=True`."],
      [{ prompt_logprobs: 21 }, "Requested prompt logprobs of 21, which is greater than max allowed: 20"],
      [{ prompt_logprobs: -1 }, "Requested prompt logprobs of 151936, which is greater than max allowed: 20"],
      [{ prompt_logprobs: -2 }, "`prompt_logprobs` must be a positive value or -1."],
    ];
    for (const [extra, message] of cases) {
      const err = await client.completions.create(
        { model: MODEL, prompt: PROMPT, max_tokens: 1, ...extra } as OpenAI.CompletionCreateParamsNonStreaming,
      ).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("prompt_logprobs");
      const res = await post("/v1/chat/completions", {
        model: MODEL,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 1,
        ...extra,
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error).toMatchObject({ message, param: "prompt_logprobs", code: 400 });
    }
  });

  test("raw SSE: a stream with prompt_logprobs 0 is accepted and shows none", async () => {
    const chunks = await sse(
      await post("/v1/completions", { model: MODEL, prompt: PROMPT, max_tokens: 3, stream: true, prompt_logprobs: 0 }),
    );
    expect(chunks.length).toBeGreaterThan(0);
    for (const c of chunks) expect(c.choices[0]?.prompt_logprobs).toBeUndefined();
  });
});

describe("echo with logprobs", () => {
  const base = { model: MODEL, prompt: PROMPT, max_tokens: 4, temperature: 0, ignore_eos: true, logprobs: 2 };

  test("client: the prompt tokens' logprobs come first, the first null; then the generated ones", async () => {
    const plain: Json = await client.completions.create(base as OpenAI.CompletionCreateParamsNonStreaming);
    const c: Json = await client.completions.create(
      { ...base, echo: true } as OpenAI.CompletionCreateParamsNonStreaming,
    );
    const ch = c.choices[0], lp = ch.logprobs, P = promptIds.length;
    expect(ch.text).toBe(PROMPT + plain.choices[0].text);
    expect(lp.tokens).toHaveLength(P + 4);
    expect(lp.token_logprobs[0]).toBeNull();
    expect(lp.top_logprobs[0]).toBeNull();
    // The prompt part equals prompt_logprobs (which echo asks for with k = logprobs).
    checkPromptLogprobs(ch.prompt_logprobs, promptIds, 2);
    for (let i = 1; i < P; i++) {
      expect(lp.token_logprobs[i]).toBeCloseTo(ch.prompt_logprobs[i][String(promptIds[i])].logprob, 5);
      expect(Object.keys(lp.top_logprobs[i]).length).toBeLessThanOrEqual(3);
    }
    expect(lp.tokens.slice(P)).toEqual(plain.choices[0].logprobs.tokens);
    lp.token_logprobs.slice(P).forEach((v: number, i: number) =>
      expect(v).toBeCloseTo(plain.choices[0].logprobs.token_logprobs[i], 4)
    );
    // Offsets run over the tokens' texts from 0.
    expect(lp.text_offset[0]).toBe(0);
    for (let i = 1; i < lp.tokens.length; i++) {
      expect(lp.text_offset[i]).toBe(lp.text_offset[i - 1] + lp.tokens[i - 1].length);
    }
  });

  test("raw SSE and the client's stream: the first chunk carries the prompt and its logprobs, the rest as before", async () => {
    const whole: Json = await (await post("/v1/completions", { ...base, echo: true })).json();
    const chunks = await sse(await post("/v1/completions", { ...base, echo: true, stream: true }));
    expect(chunks[0].choices[0].text.startsWith(PROMPT)).toBe(true);
    expect(chunks[0].choices[0].logprobs.tokens.length).toBeGreaterThan(promptIds.length);
    expect(chunks[0].choices[0].logprobs.token_logprobs[0]).toBeNull();
    expect(chunks.map((c) => c.choices[0].text).join("")).toBe(whole.choices[0].text);
    const tokens = chunks.flatMap((c) => c.choices[0].logprobs.tokens);
    const offsets = chunks.flatMap((c) => c.choices[0].logprobs.text_offset);
    expect(tokens).toEqual(whole.choices[0].logprobs.tokens);
    expect(offsets).toEqual(whole.choices[0].logprobs.text_offset);
    let text = "";
    const stream = await client.completions.create(
      { ...base, echo: true, stream: true } as OpenAI.CompletionCreateParamsStreaming,
    );
    for await (const c of stream) text += c.choices[0]?.text ?? "";
    expect(text).toBe(whole.choices[0].text);
  });

  test("max_tokens 0 with echo returns the prompt alone, streamed and not; without echo it is a 400", async () => {
    const body = { model: MODEL, prompt: PROMPT, max_tokens: 0, echo: true, logprobs: 1 };
    const c: Json = await client.completions.create(body as OpenAI.CompletionCreateParamsNonStreaming);
    expect(c.choices[0].text).toBe(PROMPT);
    expect(c.choices[0].logprobs.tokens).toHaveLength(promptIds.length);
    expect(c.choices[0].logprobs.token_logprobs[0]).toBeNull();
    const chunks = await sse(await post("/v1/completions", { ...body, stream: true }));
    expect(chunks.map((x) => x.choices[0].text).join("")).toBe(PROMPT);
    const res = await post("/v1/completions", { ...body, echo: false });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error).toMatchObject({ param: "max_tokens" });
  });
});

describe("skip_special_tokens and spaces_between_special_tokens", () => {
  /** Three forced <|im_start|> tokens (logit_bias), with `extra`. */
  const forced = (extra: Record<string, unknown>): Json => ({
    model: MODEL,
    max_tokens: 3,
    temperature: 0,
    ignore_eos: true,
    logit_bias: { [special]: 100 },
    ...extra,
  });

  test("completions, client and raw SSE: false keeps them in the text; the default drops them", async () => {
    const kept: Json = await client.completions.create(
      forced({ prompt: PROMPT, skip_special_tokens: false }) as OpenAI.CompletionCreateParamsNonStreaming,
    );
    expect(kept.choices[0].text).toBe("<|im_start|>".repeat(3));
    const dropped: Json = await client.completions.create(
      forced({ prompt: PROMPT }) as OpenAI.CompletionCreateParamsNonStreaming,
    );
    expect(dropped.choices[0].text).toBe("");
    const chunks = await sse(
      await post("/v1/completions", forced({ prompt: PROMPT, skip_special_tokens: false, stream: true })),
    );
    expect(chunks.map((c) => c.choices[0].text).join("")).toBe("<|im_start|>".repeat(3));
    // No space between them either way, as vLLM's fast detokenizer gives.
    const unspaced: Json = await (await post(
      "/v1/completions",
      forced({ prompt: PROMPT, skip_special_tokens: false, spaces_between_special_tokens: false }),
    )).json();
    expect(unspaced.choices[0].text).toBe(kept.choices[0].text);
  });

  test("chat, client streamed and raw: false keeps them; include_stop_str_in_output adds a stop token's own text", async () => {
    const messages = [{ role: "user" as const, content: "Hi" }];
    let streamed = "";
    const stream = await client.chat.completions.create(
      forced({ messages, skip_special_tokens: false, stream: true }) as OpenAI.ChatCompletionCreateParamsStreaming,
    );
    for await (const c of stream) streamed += c.choices[0]?.delta?.content ?? "";
    expect(streamed).toBe("<|im_start|>".repeat(3));
    const stopped: Json = await (await post(
      "/v1/chat/completions",
      forced({
        messages,
        skip_special_tokens: false,
        stop_token_ids: [special],
        include_stop_str_in_output: true,
      }),
    )).json();
    expect(stopped.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: special });
    expect(stopped.choices[0].message.content).toBe("<|im_start|>");
  });
});
