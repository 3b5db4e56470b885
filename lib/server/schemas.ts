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
import { MAX_TOP_LOGPROBS } from "../core/sampling_params.ts";
import { FLOAT32_MAX, float32In, int32In, isFloat32In } from "./number_schemas.ts";
import { responseFormatSchema, structuredOutputsSchema } from "./structured_outputs.ts";

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

/** `logit_bias`: token id (a JSON key) -> bias; vLLM clamps each bias to [-100, 100]. */
const logitBiasSchema = z.record(z.string(), z.number()).superRefine((bias, ctx) => {
  const bad = Object.keys(bias).filter((k) => !/^\d+$/.test(k.trim()) || Number(k) > 2 ** 31 - 1);
  if (bad.length > 0) {
    ctx.addIssue({
      code: "custom",
      message: `logit_bias contains key(s) that cannot be converted to integer token IDs: ${JSON.stringify(bad)}`,
      input: bad,
    });
  }
  for (const [id, v] of Object.entries(bias)) {
    if (!isFloat32In(v, { min: -FLOAT32_MAX, max: FLOAT32_MAX })) {
      ctx.addIssue({ code: "custom", message: `logit_bias[${id}] must be a finite float32, got ${v}`, input: v });
    }
  }
}).nullish();

/** The sampling controls both endpoints have (penalties, min_p, logit bias, allowed and bad tokens). */
const samplingControlFields = {
  presence_penalty: float32In({ min: -2, max: 2 }).nullish(),
  frequency_penalty: float32In({ min: -2, max: 2 }).nullish(),
  repetition_penalty: float32In({ min: 0, minExclusive: true }).nullish(),
  min_p: float32In({ min: 0, max: 1 }).nullish(),
  logit_bias: logitBiasSchema,
  allowed_token_ids: z.array(tokenId).nullish(),
  bad_words: z.array(z.string()).nullish(),
};

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
  skip_special_tokens: z.boolean().nullish(),
  spaces_between_special_tokens: z.boolean().nullish(),
  /** Checked against the stream flag and vLLM's limits by the routes (prompt_logprobs.ts). */
  prompt_logprobs: int32In().nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptionsSchema.nullish(),
  user: z.string().nullish(),
  session_id: z.string().min(1).nullish(),
  request_id: z.string().min(1).max(256).nullish(),
  cache_salt: z.string().min(1).max(1024).nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  response_format: responseFormatSchema,
  structured_outputs: structuredOutputsSchema,
  ...samplingControlFields,
};

/** Fields both endpoints have that LMPool refuses unless they ask for nothing. */
const refusedFields = {
  use_beam_search: refused("use_beam_search", "false", (v) => v === false),
  watermarking: refused("watermarking", "false", (v) => v === false),
  length_penalty: refused("length_penalty", "1", (v) => v === 1),
  logprob_token_ids: refused("logprob_token_ids", "null"),
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
  /** 0 only with echo (the prompt alone, as vLLM); the route checks that. */
  max_tokens: int32In(0).nullish(),
  /** The chosen token's logprob and the `logprobs` most likely alternatives per position. */
  logprobs: int32In(0, MAX_TOP_LOGPROBS).nullish(),
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

/** A tool call of an assistant message, as OpenAI clients send it back (arguments: a JSON text). */
const messageToolCallSchema = z.strictObject({
  id: z.string(),
  type: z.literal("function"),
  function: z.strictObject({ name: z.string().min(1), arguments: z.string() }),
});

/** One chat message; `developer` is read as `system`. */
const chatMessageSchema = z.strictObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: messageContentSchema.nullish(),
  name: refused("name", "null"),
  tool_calls: z.array(messageToolCallSchema).nullish(),
  tool_call_id: z.string().nullish(),
  reasoning: refused("reasoning", "null"),
  reasoning_content: refused("reasoning_content", "null"),
}).refine((m) => m.tool_calls == null || m.tool_calls.length === 0 || m.role === "assistant", {
  error: "tool_calls belong to assistant messages only",
  path: ["tool_calls"],
});

/** A tool the model may call (vLLM's ChatCompletionToolsParam with its FunctionDefinition). */
const toolSchema = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});

/** One tool definition of a request. */
export type ToolDefinition = z.infer<typeof toolSchema>;

/** `tools`: a non-empty list (vLLM refuses an empty one, as OpenAI does). */
const toolsSchema = z.array(toolSchema).refine((t) => t.length > 0, {
  error: "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.",
}).nullish();

