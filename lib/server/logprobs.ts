/**
 * Chosen-token logprobs in the two OpenAI shapes: legacy completions (tokens/token_logprobs/...)
 * and chat (content[].logprob). Only the sampled token's logprob is computed, so any "top"
 * alternatives lists hold just that token.
 * @module
 */
import type { TextTokenizer } from "../core/engine_api.ts";

/** Completions `logprobs` object. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>> | null;
  text_offset: number[];
}

/** One chat `logprobs.content` entry. */
export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

const encoder = new TextEncoder();

/** The text of each token alone. */
function tokenStrings(tokenizer: TextTokenizer, tokenIds: readonly number[]): string[] {
  return tokenIds.map((id) => tokenizer.decode([id]));
}

/** Legacy completions logprobs; `textOffset` is where this piece starts in the choice's text. */
export function completionLogprobs(
  tokenizer: TextTokenizer,
  tokenIds: readonly number[],
  logprobs: readonly number[],
  textOffset: number,
  withTop: boolean,
): CompletionLogprobs {
  const tokens = tokenStrings(tokenizer, tokenIds);
  const offsets: number[] = [];
  let at = textOffset;
  for (const t of tokens) {
    offsets.push(at);
    at += t.length;
  }
  const lp = tokens.map((_, i) => logprobs[i] ?? Number.NaN);
  return {
    tokens,
    token_logprobs: lp,
    top_logprobs: withTop ? tokens.map((t, i) => ({ [t]: lp[i]! })) : null,
    text_offset: offsets,
  };
}

/** Chat logprobs content entries. */
export function chatLogprobs(
  tokenizer: TextTokenizer,
  tokenIds: readonly number[],
  logprobs: readonly number[],
  withTop: boolean,
): ChatTokenLogprob[] {
  return tokenStrings(tokenizer, tokenIds).map((token, i) => {
    const logprob = logprobs[i] ?? Number.NaN;
    const bytes = [...encoder.encode(token)];
    return { token, logprob, bytes, top_logprobs: withTop ? [{ token, logprob, bytes }] : [] };
  });
}
