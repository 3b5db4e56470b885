/**
 * Request fields -> the engine's SamplingParams, plus the context-length check. Everything here
 * throws 400 ApiErrors naming the OpenAI field, so no invalid request reaches the engine.
 * @module
 */
import { resolveSamplingParams, type SamplingParams } from "../core/sampling_params.ts";
import { badRequest } from "./errors.ts";

/** The sampling fields both completion routes share (already type-checked by zod). */
export interface SamplingFields {
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  stop_token_ids?: number[] | null;
  ignore_eos?: boolean | null;
  min_tokens?: number | null;
}

// resolveSamplingParams names camelCase fields; clients know the snake_case ones.
const FIELD_NAMES: Record<string, string> = {
  maxTokens: "max_tokens",
  minTokens: "min_tokens",
  topK: "top_k",
  topP: "top_p",
  stopTokenIds: "stop_token_ids",
  temperature: "temperature",
  seed: "seed",
  stop: "stop",
};

/** Builds and checks SamplingParams; `maxTokens` and `logprobs` are resolved by the route. */
export function toSamplingParams(body: SamplingFields, maxTokens: number, logprobs: boolean): SamplingParams {
  const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
  const partial: Partial<SamplingParams> = {
    maxTokens,
    logprobs,
    stop: stop.filter((s) => s.length > 0),
    stopTokenIds: body.stop_token_ids ?? [],
    ignoreEos: body.ignore_eos ?? false,
    minTokens: body.min_tokens ?? 0,
  };
  if (body.temperature != null) partial.temperature = body.temperature;
  if (body.top_p != null) partial.topP = body.top_p;
  if (body.top_k != null) partial.topK = body.top_k;
  if (body.seed != null) partial.seed = body.seed;
  try {
    return resolveSamplingParams(partial);
  } catch (err) {
    if (!(err instanceof RangeError || err instanceof TypeError)) throw err;
    const field = Object.keys(FIELD_NAMES).find((k) => err.message.startsWith(k));
    const param = field ? FIELD_NAMES[field]! : null;
    const message = field ? param + err.message.slice(field.length) : err.message;
    throw badRequest(message.replace(/\bmaxTokens\b/g, "max_tokens").replace(/\bminTokens\b/g, "min_tokens"), param);
  }
}

/** The params of choice `index` of n: seeds step by one so seeded choices differ but stay reproducible. */
export function paramsForChoice(params: SamplingParams, index: number): SamplingParams {
  return params.seed === undefined ? params : { ...params, seed: params.seed + index };
}

/** Rejects a request whose prompt plus completion cannot fit the model's context. */
export function checkContextLength(
  promptTokens: number,
  maxTokens: number,
  maxModelLen: number,
  promptParam: string,
): void {
  if (promptTokens >= maxModelLen) {
    throw badRequest(
      `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptTokens} input tokens. Please reduce the length of the input.`,
      promptParam,
    );
  }
  if (promptTokens + maxTokens > maxModelLen) {
    throw badRequest(
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${
        promptTokens + maxTokens
      } tokens ` +
        `(${promptTokens} in the ${
          promptParam === "messages" ? "messages" : "prompt"
        }, ${maxTokens} in the completion). ` +
        "Please reduce the length of the input or completion.",
      "max_tokens",
    );
  }
}
