/**
 * POST /v1/chat/completions: messages rendered with the model's chat template, non-streaming and
 * SSE (`chat.completion.chunk`), n choices.
 * @module
 */
import { type ChoiceEnding, choiceEnding, type EndingContext, endingContext } from "./choice_endings.ts";
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
import { chatLogprobs } from "./logprobs.ts";
import { type ChunkEnvelope, chunkEnvelope, startRequestChoices } from "./openai_choices.ts";
import { chatPrompt, messageContentText, promptTruncationOf, type TokenizedPrompt } from "./prompts.ts";
import { checkContextLength, toSamplingParams } from "./sampling.ts";
import { type ChatCompletionRequest, chatCompletionRequestSchema } from "./schemas.ts";
import { sseResponse } from "./sse.ts";

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
  const addGenerationPrompt = body.add_generation_prompt ?? true;
  const prompt = await chatPrompt(body.messages, promptContext(ctx, scope), {
    addGenerationPrompt,
    addSpecialTokens: body.add_special_tokens ?? false,
    truncation: promptTruncationOf(body, maxModelLen),
  });
  // Without a limit the completion may use the rest of the context, as in vLLM (unless the server
  // sets a default, as it does for the random-weight demo model that rarely samples EOS).
  const rest = Math.max(1, maxModelLen - prompt.tokenIds.length);
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? Math.min(rest, ctx.defaultChatMaxTokens ?? rest);
  checkContextLength(prompt.tokenIds.length, maxTokens, maxModelLen, "messages");
  const params = toSamplingParams(body, maxTokens, body.logprobs === true);
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
  };
  if (body.stream) {
    const envelope = chunkEnvelope(ctx, body, { id, object: "chat.completion.chunk", created: prepared.created });
    return sseResponse(streamChunks(ctx, prepared, envelope), scope, {
      usageSoFar: () => usageSoFar(prepared, envelope),
    });
  }
  return Response.json(await completeAll(ctx, prepared, scope));
}

function logprobsOf(ctx: ServerContext, body: ChatCompletionRequest, tokenIds: number[], logprobs: number[]) {
  if (body.logprobs !== true) return null;
  return { content: chatLogprobs(ctx.engine.tokenizer, tokenIds, logprobs, body.return_tokens_as_token_ids === true) };
}

async function completeAll(ctx: ServerContext, p: Prepared, scope: RequestScope) {
  const finished = await collectChoices(p.runs, (e) => scope.abort(e));
  let completionTokens = 0;
  const choices = [];
  for (const c of finished) {
    completionTokens += c.tokenIds.length;
    const ending = await choiceEnding(p.ending, c.tokenIds, c.text, c.finishReason);
    choices.push({
      index: c.index,
      message: { role: p.role, content: p.echo + c.text + ending.includedText },
      logprobs: logprobsOf(ctx, p.body, c.tokenIds, c.logprobs),
      finish_reason: openAIFinishReason(c.finishReason),
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
  };
}

async function* streamChunks(ctx: ServerContext, p: Prepared, envelope: ChunkEnvelope): AsyncGenerator<unknown> {
  const usage = () => usageOf([p.prompt], p.completionTokens);
  const chunk = (choice: Record<string, unknown>) => envelope.choice(choice, usage);
  // The role comes first in every choice, as OpenAI streams it (with the echoed text, as vLLM does).
  for (const r of p.runs) {
    yield chunk({ index: r.index, delta: { role: p.role, content: p.echo }, logprobs: null, finish_reason: null });
  }
  const seen = new Map<number, { tokenIds: number[]; text: string }>();
  for await (const { run, delta } of mergeChoices(p.runs)) {
    p.completionTokens += delta.tokenIds.length;
    let s = seen.get(run.index);
    if (!s) seen.set(run.index, s = { tokenIds: [], text: "" });
    s.tokenIds.push(...delta.tokenIds);
    s.text += delta.text;
    const withLogprobs = p.body.logprobs === true && delta.tokenIds.length > 0;
    if (!delta.finished && delta.text === "" && !withLogprobs) continue;
    let ending: ChoiceEnding = { stopReason: null, includedText: "" };
    if (delta.finished) ending = await choiceEnding(p.ending, s.tokenIds, s.text, delta.finishReason ?? "stop");
    const text = delta.text + ending.includedText;
    yield chunk({
      index: run.index,
      delta: text === "" && delta.finished ? {} : { content: text },
      logprobs: logprobsOf(ctx, p.body, delta.tokenIds, delta.logprobs ?? []),
      finish_reason: delta.finished ? openAIFinishReason(delta.finishReason ?? "stop") : null,
      ...(delta.finished ? { stop_reason: ending.stopReason } : {}),
    });
  }
  if (envelope.includeUsage) yield envelope.usage(usage());
}
