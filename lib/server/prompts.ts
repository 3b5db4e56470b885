/**
 * Turns request prompts (completion prompts, chat messages) into token ids, checking that each is
 * non-empty and uses only ids the model knows.
 * @module
 */
import type { ChatMessage, TextTokenizer } from "../core/engine_api.ts";
import { badRequest } from "./errors.ts";
import type { ChatMessageInput } from "./schemas.ts";

/** One prompt ready for the engine, with its text when it came as text (for echo). */
export interface TokenizedPrompt {
  tokenIds: number[];
  text?: string;
}

function checkIds(ids: number[], vocabSize: number, param: string): void {
  if (ids.length === 0) throw badRequest(`${param} is empty: a prompt needs at least one token`, param, "empty_prompt");
  for (const id of ids) {
    if (id >= vocabSize) throw badRequest(`${param} has token id ${id}, outside the vocabulary (size ${vocabSize})`, param, "invalid_token_id");
  }
}

/** Normalizes a completions `prompt` (text, texts, ids, id lists) to one token-id list per prompt. */
export function completionPrompts(
  prompt: string | string[] | number[] | number[][],
  tokenizer: TextTokenizer,
  vocabSize: number,
): TokenizedPrompt[] {
  let out: TokenizedPrompt[];
  if (typeof prompt === "string") out = [{ tokenIds: tokenizer.encode(prompt), text: prompt }];
  else if (prompt.every((p) => typeof p === "string")) out = (prompt as string[]).map((t) => ({ tokenIds: tokenizer.encode(t), text: t }));
  else if (prompt.every((p) => typeof p === "number")) out = [{ tokenIds: [...(prompt as number[])] }];
  else out = (prompt as number[][]).map((ids) => ({ tokenIds: [...ids] }));
  out.forEach((p, i) => checkIds(p.tokenIds, vocabSize, out.length > 1 ? `prompt[${i}]` : "prompt"));
  return out;
}

/** Flattens a message's content (string or text parts) to one string; parts join with newlines. */
export function messageText(m: ChatMessageInput): string {
  if (m.content == null) return "";
  if (typeof m.content === "string") return m.content;
  return m.content.map((p) => p.text).join("\n");
}

/** Maps request messages onto the tokenizer's chat messages (`developer` reads as `system`). */
export function toChatMessages(messages: readonly ChatMessageInput[]): ChatMessage[] {
  return messages.map((m) => ({ role: m.role === "developer" ? "system" : m.role, content: messageText(m) }));
}

/** Renders messages with the model's chat template; a template that rejects them is a 400. */
export function renderChat(messages: readonly ChatMessageInput[], tokenizer: TextTokenizer, addGenerationPrompt: boolean): string {
  try {
    return tokenizer.applyChatTemplate(toChatMessages(messages), { addGenerationPrompt });
  } catch (err) {
    // A template can reject a conversation (e.g. roles out of order); that is the request's fault.
    throw badRequest(`messages could not be rendered with the chat template: ${err instanceof Error ? err.message : String(err)}`, "messages", "invalid_messages");
  }
}

/** Renders messages with the chat template and tokenizes the result (no extra special tokens). */
export function chatPrompt(
  messages: readonly ChatMessageInput[],
  tokenizer: TextTokenizer,
  vocabSize: number,
  addGenerationPrompt: boolean,
): TokenizedPrompt {
  const text = renderChat(messages, tokenizer, addGenerationPrompt);
  const tokenIds = tokenizer.encode(text, { addSpecialTokens: false });
  checkIds(tokenIds, vocabSize, "messages");
  return { tokenIds, text };
}
