/**
 * Zod schemas of the request bodies the server accepts: completions, chat completions, tokenize and
 * detokenize, with vLLM's field names. Every field is honoured or refused: an unknown field is a
 * 400 naming it (vLLM ignores those with a warning), and a field vLLM has that LMPool does not
 * implement accepts only the value that means "off" (request_fields.ts lists which). Known fields
 * with wrong types or out-of-range values are rejected before anything reaches the engine; numbers
 * are checked as the engine reads them (finite float32, int32) within their documented ranges.
 * `null` is accepted wherever a field is optional, since many clients send it for "unset".
 * @module
 */
import { z } from "zod";
import { float32In, int32In } from "./number_schemas.ts";

const tokenId = int32In(0);

/** Most choices per prompt (`n`). */
const MAX_CHOICES = 128;

/** Most stop strings per request. */
export const MAX_STOP_STRINGS = 64;

/**
 * Largest seed: choice j of n samples with seed + j, which must stay a safe integer (what the
 * engine accepts; the native sampler takes it as a uint64).
 */
export const MAX_SEED = Number.MAX_SAFE_INTEGER - (MAX_CHOICES - 1);

/**
 * A field LMPool does not implement (yet): absent, null and the values `isOff` accepts (those that
 * ask for nothing) pass; anything else is a 400 naming the field and what is accepted.
 */
function refused(name: string, accepted: string, isOff: (v: unknown) => boolean = () => false) {
  return z.unknown().refine((v) => v == null || isOff(v), {
    error: `'${name}' is not supported yet by LMPool (it accepts only ${accepted})`,
    abort: true,
  }).optional();
}

const isEmptyObject = (v: unknown) =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;
const isEmptyList = (v: unknown) => Array.isArray(v) && v.length === 0;
const isTextFormat = (v: unknown) =>
  typeof v === "object" && v !== null && (v as { type?: unknown }).type === "text" && Object.keys(v).length === 1;

const stopSchema = z
  .union([z.string(), z.array(z.string()).max(MAX_STOP_STRINGS)], {
    error: (issue) =>
      Array.isArray(issue.input) && issue.input.length > MAX_STOP_STRINGS
        ? `stop holds at most ${MAX_STOP_STRINGS} strings, got ${issue.input.length}`
        : "stop must be a string or a list of strings",
  })
  .nullish();

const streamOptionsSchema = z.strictObject({
  include_usage: z.boolean().nullish(),
  continuous_usage_stats: z.boolean().nullish(),
});

/** Fields both endpoints have, honoured as vLLM honours them (or as request_fields.ts says they differ). */
const honouredFields = {
  model: z.string().nullish(),
  max_tokens: int32In(1).nullish(),
  temperature: float32In({ min: 0 }).nullish(),
  top_p: float32In({ min: 0, minExclusive: true, max: 1 }).nullish(),
  top_k: int32In(-1).nullish(),
  n: int32In(1, MAX_CHOICES).nullish(),
  seed: z.int().min(0).max(MAX_SEED, { error: `must be an integer in [0, ${MAX_SEED}]` }).nullish(),
  stop: stopSchema,
  stop_token_ids: z.array(tokenId).nullish(),
  ignore_eos: z.boolean().nullish(),
  min_tokens: int32In(0).nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  truncate_prompt_tokens: int32In(-1).nullish(),
  truncation_side: z.enum(["left", "right"]).nullish(),
  add_special_tokens: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptionsSchema.nullish(),
  user: z.string().nullish(),
  session_id: z.string().min(1).nullish(),
  request_id: z.string().min(1).max(256).nullish(),
  cache_salt: z.string().min(1).max(1024).nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
};

/** Fields both endpoints have that LMPool refuses unless they ask for nothing. */
const refusedFields = {
  presence_penalty: refused("presence_penalty", "0", (v) => v === 0),
  frequency_penalty: refused("frequency_penalty", "0", (v) => v === 0),
  repetition_penalty: refused("repetition_penalty", "1", (v) => v === 1),
  min_p: refused("min_p", "0", (v) => v === 0),
  logit_bias: refused("logit_bias", "{}", isEmptyObject),
  use_beam_search: refused("use_beam_search", "false", (v) => v === false),
  watermarking: refused("watermarking", "false", (v) => v === false),
  length_penalty: refused("length_penalty", "1", (v) => v === 1),
  skip_special_tokens: refused("skip_special_tokens", "true", (v) => v === true),
  spaces_between_special_tokens: refused("spaces_between_special_tokens", "true", (v) => v === true),
  allowed_token_ids: refused("allowed_token_ids", "null"),
  prompt_logprobs: refused("prompt_logprobs", "null"),
  logprob_token_ids: refused("logprob_token_ids", "null"),
  bad_words: refused("bad_words", "[]", isEmptyList),
  response_format: refused("response_format", '{"type": "text"}', isTextFormat),
  structured_outputs: refused("structured_outputs", "null"),
  priority: refused("priority", "0", (v) => v === 0),
  return_token_ids: refused("return_token_ids", "false", (v) => v === false),
  routed_experts_prompt_start: refused("routed_experts_prompt_start", "0", (v) => v === 0),
  return_token_offsets: refused("return_token_offsets", "false", (v) => v === false),
  return_mm_kwargs: refused("return_mm_kwargs", "true", (v) => v === true),
  kv_transfer_params: refused("kv_transfer_params", "null"),
  ec_transfer_params: refused("ec_transfer_params", "null"),
  vllm_xargs: refused("vllm_xargs", "null"),
  repetition_detection: refused("repetition_detection", "null"),
  thinking_token_budget: refused("thinking_token_budget", "-1", (v) => v === -1),
  stream_interval: refused("stream_interval", "1", (v) => v === 1),
};

