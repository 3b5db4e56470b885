/**
 * Chosen-token logprobs in the two OpenAI shapes: legacy completions (tokens/token_logprobs/...)
 * and chat (content[].logprob). Only the sampled token's logprob is computed (requests for top
 * alternatives are refused before they get here).
 * @module
 */
import type { TextTokenizer } from "../core/engine_api.ts";

/** Completions `logprobs` object. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>>;
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

/**
 * The text of each token alone, or `token_id:<id>` with return_tokens_as_token_ids (for tokens
 * whose text is not valid UTF-8 on its own).
 */
function tokenStrings(tokenizer: TextTokenizer, tokenIds: readonly number[], asTokenIds: boolean): string[] {
  return tokenIds.map((id) => (asTokenIds ? `token_id:${id}` : tokenizer.decode([id])));
}

/**
 * Legacy completions logprobs (`logprobs: 0`): the chosen token's logprob per position, and as
 * vLLM sends it for 0 alternatives, the chosen token alone in each `top_logprobs` entry.
 * `textOffset` is where this piece starts in the choice's text.
 */
export function completionLogprobs(
  tokenizer: TextTokenizer,
  tokenIds: readonly number[],
  logprobs: readonly number[],
  textOffset: number,
  asTokenIds: boolean,
): CompletionLogprobs {
  const tokens = tokenStrings(tokenizer, tokenIds, asTokenIds);
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
    top_logprobs: tokens.map((t, i) => ({ [t]: lp[i]! })),
    text_offset: offsets,
  };
}

/** Chat logprobs content entries (`top_logprobs: 0`: no alternatives, as in vLLM). */
export function chatLogprobs(
  tokenizer: TextTokenizer,
  tokenIds: readonly number[],
  logprobs: readonly number[],
  asTokenIds: boolean,
): ChatTokenLogprob[] {
  return tokenStrings(tokenizer, tokenIds, asTokenIds).map((token, i) => {
    const logprob = logprobs[i] ?? Number.NaN;
    return { token, logprob, bytes: [...encoder.encode(token)], top_logprobs: [] };
  });
}
