/**
 * `prompt_logprobs` as vLLM's OpenAI server takes and returns it (protocol.py's check_logprobs, the
 * engine's max_logprobs check, vllm/logprobs.py and vllm/v1/engine/logprobs.py): k in [0, 20] (-1,
 * the whole vocabulary, is over vLLM's default max_logprobs and refused as it refuses it), never
 * with `stream` (k 0 excepted, as in vLLM); the answer is a list with null for the first prompt
 * token, then per position a map token id -> {logprob, rank, decoded_token} holding the prompt
 * token (its rank over the whole vocabulary) and the k most likely tokens (ranks 1..k), the prompt
 * token's key first. The engine computes them on the device (lib/local/prompt_logprob_rows.ts).
 * @module
 */
import type { TextTokenizer } from "../core/engine_api.ts";
import type { PromptLogprob } from "../core/outputs.ts";
import { MAX_TOP_LOGPROBS } from "../core/sampling_params.ts";
import { badRequest } from "./errors.ts";
import { clampLogprob, type CompletionLogprobs } from "./logprobs.ts";
import { OrderedObject } from "./ordered_json.ts";

/** One position of vLLM's prompt_logprobs, as serialized: token id -> its Logprob. */
interface LogprobJson {
  logprob: number;
  rank: number;
  decoded_token: string;
}

/**
 * The k a request's prompt_logprobs asks for (undefined: none), refused with vLLM's messages.
 * `vocabSize` is what -1 stands for.
 */
export function promptLogprobsOf(
  body: { prompt_logprobs?: number | null; stream?: boolean | null },
  vocabSize: number,
): number | undefined {
  const k = body.prompt_logprobs;
  if (k == null) return undefined;
  if (body.stream === true && (k > 0 || k === -1)) {
    throw badRequest("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
  }
  if (k < 0 && k !== -1) throw badRequest("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs");
  const n = k === -1 ? vocabSize : k;
  if (n > MAX_TOP_LOGPROBS) {
    throw badRequest(
      `Requested prompt logprobs of ${n}, which is greater than max allowed: ${MAX_TOP_LOGPROBS}`,
      "prompt_logprobs",
    );
  }
  return n;
}

const REPLACEMENT = "\uFFFD";

/**
 * Texts of one position's tokens as vLLM's logprobs processor makes them: each decoded alone, and
 * one that ends in an incomplete character decoded with the entry before it in the list, else "".
 */
function decodedTokens(tokenizer: Pick<TextTokenizer, "decode">, ids: readonly number[]): string[] {
  return ids.map((id, i) => {
    const text = tokenizer.decode([id]);
    if (!text.endsWith(REPLACEMENT)) return text;
    const pair = i > 0 ? tokenizer.decode([ids[i - 1]!, id]) : REPLACEMENT;
    return pair.endsWith(REPLACEMENT) ? "" : pair;
  });
}

/**
 * One position as vLLM builds it: [id, logprob, rank, text] of the prompt token, then of the k most
 * likely; a token among both keeps its first place and takes the later values (its top rank), as
 * a dict updated in that order does. Texts are decoded over the list before that merge.
 */
function positionEntries(
  tokenizer: Pick<TextTokenizer, "decode">,
  tokenId: number,
  entry: PromptLogprob,
  k: number,
): [id: number, logprob: number, rank: number, text: string][] {
  const top = entry.top.slice(0, k);
  const texts = decodedTokens(tokenizer, [tokenId, ...top.map(([id]) => id)]);
  const out: [number, number, number, string][] = [[tokenId, entry.logprob, entry.rank, texts[0]!]];
  top.forEach(([id, lp], j) => {
    const at = out.findIndex(([t]) => t === id);
    const item: [number, number, number, string] = [id, lp, j + 1, texts[j + 1]!];
    if (at >= 0) out[at] = item;
    else out.push(item);
  });
  return out;
}

/**
 * vLLM's prompt_logprobs of a prompt: null, then per position an object (keys in vLLM's order)
 * of token id -> {logprob, rank, decoded_token}.
 */
export function promptLogprobsJson(
  tokenizer: Pick<TextTokenizer, "decode">,
  promptTokenIds: readonly number[],
  entries: readonly (PromptLogprob | null)[],
  k: number,
): (OrderedObject | null)[] {
  return promptTokenIds.map((tokenId, i) => {
    const entry = entries[i];
    if (i === 0 || !entry) return null;
    return new OrderedObject(
      positionEntries(tokenizer, tokenId, entry, k).map(([id, lp, rank, text]): [string, LogprobJson] => [
        String(id),
        { logprob: clampLogprob(lp), rank, decoded_token: text },
      ]),
    );
  });
}

/**
 * The prompt's part of an echoed completion's `logprobs` (vLLM's _create_completion_logprobs over
 * the prompt tokens): the first token with null logprob and alternatives, then each with its
 * logprob and the first `k` + 1 entries of its position (prompt token first); offsets from
 * `textOffset` by the tokens' texts.
 */
export function echoedPromptLogprobs(
  tokenizer: Pick<TextTokenizer, "decode">,
  promptTokenIds: readonly number[],
  entries: readonly (PromptLogprob | null)[],
  k: { prompt: number; output: number },
  asTokenIds: boolean,
  textOffset: number,
): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = textOffset;
  const name = (id: number, text: string) => (asTokenIds ? `token_id:${id}` : text);
  promptTokenIds.forEach((tokenId, i) => {
    const entry = i === 0 ? null : entries[i];
    let token: string;
    if (!entry) {
      token = name(tokenId, tokenizer.decode([tokenId]));
      out.token_logprobs.push(null);
      out.top_logprobs.push(null);
    } else {
      const list = positionEntries(tokenizer, tokenId, entry, k.prompt);
      const own = list.find(([id]) => id === tokenId)!;
      token = name(tokenId, own[3]);
      out.token_logprobs.push(clampLogprob(own[1]));
      out.top_logprobs.push(
        Object.fromEntries(list.slice(0, k.output + 1).map(([id, lp, , text]) => [name(id, text), clampLogprob(lp)])),
      );
    }
    out.tokens.push(token);
    out.text_offset.push(at);
    at += token.length;
  });
  return out;
}

/** `a` followed by `b`. */
export function concatLogprobs(a: CompletionLogprobs, b: CompletionLogprobs): CompletionLogprobs {
  return {
    tokens: [...a.tokens, ...b.tokens],
    token_logprobs: [...a.token_logprobs, ...b.token_logprobs],
    top_logprobs: [...a.top_logprobs, ...b.top_logprobs],
    text_offset: [...a.text_offset, ...b.text_offset],
  };
}
