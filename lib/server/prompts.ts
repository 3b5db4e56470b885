/**
 * Turns request prompts (completion prompts, chat messages) into token ids, checking that each is
 * non-empty and uses only ids the model knows. Text is measured before it is tokenized: one longer
 * than any prompt that fits the context could be is refused without tokenizing it.
 * @module
 */
import type { ChatMessage, ChatRenderOptions, ChatToolCall } from "../core/engine_api.ts";
import { badRequest } from "./errors.ts";
import { chatChars, type PromptTokenizer } from "./prompt_tokenizer.ts";
import type { ChatMessageInput } from "./schemas.ts";

/** One prompt ready for the engine, with its text when it came as text (for echo). */
export interface TokenizedPrompt {
  tokenIds: number[];
  text?: string;
}

/** What tokenizing a request's prompts needs. */
export interface PromptContext {
  tokenizer: PromptTokenizer;
  vocabSize: number;
  maxModelLen: number;
  /** Aborts queued tokenization when the request goes away. */
  signal?: AbortSignal;
}

/**
 * Longest text (UTF-16 units) whose tokens can still fit `maxModelLen`: max_model_len times the most
 * characters one token stands for. Infinity when the tokenizer has no such bound.
 */
function maxPromptChars(maxModelLen: number, maxInputCharsPerToken: number): number {
  return maxModelLen * maxInputCharsPerToken;
}

/** Refuses a text that is longer than any prompt that fits the context (400 naming `param`). */
export function checkPromptChars(chars: number, ctx: PromptContext, param: string): void {
  const limit = maxPromptChars(ctx.maxModelLen, ctx.tokenizer.maxInputCharsPerToken);
  if (chars > limit) {
    throw badRequest(
      `${param} has ${chars} characters, more than any prompt within this model's maximum context length of ${ctx.maxModelLen} tokens can have (${limit}). Please reduce the length of the input.`,
      param,
    );
  }
}

function checkIds(ids: number[], vocabSize: number, param: string): void {
  if (ids.length === 0) throw badRequest(`${param} is empty: a prompt needs at least one token`, param);
  for (const id of ids) {
    if (id >= vocabSize) {
      throw badRequest(
        `${param} has token id ${id}, outside the vocabulary (size ${vocabSize})`,
        param,
      );
    }
  }
}

/** truncate_prompt_tokens: keep this many prompt tokens, the last ones ("left") or the first ("right"). */
export interface PromptTruncation {
  tokens: number;
  side: "left" | "right";
}

/** The request's truncation (undefined: none); -1 means max_model_len, more than it is a 400. */
export function promptTruncationOf(
  body: { truncate_prompt_tokens?: number | null; truncation_side?: "left" | "right" | null },
  maxModelLen: number,
): PromptTruncation | undefined {
  const n = body.truncate_prompt_tokens;
  if (n == null) return undefined;
  const tokens = n === -1 ? maxModelLen : n;
  if (tokens > maxModelLen) {
    throw badRequest(
      `truncate_prompt_tokens value (${n}) is greater than max_model_len (${maxModelLen}). Please, select a smaller truncation size.`,
      "truncate_prompt_tokens",
    );
  }
  return { tokens, side: body.truncation_side ?? "left" };
}

function truncated(ids: number[], t: PromptTruncation | undefined): number[] {
  if (!t || ids.length <= t.tokens) return ids;
  return t.side === "left" ? ids.slice(ids.length - t.tokens) : ids.slice(0, t.tokens);
}

/** How the prompts of one request are tokenized. */
export interface PromptOptions {
  addSpecialTokens: boolean;
  truncation?: PromptTruncation;
}