/** A prompt: text, a list of texts, token ids, or a list of token-id lists. */
const promptSchema = z.union(
  [z.string(), z.array(z.string()).min(1), z.array(tokenId).min(1), z.array(z.array(tokenId).min(1)).min(1)],
  { error: "prompt must be a string, a list of strings, a list of token ids, or a list of token-id lists" },
);

/** Checks vLLM makes across fields of both endpoints. */
function checkCommon(
  body: { stream?: boolean | null; stream_options?: z.infer<typeof streamOptionsSchema> | null },
  ctx: z.RefinementCtx,
): void {
  const options = body.stream_options;
  if (options != null && body.stream !== true) {
    ctx.addIssue({
      code: "custom",
      path: ["stream_options"],
      message: "Stream options can only be defined when `stream=True`.",
      input: options,
    });
  } else if (options?.continuous_usage_stats === true && options.include_usage !== true) {
    // vLLM ignores it then; a field that does nothing is refused here.
    ctx.addIssue({
      code: "custom",
      path: ["stream_options", "continuous_usage_stats"],
      message: "continuous_usage_stats needs include_usage: true (usage on every chunk is a refinement of it)",
      input: true,
    });
  }
}

/** POST /v1/completions body. */
export const completionRequestSchema = z.strictObject({
  ...honouredFields,
  ...refusedFields,
  prompt: promptSchema,
  /** 0: the chosen token's logprob; top alternatives are not computed yet. */
  logprobs: int32In(0, 20).refine((v) => v === 0, {
    error:
      "top logprobs (logprobs > 0) are not supported yet by LMPool; logprobs: 0 returns the chosen token's logprob",
  }).nullish(),
  echo: z.boolean().nullish(),
  suffix: z.unknown().refine((v) => v == null, { error: "suffix is not currently supported" }).optional(),
  best_of: refused("best_of", "1", (v) => v === 1),
  prompt_embeds: refused("prompt_embeds", "null"),
}).superRefine(checkCommon);

/** The parsed body of POST /v1/completions. */
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

const textPartSchema = z.strictObject({ type: z.literal("text"), text: z.string() });

const messageContentSchema = z.union([z.string(), z.array(textPartSchema)], {
  error:
    'content must be a string or a list of text parts ({"type": "text", "text": ...}); other parts are not supported',
});

/** One chat message; `developer` is read as `system`. */
const chatMessageSchema = z.strictObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: messageContentSchema.nullish(),
  name: refused("name", "null"),
  tool_calls: refused("tool_calls", "null or []", isEmptyList),
  tool_call_id: refused("tool_call_id", "null"),
  reasoning: refused("reasoning", "null"),
  reasoning_content: refused("reasoning_content", "null"),
});

/** A parsed chat message. */
export type ChatMessageInput = z.infer<typeof chatMessageSchema>;

/** POST /v1/chat/completions body. */
export const chatCompletionRequestSchema = z.strictObject({
  ...honouredFields,
  ...refusedFields,
  messages: z.array(chatMessageSchema).min(1),
  max_completion_tokens: int32In(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: refused("top_logprobs", "0", (v) => v === 0),
  echo: z.boolean().nullish(),
  add_generation_prompt: z.boolean().nullish(),
  continue_final_message: refused("continue_final_message", "false", (v) => v === false),
  tools: refused("tools", "null"),
  tool_choice: z.unknown().refine((v) => v == null || v === "none", {
    error: 'When using `tool_choice`, `tools` must be set (LMPool accepts only "none" until tools are supported).',
  }).optional(),
  parallel_tool_calls: z.boolean().nullish(),
  reasoning_effort: refused("reasoning_effort", "null"),
  include_reasoning: refused("include_reasoning", "true", (v) => v === true),
  documents: refused("documents", "null"),
  chat_template: refused("chat_template", "null"),
  chat_template_kwargs: refused("chat_template_kwargs", "null or {}", isEmptyObject),
  media_io_kwargs: refused("media_io_kwargs", "null"),
  mm_processor_kwargs: refused("mm_processor_kwargs", "null"),
  return_prompt_text: refused("return_prompt_text", "false", (v) => v === false),
}).superRefine(checkCommon);

/** The parsed body of POST /v1/chat/completions. */
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;

/** POST /tokenize body (vLLM's shape): either `prompt` or `messages`. */
export const tokenizeRequestSchema = z
  .strictObject({
    model: z.string().nullish(),
    prompt: z.string().optional(),
    messages: z.array(chatMessageSchema).min(1).optional(),
    add_special_tokens: z.boolean().nullish(),
    add_generation_prompt: z.boolean().nullish(),
    return_token_strs: refused("return_token_strs", "false", (v) => v === false),
    continue_final_message: refused("continue_final_message", "false", (v) => v === false),
    chat_template: refused("chat_template", "null"),
    chat_template_kwargs: refused("chat_template_kwargs", "null or {}", isEmptyObject),
    mm_processor_kwargs: refused("mm_processor_kwargs", "null"),
    tools: refused("tools", "null"),
  })
  .refine((b) => (b.prompt === undefined) !== (b.messages === undefined), {
    error: "exactly one of prompt or messages is required",
    path: ["prompt"],
  });

/** POST /detokenize body (vLLM's shape). */
export const detokenizeRequestSchema = z.strictObject({
  model: z.string().nullish(),
  tokens: z.array(tokenId),
});
