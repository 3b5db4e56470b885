/**
 * POST /v1/chat/completions: messages rendered with the model's chat template, non-streaming and
 * SSE (`chat.completion.chunk`), n choices.
 * @module
 */
import { type ChoiceRun, collectChoices, mergeChoices, openAIFinishReason, usageOf } from "./choices.ts";
import { checkModel, newResponseId, parseJsonBody, promptContext, type ServerContext, unixSeconds } from "./context.ts";
import { badRequest } from "./errors.ts";
import type { RequestScope } from "./lifecycle.ts";
import { chatLogprobs } from "./logprobs.ts";
import { type ChunkEnvelope, chunkEnvelope, startRequestChoices } from "./openai_choices.ts";
import { chatPrompt, type TokenizedPrompt } from "./prompts.ts";
import { checkContextLength, toSamplingParams } from "./sampling.ts";
import { type ChatCompletionRequest, chatCompletionRequestSchema } from "./schemas.ts";
import { sseResponse } from "./sse.ts";

interface Prepared {
  body: ChatCompletionRequest;
  prompt: TokenizedPrompt;
  runs: ChoiceRun[];
  id: string;
  created: number;
  /** Tokens streamed so far (the usage of a stream that ends early). */
  completionTokens: number;
}

/** The usage chunk of a stream that ends now (undefined unless the client asked for usage). */
function usageSoFar(p: Prepared, envelope: ChunkEnvelope): unknown {
  return envelope.includeUsage ? envelope.usage(usageOf([p.prompt], p.completionTokens)) : undefined;
}

/** Handles POST /v1/chat/completions. */
export async function handleChatCompletions(req: Request, ctx: ServerContext, scope: RequestScope): Promise<Response> {
  const body = await parseJsonBody(req, ctx, chatCompletionRequestSchema);
  checkModel(ctx, body.model);
  const { engine } = ctx;
  if (body.top_logprobs != null && body.top_logprobs > 0 && body.logprobs !== true) {
    throw badRequest("top_logprobs requires logprobs to be true", "top_logprobs");
  }
  const prompt = await chatPrompt(body.messages, promptContext(ctx, scope), body.add_generation_prompt ?? true);
  const maxModelLen = engine.model.maxModelLen;
  // Without a limit the completion may use the rest of the context, as in vLLM (unless the server
  // sets a default, as it does for the random-weight demo model that rarely samples EOS).
  const rest = Math.max(1, maxModelLen - prompt.tokenIds.length);
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? Math.min(rest, ctx.defaultChatMaxTokens ?? rest);
  checkContextLength(prompt.tokenIds.length, maxTokens, maxModelLen, "messages");
  const params = toSamplingParams(body, maxTokens, body.logprobs === true);
  const id = newResponseId("chatcmpl");
  const runs = startRequestChoices(req, ctx, scope, body, { id, prompts: [prompt], params });
  const prepared: Prepared = { body, prompt, runs, id, created: unixSeconds(), completionTokens: 0 };
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
  return { content: chatLogprobs(ctx.engine.tokenizer, tokenIds, logprobs, (body.top_logprobs ?? 0) > 0) };
}

async function completeAll(ctx: ServerContext, p: Prepared, scope: RequestScope) {
  const finished = await collectChoices(p.runs, (e) => scope.abort(e));
  let completionTokens = 0;
  const choices = finished.map((c) => {
    completionTokens += c.tokenIds.length;
    return {
      index: c.index,
      message: { role: "assistant", content: c.text },
      logprobs: logprobsOf(ctx, p.body, c.tokenIds, c.logprobs),
      finish_reason: openAIFinishReason(c.finishReason),
    };
  });
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
  const chunk = envelope.choice;
  // The role comes first in every choice, as OpenAI streams it.
  for (const r of p.runs) {
    yield chunk({ index: r.index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null });
  }
  for await (const { run, delta } of mergeChoices(p.runs)) {
    p.completionTokens += delta.tokenIds.length;
    const withLogprobs = p.body.logprobs === true && delta.tokenIds.length > 0;
    if (!delta.finished && delta.text === "" && !withLogprobs) continue;
    yield chunk({
      index: run.index,
      delta: delta.text === "" && delta.finished ? {} : { content: delta.text },
      logprobs: logprobsOf(ctx, p.body, delta.tokenIds, delta.logprobs ?? []),
      finish_reason: delta.finished ? openAIFinishReason(delta.finishReason ?? "stop") : null,
    });
  }
  if (envelope.includeUsage) yield envelope.usage(usageOf([p.prompt], p.completionTokens));
}