/** Normalizes a completions `prompt` (text, texts, ids, id lists) to one token-id list per prompt. */
export async function completionPrompts(
  prompt: string | string[] | number[] | number[][],
  ctx: PromptContext,
  options: PromptOptions = { addSpecialTokens: true },
): Promise<TokenizedPrompt[]> {
  const paramOf = (i: number, count: number) => (count > 1 ? `prompt[${i}]` : "prompt");
  const cut = options.truncation;
  let out: TokenizedPrompt[];
  if (typeof prompt === "string" || prompt.every((p) => typeof p === "string")) {
    const texts = typeof prompt === "string" ? [prompt] : (prompt as string[]);
    // A prompt that will be truncated may be longer than the context (the body limit bounds it).
    if (!cut) texts.forEach((t, i) => checkPromptChars(t.length, ctx, paramOf(i, texts.length)));
    out = [];
    // One at a time: a list of large prompts must not fill the pool's queue on its own.
    for (const text of texts) {
      const ids = await ctx.tokenizer.encode(text, { addSpecialTokens: options.addSpecialTokens, signal: ctx.signal });
      const kept = truncated(ids, cut);
      // Echo shows the prompt the model saw: a truncated one is decoded from its ids.
      out.push(kept === ids ? { tokenIds: ids, text } : { tokenIds: kept });
    }
  } else if (prompt.every((p) => typeof p === "number")) {
    out = [{ tokenIds: truncated([...(prompt as number[])], cut) }];
  } else {
    out = (prompt as number[][]).map((ids) => ({ tokenIds: truncated([...ids], cut) }));
  }
  out.forEach((p, i) => checkIds(p.tokenIds, ctx.vocabSize, paramOf(i, out.length)));
  return out;
}

/** Flattens a message's content (string or text parts) to one string; parts join with newlines. */
export function messageContentText(m: ChatMessageInput): string {
  if (m.content == null) return "";
  if (typeof m.content === "string") return m.content;
  return m.content.map((p) => p.text).join("\n");
}

/**
 * An assistant message's tool calls for the template, their arguments parsed from JSON text to
 * objects as vLLM does (tool-aware templates expect objects; an empty text is `{}`).
 */
function templateToolCalls(m: ChatMessageInput, index: number): ChatToolCall[] | undefined {
  if (!m.tool_calls || m.tool_calls.length === 0) return undefined;
  return m.tool_calls.map((call, j) => {
    let args: unknown = {};
    if (call.function.arguments !== "") {
      try {
        args = JSON.parse(call.function.arguments);
      } catch (err) {
        const param = `messages[${index}].tool_calls[${j}].function.arguments`;
        throw badRequest(`${param} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`, param);
      }
    }
    return { id: call.id, type: "function", function: { name: call.function.name, arguments: args } };
  });
}

/** Maps request messages onto the tokenizer's chat messages (`developer` reads as `system`). */
function toChatMessages(messages: readonly ChatMessageInput[]): ChatMessage[] {
  return messages.map((m, i) => {
    const out: ChatMessage = { role: m.role === "developer" ? "system" : m.role, content: messageContentText(m) };
    const calls = templateToolCalls(m, i);
    if (calls) out.tool_calls = calls;
    if (m.tool_call_id != null) out.tool_call_id = m.tool_call_id;
    return out;
  });
}

/** How a chat is rendered and tokenized. */
export interface ChatTokenOptions extends ChatRenderOptions {
  addSpecialTokens?: boolean;
  /** Refuse a chat longer than any prompt that fits the context before rendering it (default true). */
  checkChars?: boolean;
}

/**
 * Renders messages with the chat template and tokenizes the result. `addSpecialTokens` is off for
 * generation (the template already wrote them), and /tokenize lets the client choose.
 */
export async function chatTokenIds(
  messages: readonly ChatMessageInput[],
  ctx: PromptContext,
  options: ChatTokenOptions,
): Promise<number[]> {
  const chat = toChatMessages(messages);
  if (options.checkChars ?? true) checkPromptChars(chatChars(chat, options.tools), ctx, "messages");
  const { checkChars: _, addSpecialTokens, ...render } = options;
  return ctx.tokenizer.encodeChat(chat, { ...render, addSpecialTokens: addSpecialTokens ?? false, signal: ctx.signal });
}

/** A chat prompt ready for the engine (rendered, tokenized, checked against the vocabulary). */
export async function chatPrompt(
  messages: readonly ChatMessageInput[],
  ctx: PromptContext,
  options: PromptOptions & ChatRenderOptions,
): Promise<TokenizedPrompt> {
  const ids = await chatTokenIds(messages, ctx, { ...options, checkChars: options.truncation === undefined });
  const tokenIds = truncated(ids, options.truncation);
  checkIds(tokenIds, ctx.vocabSize, "messages");
  return { tokenIds };
}
