/**
 * POST /v1/chat/completions: messages rendered with the model's chat template (with the request's
 * tools and chat_template_kwargs), non-streaming and SSE (`chat.completion.chunk`), n choices; the
 * reply's reasoning and tool calls taken out by the server's parsers (reply_parsing.ts), or, with
 * tool_choice "required" or a named function, the reply held to the tools' schema and turned into
 * calls (forced_tool_choice.ts).
 * @module
 */
import { type ChoiceEnding, choiceEnding, type EndingContext, endingContext } from "./choice_endings.ts";
import { chatRenderOptionsOf } from "./chat_render_options.ts";
import { type ChoiceRun, collectChoices, mergeChoices, openAIFinishReason, usageOf } from "./choices.ts";
import {
  checkModel,
  newResponseId,
  parseJsonBody,
  promptContext,
  responseIdOf,
  type ServerContext,
  unixSeconds,
} from "./context.ts";
import type { RequestScope } from "./lifecycle.ts";
import type { TopLogprob } from "../core/outputs.ts";
import { chatLogprobs } from "./logprobs.ts";
import { type ChunkEnvelope, chunkEnvelope, startRequestChoices } from "./openai_choices.ts";
import { chatPrompt, messageContentText, promptTruncationOf, type TokenizedPrompt } from "./prompts.ts";
import {
  type ParsedReply,
  parseReply,
  type ReplyDelta,
  type ReplyParsing,
  replyParsingOf,
  StreamingReplyParser,
} from "./reply_parsing.ts";
import { checkContextLength, toSamplingParams } from "./sampling.ts";
import { checkStructuredOutput, grammarSpecOf, type StructuredOutputField } from "./structured_outputs.ts";
import { forcedToolSpec } from "./forced_tool_choice.ts";
import type { GrammarSpec } from "../core/grammar_spec.ts";
import { type ChatCompletionRequest, chatCompletionRequestSchema } from "./schemas.ts";
import { sseResponse } from "./sse.ts";
import { badRequest } from "./errors.ts";
import { orderedJsonResponse } from "./ordered_json.ts";
import { promptLogprobsJson, promptLogprobsOf } from "./prompt_logprobs.ts";

interface Prepared {
  body: ChatCompletionRequest;
  prompt: TokenizedPrompt;
  runs: ChoiceRun[];
  id: string;
  created: number;
  ending: EndingContext;
  /** The role of the reply. */
  role: string;
  /** echo: the last message's content, which the reply continues (else ""). */
  echo: string;
  /** Tokens streamed so far (the usage of a stream that ends early). */
  completionTokens: number;
  /** How replies are parsed (reasoning, tool calls). */
  parsing: ReplyParsing;
  /** prompt_logprobs' k (never in a stream, which does not show them). */
  promptK: number | undefined;
}

/** The usage chunk of a stream that ends now (undefined unless the client asked for usage). */
function usageSoFar(p: Prepared, envelope: ChunkEnvelope): unknown {
  return envelope.includeUsage ? envelope.usage(usageOf([p.prompt], p.completionTokens)) : undefined;
}

/**
 * The reply's role and, with echo, the text it starts with: as in vLLM, the role is "assistant"
 * with a generation prompt (else the last message's), and echo repeats the last message's content
 * when that message has the reply's role.
 */
function replyRoleAndEcho(body: ChatCompletionRequest, addGenerationPrompt: boolean): { role: string; echo: string } {
  const last = body.messages.at(-1)!;
  const role = addGenerationPrompt ? "assistant" : last.role;
  const echo = body.echo === true && last.role === role ? messageContentText(last) : "";
  return { role, echo };
}

