// Request schemas and the mapping of their errors to OpenAI error bodies that name field and value.
import { describe, expect, test } from "bun:test";
import { ApiError, formatParamPath, fromZodError, toApiError } from "../../../lib/server/errors.ts";
import { chatCompletionRequestSchema, completionRequestSchema } from "../../../lib/server/schemas.ts";
import { checkContextLength, paramsForChoice, toSamplingParams } from "../../../lib/server/sampling.ts";
import { CapacityError } from "../../../lib/core/errors.ts";

function errorOf(schema: typeof completionRequestSchema | typeof chatCompletionRequestSchema, body: unknown): ApiError {
  const r = schema.safeParse(body, { reportInput: true });
  if (r.success) throw new Error(`expected ${JSON.stringify(body)} to be rejected`);
  return fromZodError(r.error);
}

describe("completion schema", () => {
  test("accepts every prompt form and nulls for unset fields", () => {
    for (const prompt of ["a", ["a", "b"], [1, 2], [[1], [2, 3]]]) {
      expect(completionRequestSchema.safeParse({ prompt, temperature: null, stop: null }).success).toBe(true);
    }
  });

  test("refuses unknown fields by name", () => {
    const e = errorOf(completionRequestSchema, { prompt: "a", whatever: 1 });
    expect(e.param).toBe("whatever");
    expect(e.message).toContain("Unknown field 'whatever'");
    expect(errorOf(chatCompletionRequestSchema, { messages: [{ role: "user", content: "a", x: 1 }] }).param)
      .toBe("messages[0].x");
  });

  test("vLLM's wording where vLLM has one; the stop limit is stated", () => {
    expect(errorOf(completionRequestSchema, { prompt: "a", suffix: "s" }).message).toContain(
      "suffix is not currently supported",
    );
    const stops = errorOf(completionRequestSchema, {
      prompt: "a",
      stop: Array.from({ length: 65 }, (_, i) => `s${i}`),
    });
    expect(stops.param).toBe("stop");
    expect(stops.message).toContain("at most 64 strings, got 65");
    expect(errorOf(completionRequestSchema, { prompt: "a", stream_options: { include_usage: true } }).message)
      .toContain("Stream options can only be defined when `stream=True`.");
    expect(
      errorOf(completionRequestSchema, { prompt: "a", stream: true, stream_options: { continuous_usage_stats: true } })
        .param,
    ).toBe("stream_options.continuous_usage_stats");
    // No zod-internal names anywhere in a body.
    for (const body of [{ prompt: "a", n: 0 }, { prompt: 5 }, { prompt: "a", min_p: 1.5 }]) {
      const b = errorOf(completionRequestSchema, body).body();
      expect(b.error.code).toBe(400);
      expect(JSON.stringify(b)).not.toMatch(/too_small|invalid_union|custom|invalid_type/);
    }
  });

  test("errors name the field and the value", () => {
    const e = errorOf(completionRequestSchema, { prompt: "a", top_p: 1.5 });
    expect(e.status).toBe(400);
    expect(e.param).toBe("top_p");
    expect(e.message).toContain("1.5");
    expect(e.body().error).toMatchObject({ type: "BadRequestError", code: 400 });
    expect(errorOf(completionRequestSchema, { prompt: "a", n: 1.5 }).message).toContain("got 1.5");
    expect(errorOf(completionRequestSchema, { prompt: [1, "a"] }).message).toContain("list of token ids");
    expect(errorOf(completionRequestSchema, { prompt: "a", stop: [1] }).param).toBe("stop");
    expect(errorOf(completionRequestSchema, {}).message).toBe("Missing required parameter 'prompt'");
    expect(errorOf(completionRequestSchema, { prompt: "a", seed: -1 }).param).toBe("seed");
  });
});

describe("chat schema", () => {
  test("message paths are named like messages[1].role", () => {
    const e = errorOf(chatCompletionRequestSchema, {
      messages: [{ role: "user", content: "a" }, { role: "robot", content: "b" }],
    });
    expect(e.param).toBe("messages[1].role");
    expect(e.message).toContain('"robot"');
    expect(errorOf(chatCompletionRequestSchema, { messages: [] }).param).toBe("messages");
    const badTool = errorOf(chatCompletionRequestSchema, { messages: [{ role: "user", content: "a" }], tools: [{}] });
    expect(badTool.param).toBe("tools[0].type");
    expect(formatParamPath(["a", 0, "b"])).toBe("a[0].b");
  });
});

/** A vocabulary of 100 ids whose tokenizer spells each character as its code. */
const VOCABULARY = { tokenizer: { encode: (t: string) => [...t].map((c) => c.charCodeAt(0) % 100) }, vocabSize: 100 };

describe("sampling and limits", () => {
  test("maps fields and snake_cases resolveSamplingParams errors", () => {
    const p = toSamplingParams(
      { temperature: 0.5, top_k: 3, stop: "x", stop_token_ids: [9], ignore_eos: true, min_tokens: 1 },
      8,
      0,
      VOCABULARY,
    );
    expect(p).toMatchObject({
      temperature: 0.5,
      topK: 3,
      stop: ["x"],
      stopTokenIds: [9],
      ignoreEos: true,
      minTokens: 1,
      maxTokens: 8,
      logprobs: true,
    });
    let err: unknown;
    try {
      toSamplingParams({ min_tokens: 5 }, 2, false, VOCABULARY);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).param).toBe("min_tokens");
    expect((err as ApiError).message).toBe("min_tokens (5) must not exceed max_tokens (2)");
  });

  test("seeds step per choice; unseeded choices stay unseeded", () => {
    const p = toSamplingParams({ seed: 4 }, 1, false, VOCABULARY);
    expect(paramsForChoice(p, 2).seed).toBe(6);
    expect(paramsForChoice(toSamplingParams({}, 1, false, VOCABULARY), 2).seed).toBeUndefined();
  });

  test("context length check names both numbers", () => {
    expect(() => checkContextLength(10, 6, 16, "prompt")).not.toThrow();
    expect(() => checkContextLength(10, 7, 16, "prompt")).toThrow(
      /16 tokens.*17 tokens \(10 in the prompt, 7 in the completion\)/,
    );
    expect(() => checkContextLength(16, 1, 16, "messages")).toThrow(/16 input tokens/);
  });

  test("engine errors map to statuses", () => {
    expect(toApiError(new CapacityError("too big")).status).toBe(400);
    expect(toApiError(new Error("boom")).status).toBe(500);
    expect(toApiError(new TypeError("bug")).status).toBe(500);
  });
});
