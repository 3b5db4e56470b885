/**
 * Logprobs in the two OpenAI shapes: legacy completions (tokens/token_logprobs/top_logprobs/...)
 * and chat (content[].logprob with top_logprobs). The engine computes the chosen token's logprob
 * and, when asked, the k most likely alternatives per position (on the device).
 * @module
 */
import type { TextTokenizer } from "../core/engine_api.ts";
import type { TopLogprob } from "../core/outputs.ts";

/** Completions `logprobs` object (null entries: the first prompt token of an echo). */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: Array<Record<string, number> | null>;
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
 * A position's alternatives as vLLM orders them: the chosen token first, then the top ones without
 * it (vLLM keeps them in one dict keyed by token id, the sampled token inserted first).
 */
function alternatives(chosen: number, logprob: number, top: readonly TopLogprob[] | undefined): TopLogprob[] {
  return [[chosen, logprob], ...(top ?? []).filter(([id]) => id !== chosen)];
}

/** vLLM's stand-in for -inf, which JSON cannot carry. */
export const clampLogprob = (lp: number) => Math.max(lp, -9999);

/**
 * Legacy completions logprobs (`logprobs: k`): the chosen token's logprob per position and, as vLLM
 * sends them, the chosen token with the k most likely alternatives in each `top_logprobs` entry (k + 1
 * entries when the chosen token is not among them). `textOffset` is where this piece starts in the
 * choice's text.
 */
export function completionLogprobs(
  tokenizer: TextTokenizer,
  tokenIds: readonly number[],
  logprobs: readonly number[],
  textOffset: number,
  asTokenIds: boolean,
  top: { k: number; perToken?: readonly TopLogprob[][] } = { k: 0 },
): CompletionLogprobs {
  const tokens = tokenStrings(tokenizer, tokenIds, asTokenIds);
  const offsets: number[] = [];
  let at = textOffset;
  for (const t of tokens) {
    offsets.push(at);
    at += t.length;
  }
  const lp = tokens.map((_, i) => logprobs[i] ?? Number.NaN);
  const topEntry = (i: number): Record<string, number> => {
    const entries = alternatives(tokenIds[i]!, lp[i]!, top.perToken?.[i]).slice(0, top.k + 1);
    const names = tokenStrings(tokenizer, entries.map(([id]) => id), asTokenIds);
    return Object.fromEntries(entries.map(([, v], j) => [names[j]!, clampLogprob(v)]));
  };
  return {
    tokens,
    token_logprobs: lp,
    top_logprobs: tokens.map((_, i) => topEntry(i)),
    text_offset: offsets,
  };
}

/** Chat logprobs content entries, each with its first `k` alternatives as vLLM orders them. */
export function chatLogprobs(
  tokenizer: TextTokenizer,
  tokenIds: readonly number[],
  logprobs: readonly number[],
  asTokenIds: boolean,
  top: { k: number; perToken?: readonly TopLogprob[][] } = { k: 0 },
): ChatTokenLogprob[] {
  return tokenStrings(tokenizer, tokenIds, asTokenIds).map((token, i) => {
    const logprob = logprobs[i] ?? Number.NaN;
    const entries = top.k > 0 ? alternatives(tokenIds[i]!, logprob, top.perToken?.[i]).slice(0, top.k) : [];
    const names = tokenStrings(tokenizer, entries.map(([id]) => id), asTokenIds);
    return {
      token,
      logprob,
      bytes: [...encoder.encode(token)],
      top_logprobs: entries.map(([, v], j) => ({
        token: names[j]!,
        logprob: clampLogprob(v),
        bytes: [...encoder.encode(names[j]!)],
      })),
    };
  });
}