/** Handles POST /v1/chat/completions. */
export async function handleChatCompletions(req: Request, ctx: ServerContext, scope: RequestScope): Promise<Response> {
  const body = await parseJsonBody(req, ctx, chatCompletionRequestSchema);
  checkModel(ctx, body.model);
  const { engine } = ctx;
  const maxModelLen = engine.model.maxModelLen;
  const id = responseIdOf(req, "chatcmpl", body.request_id);
  const render = chatRenderOptionsOf(body);
  const addGenerationPrompt = render.addGenerationPrompt ?? true;
  const parsing = replyParsingOf(body, ctx.replyParsers);
  const prompt = await chatPrompt(body.messages, promptContext(ctx, scope), {
    ...render,
    addSpecialTokens: body.add_special_tokens ?? false,
    truncation: promptTruncationOf(body, maxModelLen),
  });
  // Without a limit the completion may use the rest of the context, as in vLLM (unless the server
  // sets a default, as it does for the random-weight demo model that rarely samples EOS).
  const rest = Math.max(1, maxModelLen - prompt.tokenIds.length);
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? Math.min(rest, ctx.defaultChatMaxTokens ?? rest);
  checkContextLength(prompt.tokenIds.length, maxTokens, maxModelLen, "messages");
  if (body.top_logprobs != null && body.logprobs !== true) {
    throw badRequest("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
  }
  const asked = promptLogprobsOf(body, engine.model.vocabSize);
  const promptK = body.stream ? undefined : asked;
  const constraint = chatConstraintOf(body, parsing);
  const params = {
    ...toSamplingParams(body, maxTokens, body.logprobs === true ? body.top_logprobs ?? 0 : false, {
      tokenizer: engine.tokenizer,
      vocabSize: engine.model.vocabSize,
    }, constraint?.spec ?? null),
    ...(promptK !== undefined ? { promptLogprobs: promptK } : {}),
  };
  if (constraint) await checkStructuredOutput(constraint.spec, constraint.field);
  // The engine's ids stay unique even when clients reuse a request id.
  const runs = startRequestChoices(req, ctx, scope, body, { id: newResponseId("chatcmpl"), prompts: [prompt], params });
  const prepared: Prepared = {
    body,
    prompt,
    runs,
    id,
    created: unixSeconds(),
    ending: endingContext(ctx, body, params),
    ...replyRoleAndEcho(body, addGenerationPrompt),
    completionTokens: 0,
    parsing,
    promptK,
  };
  if (body.stream) {
    const envelope = chunkEnvelope(ctx, body, { id, object: "chat.completion.chunk", created: prepared.created });
    return sseResponse(streamChunks(ctx, prepared, envelope), scope, {
      usageSoFar: () => usageSoFar(prepared, envelope),
    });
  }
  const response = await completeAll(ctx, prepared, scope);
  return promptK === undefined ? Response.json(response) : orderedJsonResponse(response);
}

/**
 * The reply's constraint: a forced tool choice's schema, else the structured-output fields'. Both
 * at once is a 400: vLLM lets one silently replace the other (which one depends on its release).
 */
function chatConstraintOf(
  body: ChatCompletionRequest,
  parsing: ReplyParsing,
): { spec: GrammarSpec; field: StructuredOutputField } | null {
  if (!parsing.forced) return grammarSpecOf(body);
  if ((body.response_format != null && body.response_format.type !== "text") || body.structured_outputs != null) {
    throw badRequest(
      `tool_choice ${
        parsing.forced.choice.kind === "required" ? '"required"' : "naming a function"
      } constrains the output to tool calls, so it cannot be combined with response_format or structured_outputs`,
      "tool_choice",
    );
  }
  return { spec: forcedToolSpec(parsing.forced.choice, body.tools ?? []), field: "tools" };
}

function logprobsOf(
  ctx: ServerContext,
  body: ChatCompletionRequest,
  tokenIds: number[],
  logprobs: number[],
  top: TopLogprob[][] | undefined,
) {
  if (body.logprobs !== true) return null;
  return {
    content: chatLogprobs(ctx.engine.tokenizer, tokenIds, logprobs, body.return_tokens_as_token_ids === true, {
      k: body.top_logprobs ?? 0,
      ...(top ? { perToken: top } : {}),
    }),
  };
}

/** The reply message of a parsed choice: content, and the tool calls and reasoning when parsers ran. */
function replyMessage(p: Prepared, reply: ParsedReply): Record<string, unknown> {
  const content = reply.content === null ? (p.echo === "" ? null : p.echo) : p.echo + reply.content;
  const message: Record<string, unknown> = { role: p.role, content };
  if (reply.toolCalls.length > 0) message.tool_calls = reply.toolCalls;
  if (p.parsing.reasoning) {
    // vLLM's field is `reasoning`; its older releases (and many clients) read `reasoning_content`.
    message.reasoning = reply.reasoning;
    message.reasoning_content = reply.reasoning;
  }
  return message;
}

/**
 * finish_reason "tool_calls" as vLLM reports it: a non-streamed reply with parsed calls, a streamed
 * one with calls that stopped (not at the length limit). A named function's call is not counted
 * (OpenAI and vLLM report "stop" for it).
 */
function chatFinishReason(finish: "stop" | "length" | "abort", calledTools: boolean, streamed: boolean): string {
  if (!calledTools) return finish;
  return streamed && finish !== "stop" ? finish : "tool_calls";
}

async function completeAll(ctx: ServerContext, p: Prepared, scope: RequestScope) {
  const finished = await collectChoices(p.runs, (e) => scope.abort(e));
  let completionTokens = 0;
  const choices = [];
  for (const c of finished) {
    completionTokens += c.tokenIds.length;
    const ending = await choiceEnding(p.ending, c.tokenIds, c.text, c.finishReason);
    const reply = parseReply(c.text + ending.includedText, p.parsing);
    choices.push({
      index: c.index,
      message: replyMessage(p, reply),
      logprobs: logprobsOf(ctx, p.body, c.tokenIds, c.logprobs, c.topLogprobs),
      finish_reason: chatFinishReason(openAIFinishReason(c.finishReason), calledTools(p, reply.toolCalls), false),
      stop_reason: ending.stopReason,
    });
  }
  return {
    id: p.id,
    object: "chat.completion",
    created: p.created,
    model: ctx.modelName,
    choices,
    usage: usageOf([p.prompt], completionTokens),
    // As vLLM: the request's, on the response (every choice continues the same prompt).
    ...(p.promptK !== undefined
      ? {
        prompt_logprobs: promptLogprobsJson(
          ctx.engine.tokenizer,
          p.prompt.tokenIds,
          finished[0]?.promptLogprobs ?? [],
          p.promptK,
        ),
      }
      : {}),
  };
}

async function* streamChunks(ctx: ServerContext, p: Prepared, envelope: ChunkEnvelope): AsyncGenerator<unknown> {
  const usage = () => usageOf([p.prompt], p.completionTokens);
  const chunk = (choice: Record<string, unknown>) => envelope.choice(choice, usage);
  // The role comes first in every choice, as OpenAI streams it (with the echoed text, as vLLM does).
  for (const r of p.runs) {
    yield chunk({ index: r.index, delta: { role: p.role, content: p.echo }, logprobs: null, finish_reason: null });
  }
  const seen = new Map<number, { tokenIds: number[]; text: string; parser: StreamingReplyParser; called: boolean }>();
  for await (const { run, delta } of mergeChoices(p.runs)) {
    p.completionTokens += delta.tokenIds.length;
    let s = seen.get(run.index);
    if (!s) {
      seen.set(run.index, s = { tokenIds: [], text: "", parser: new StreamingReplyParser(p.parsing), called: false });
    }
    s.tokenIds.push(...delta.tokenIds);
    s.text += delta.text;
    const withLogprobs = p.body.logprobs === true && delta.tokenIds.length > 0;
    if (!delta.finished && delta.text === "" && !withLogprobs) continue;
    let ending: ChoiceEnding = { stopReason: null, includedText: "" };
    if (delta.finished) ending = await choiceEnding(p.ending, s.tokenIds, s.text, delta.finishReason ?? "stop");
    const reply = s.parser.push(delta.text + ending.includedText, delta.finished);
    const message = deltaMessage(p, reply);
    s.called ||= calledTools(p, reply.toolCalls);
    // Text the parser holds back (a tag it may be starting) waits, unless the chunk carries logprobs.
    if (!delta.finished && message === null && !withLogprobs) continue;
    const finish = delta.finished ? openAIFinishReason(delta.finishReason ?? "stop") : null;
    yield chunk({
      index: run.index,
      delta: message ?? (parsed(p) || delta.finished ? {} : { content: "" }),
      logprobs: logprobsOf(ctx, p.body, delta.tokenIds, delta.logprobs ?? [], delta.topLogprobs),
      finish_reason: finish === null ? null : chatFinishReason(finish, s.called, true),
      ...(delta.finished ? { stop_reason: ending.stopReason } : {}),
    });
  }
  if (envelope.includeUsage) yield envelope.usage(usage());
}

/** Whether the reply's calls make finish_reason "tool_calls" (a named function's never do). */
function calledTools(p: Prepared, calls: ParsedReply["toolCalls"]): boolean {
  return calls.length > 0 && p.parsing.forced?.choice.kind !== "named";
}

/** Whether any parser (reasoning, tool calls, a forced tool choice) reads the reply. */
function parsed(p: Prepared): boolean {
  return p.parsing.reasoning !== null || p.parsing.toolCalls !== null || p.parsing.forced != null;
}

/**
 * A streamed delta in vLLM's shape (only the fields it has), or null when it has nothing; without
 * parsers every delta carries its content, even "".
 */
function deltaMessage(
  p: Prepared,
  reply: ReplyDelta,
): Record<string, unknown> | null {
  if (!parsed(p)) return reply.content === "" ? null : { content: reply.content };
  const out: Record<string, unknown> = {};
  if (reply.reasoning !== "") {
    out.reasoning = reply.reasoning;
    out.reasoning_content = reply.reasoning;
  }
  if (reply.content !== "") out.content = reply.content;
  if (reply.toolCalls.length > 0) {
    out.tool_calls = reply.toolCalls.map((call, index) => ({ index, ...call }));
  }
  if (reply.toolCallDeltas && reply.toolCallDeltas.length > 0) out.tool_calls = reply.toolCallDeltas;
  return Object.keys(out).length === 0 ? null : out;
}