/** `tool_choice`: "none", "auto", "required" or a named function (which request fields decide, see checkToolChoice). */
const toolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: z.string().min(1) }) }),
], {
  error: (issue) =>
    `Invalid value for \`tool_choice\`: ${
      JSON.stringify(issue.input)
    }! Only named tools ({"type": "function", "function": {"name": "my_function"}}), "none", "auto" or "required" are supported.`,
}).nullish();

/** Template variables the server sets from the request itself: a request sets them through their fields. */
const RESERVED_TEMPLATE_VARIABLES = [
  "messages",
  "tools",
  "documents",
  "add_generation_prompt",
  "continue_final_message",
  "bos_token",
  "eos_token",
  "chat_template",
  "reasoning_effort",
];

/** `chat_template_kwargs`: extra template variables (e.g. enable_thinking), none the server sets itself. */
const chatTemplateKwargsSchema = z.record(z.string(), z.unknown()).superRefine((kwargs, ctx) => {
  for (const key of Object.keys(kwargs)) {
    if (RESERVED_TEMPLATE_VARIABLES.includes(key)) {
      ctx.addIssue({
        code: "custom",
        path: [key],
        message: `chat_template_kwargs.${key} cannot be set: the server sets this template variable${
          key === "chat_template" || key === "reasoning_effort" ? "" : " from the request field of that name"
        }`,
        input: kwargs[key],
      });
    }
  }
}).nullish();

/** vLLM's checks across tools, tool_choice, add_generation_prompt and continue_final_message. */
function checkChatFields(
  body: {
    tools?: ToolDefinition[] | null;
    tool_choice?: z.infer<typeof toolChoiceSchema>;
    add_generation_prompt?: boolean | null;
    continue_final_message?: boolean | null;
  },
  ctx: z.RefinementCtx,
): void {
  const choice = body.tool_choice;
  if (choice != null && choice !== "none" && body.tools == null) {
    ctx.addIssue({
      code: "custom",
      path: ["tool_choice"],
      message: "When using `tool_choice`, `tools` must be set.",
      input: choice,
    });
  } else if (typeof choice === "object" && choice !== null && body.tools != null) {
    if (!body.tools.some((t) => t.function.name === choice.function.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["tool_choice"],
        message: "The tool specified in `tool_choice` does not match any of the specified `tools`",
        input: choice,
      });
    }
  }
  // add_generation_prompt defaults to true: continuing the final message needs it false.
  if (body.continue_final_message === true && (body.add_generation_prompt ?? true)) {
    ctx.addIssue({
      code: "custom",
      path: ["continue_final_message"],
      message:
        "Cannot set both `continue_final_message` and `add_generation_prompt` to True (add_generation_prompt defaults to true: send it as false).",
      input: true,
    });
  }
}

/** A parsed chat message. */
export type ChatMessageInput = z.infer<typeof chatMessageSchema>;

/** POST /v1/chat/completions body. */
export const chatCompletionRequestSchema = z.strictObject({
  ...honouredFields,
  ...refusedFields,
  messages: z.array(chatMessageSchema).min(1),
  max_completion_tokens: int32In(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: int32In(0, MAX_TOP_LOGPROBS).nullish(),
  echo: z.boolean().nullish(),
  add_generation_prompt: z.boolean().nullish(),
  continue_final_message: z.boolean().nullish(),
  tools: toolsSchema,
  tool_choice: toolChoiceSchema,
  parallel_tool_calls: z.boolean().nullish(),
  reasoning_effort: refused("reasoning_effort", "null"),
  include_reasoning: z.boolean().nullish(),
  documents: refused("documents", "null"),
  chat_template: refused("chat_template", "null"),
  chat_template_kwargs: chatTemplateKwargsSchema,
  media_io_kwargs: refused("media_io_kwargs", "null"),
  mm_processor_kwargs: refused("mm_processor_kwargs", "null"),
  return_prompt_text: refused("return_prompt_text", "false", (v) => v === false),
}).superRefine((body, ctx) => {
  checkCommon(body, ctx);
  checkChatFields(body, ctx);
});

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
    continue_final_message: z.boolean().nullish(),
    chat_template: refused("chat_template", "null"),
    chat_template_kwargs: chatTemplateKwargsSchema,
    mm_processor_kwargs: refused("mm_processor_kwargs", "null"),
    tools: toolsSchema,
  })
  .refine((b) => (b.prompt === undefined) !== (b.messages === undefined), {
    error: "exactly one of prompt or messages is required",
    path: ["prompt"],
  })
  .superRefine((body, ctx) => checkChatFields(body, ctx));

/** POST /detokenize body (vLLM's shape). */
export const detokenizeRequestSchema = z.strictObject({
  model: z.string().nullish(),
  tokens: z.array(tokenId),
});
