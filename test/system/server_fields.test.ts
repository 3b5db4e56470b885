// Request fields against the real server process (CPU backend, tiny random-weight Qwen3 model with
// the real tokenizer), through the official `openai` client and raw HTTP: min_tokens with a stop
// token (text, logprobs, usage and finish agree), stop_reason and include_stop_str_in_output,
// continuous usage, refused and unknown fields, X-Request-Id and GET /v1/models/{id}.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { type ServerProcess, startTinyServer, stopServerProcess } from "./server_process.ts";

const MODEL = "tiny-test";
const PROMPT = "Once upon a time in a small village";

let server: ServerProcess;
let client: OpenAI;

// deno-lint-ignore no-explicit-any
type Json = any;

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

/** The fields the client does not type, sent as they are. */
type Extra = Record<string, unknown>;

/** A seeded completion (reproducible) with the chosen tokens' ids (logprobs 0 with tokens as ids). */
async function greedyIds(extra: Extra = {}): Promise<{ c: OpenAI.Completion; ids: number[] }> {
  const c = await client.completions.create({
    model: MODEL,
    prompt: PROMPT,
    max_tokens: 10,
    temperature: 1,
    seed: 42,
    logprobs: 0,
    return_tokens_as_token_ids: true,
    ...extra,
  } as OpenAI.CompletionCreateParamsNonStreaming);
  const ids = c.choices[0]!.logprobs!.tokens!.map((t) => Number(t.slice("token_id:".length)));
  return { c, ids };
}

async function detokenize(tokens: number[]): Promise<string> {
  return ((await (await post("/detokenize", { tokens })).json()) as Json).prompt;
}

let ref: number[];
/** An output position k >= 2 whose token does not occur before it. */
let k: number;

beforeAll(async () => {
  server = await startTinyServer(["--served-model-name", MODEL, "--max-model-len", "256"]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
  ref = (await greedyIds({ ignore_eos: true })).ids;
  k = ref.findIndex((t, i) => i >= 2 && i < 7 && !ref.slice(0, i).includes(t));
  if (k < 0) throw new Error(`no fresh token among ${ref}`);
});

afterAll(() => stopServerProcess(server));

describe("min_tokens with stop_token_ids", () => {
  test("a stop token before min_tokens is banned from sampling, as vLLM does; text, logprobs and usage agree", async () => {
    const stop = ref[k]!;
    // min_tokens k + 1: the stop token, greedy's token k, may not be sampled there; the next best is.
    const { c, ids } = await greedyIds({ ignore_eos: true, min_tokens: k + 1, stop_token_ids: [stop] });
    const choice = c.choices[0]! as OpenAI.CompletionChoice & { stop_reason: unknown };
    expect(ids.slice(0, k)).toEqual(ref.slice(0, k));
    expect(ids[k]).not.toBe(stop);
    expect(ids.length).toBeGreaterThanOrEqual(k + 1);
    expect(c.usage!.completion_tokens).toBe(ids.length);
    expect(choice.logprobs!.token_logprobs).toHaveLength(ids.length);
    if (ids[ids.length - 1] === stop) {
      expect(choice.finish_reason).toBe("stop");
      expect(choice.stop_reason).toBe(stop);
      expect(choice.text).toBe(await detokenize(ids.slice(0, -1)));
    } else {
      expect(choice.finish_reason).toBe("length");
      expect(choice.text).toBe(await detokenize(ids));
    }
    // One token earlier, the stop token ends it: k tokens of text.
    const early = await greedyIds({ ignore_eos: true, min_tokens: k, stop_token_ids: [stop] });
    expect(early.ids).toEqual(ref.slice(0, k + 1));
    expect(early.c.choices[0]!.text).toBe(await detokenize(ref.slice(0, k)));
  });
});

describe("stop_reason, include_stop_str_in_output", () => {
  test("the stop token's text ends the text with include_stop_str_in_output; stop_reason names it", async () => {
    const stop = ref[k]!;
    const c: Json = await (await post("/v1/completions", {
      model: MODEL,
      prompt: PROMPT,
      max_tokens: 10,
      temperature: 1,
      seed: 42,
      ignore_eos: true,
      stop_token_ids: [stop],
      include_stop_str_in_output: true,
    })).json();
    expect(c.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: stop });
    expect(c.choices[0].text).toBe(await detokenize(ref.slice(0, k + 1)));
  });

  test("a stop string: stop_reason is the string, streamed through the client too", async () => {
    // The first output position whose two characters of text occur nowhere earlier.
    const full = await detokenize(ref);
    let before = "";
    let stop = "";
    for (let j = 1; j < ref.length - 1 && stop === ""; j++) {
      before = await detokenize(ref.slice(0, j));
      const s = full.slice(before.length, before.length + 2);
      if (s.length === 2 && full.indexOf(s) === before.length) stop = s;
    }
    expect(stop).toHaveLength(2);
    const stream = await client.completions.create({
      model: MODEL,
      prompt: PROMPT,
      max_tokens: 10,
      temperature: 1,
      seed: 42,
      ignore_eos: true,
      stop: [stop],
      include_stop_str_in_output: true,
      stream: true,
    } as OpenAI.CompletionCreateParamsStreaming);
    let text = "";
    let last: Json;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? "";
      last = chunk;
    }
    expect(text).toBe(full.slice(0, before.length + stop.length));
    expect(last.choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: stop });
  });
});

describe("streaming usage", () => {
  test("continuous_usage_stats: every chunk through the client carries the usage so far", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 5,
      temperature: 1,
      seed: 42,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const usages: number[] = [];
    for await (const chunk of stream) usages.push(chunk.usage!.completion_tokens);
    expect(usages[0]).toBe(0);
    expect(usages.at(-1)).toBe(5);
    expect(usages).toEqual([...usages].sort((a, b) => a - b));
  });
});

describe("refused and unknown fields", () => {
  test("the client gets a BadRequestError naming the field, in vLLM's error shape", async () => {
    for (
      const extra of [{ use_beam_search: true }, { reasoning_effort: "low" }, {
        documents: [{ title: "t", text: "x" }],
      }]
    ) {
      const field = Object.keys(extra)[0]!;
      let err: unknown;
      try {
        await client.chat.completions.create({
          model: MODEL,
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 2,
          logprobs: true,
          ...extra,
        } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      const e = err as InstanceType<typeof OpenAI.BadRequestError>;
      expect(e.param).toBe(field);
      expect(e.type).toBe("BadRequestError");
      expect(e.message).toContain(field);
    }
  });

  test("raw HTTP: an unknown field and a refused one, each a 400 naming it", async () => {
    for (const [extra, param] of [[{ guided_json: { type: "object" } }, "guided_json"], [{ suffix: "x" }, "suffix"]]) {
      const res = await post("/v1/completions", { model: MODEL, prompt: "a", max_tokens: 1, ...(extra as Extra) });
      expect(res.status).toBe(400);
      const body: Json = await res.json();
      expect(body.error).toMatchObject({ type: "BadRequestError", code: 400, param });
    }
  });
});

describe("ids and routes", () => {
  test("X-Request-Id is echoed and names the response; /v1/models/{id} through the client", async () => {
    const res = await post("/v1/completions", { model: MODEL, prompt: "a", max_tokens: 1 }, {
      "x-request-id": "req-7",
    });
    expect(res.headers.get("x-request-id")).toBe("req-7");
    expect(((await res.json()) as Json).id).toBe("cmpl-req-7");
    const card = await client.models.retrieve(MODEL);
    expect(card.id).toBe(MODEL);
    const missing = await client.models.retrieve("other").then(() => null, (e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
  });
});
