/**
 * Per-request stop conditions and output text. Token-level: EOS (unless ignoreEos) and stop token
 * ids end a sequence only once minTokens tokens precede them, as in vLLM (whose sampler never
 * picks them earlier; ours may, and such a token is then an ordinary output token); maxTokens; the
 * model's context length. Text-level: stop strings over the incrementally detokenized text, with
 * the tail that may still become a stop string held back; one completing within the first
 * minTokens tokens is text, one straddling that boundary stops. Special tokens are left out of
 * the text unless the request's skipSpecialTokens is false (as vLLM's detokenizer). Requests
 * that neither stream nor have stop strings skip incremental detokenization and decode their
 * output once at the end (same text, far less work).
 * @module
 */
import type { TextTokenizer } from "../core/engine_api.ts";
import type { FinishReason } from "../core/outputs.ts";
import type { Sequence } from "../core/sequence.ts";
import { IncrementalDetokenizer } from "../model/incremental_detokenizer.ts";
import { StopStringMatcher } from "../model/stop_strings.ts";
import type { TokenByteTable } from "../model/token_byte_table.ts";

/** What detokenizes a sequence's output: the tokenizer's decode, and its byte table when it has one. */
export type OutputDetokenizer = Pick<TextTokenizer, "decode"> & { readonly tokenBytes?: TokenByteTable | null };

/** What one new token did. */
export interface TokenVerdict {
  /** Text that became final with this token ("" while held back or not incremental). */
  text: string;
  /** Set when the request must stop after this token. */
  finish: FinishReason | null;
}

// Prompt ids given to the detokenizer as context for its first window.
const CONTEXT_IDS = 4;

/** Decides when one sequence stops, and produces its text. */
export class StopChecker {
  readonly #seq: Sequence;
  readonly #tokenizer: OutputDetokenizer | null;
  readonly #eos: ReadonlySet<number>;
  readonly #stopIds: ReadonlySet<number>;
  readonly #maxModelLen: number;
  readonly #detok: IncrementalDetokenizer | null;
  readonly #matcher: StopStringMatcher | null;
  /** Output ids whose text belongs to the output (EOS and stop tokens' text is never shown). */
  readonly #textIds: number[] = [];
  #text = "";

  constructor(
    seq: Sequence,
    opts: {
      tokenizer: OutputDetokenizer | null;
      eosTokenIds: readonly number[];
      maxModelLen: number;
      incremental: boolean;
    },
  ) {
    this.#seq = seq;
    this.#tokenizer = opts.tokenizer;
    this.#eos = new Set(seq.params.ignoreEos ? [] : opts.eosTokenIds);
    this.#stopIds = new Set(seq.params.stopTokenIds);
    this.#maxModelLen = opts.maxModelLen;
    const stops = seq.params.stop;
    const incremental = opts.tokenizer !== null && (opts.incremental || stops.length > 0);
    this.#detok = incremental
      ? new IncrementalDetokenizer(opts.tokenizer!, {
        skipSpecialTokens: seq.params.skipSpecialTokens,
        contextIds: seq.promptTokenIds.slice(-CONTEXT_IDS),
        bytes: opts.tokenizer!.tokenBytes,
      })
      : null;
    this.#matcher = incremental && stops.length > 0 ? new StopStringMatcher(stops) : null;
  }

  /** Text emitted so far (incremental mode), or the whole output text after finish(). */
  get text(): string {
    return this.#text;
  }

  /** Judges the token just appended to the sequence. */
  onToken(token: number): TokenVerdict {
    const seq = this.#seq;
    const p = seq.params;
    const n = seq.numOutputTokens;
    // n counts this token: it may end the sequence only when minTokens tokens came before it.
    const armed = n > p.minTokens;
    if (armed && (this.#eos.has(token) || this.#stopIds.has(token))) return { text: "", finish: "stop" };
    this.#textIds.push(token);
    const lengthDone = n >= p.maxTokens || seq.numTokens >= this.#maxModelLen;
    let text = "";
    if (this.#detok) {
      const delta = this.#detok.push(token);
      if (this.#matcher) {
        // Before minTokens the matcher only holds back a possible start of a stop string, so one
        // that straddles the minTokens boundary still stops the request.
        const m = this.#matcher.push(delta, armed);
        text = m.text;
        if (m.stop !== null) {
          this.#text += text;
          return { text, finish: "stop" };
        }
      } else {
        text = delta;
      }
      this.#text += text;
    }
    return { text, finish: lengthDone ? "length" : null };
  }

  /** The request ended (any reason): returns the text still held back, completing `text`. */
  finish(reason: FinishReason): string {
    if (!this.#tokenizer) return "";
    if (!this.#detok) {
      this.#text = this.#tokenizer.decode(this.#textIds, { skipSpecialTokens: this.#seq.params.skipSpecialTokens });
      return this.#text;
    }
    if (reason === "stop" && this.#matcher?.stopped) return "";
    let rest = this.#detok.flush();
    if (this.#matcher) {
      const m = this.#matcher.push(rest);
      rest = m.stop !== null ? m.text : m.text + this.#matcher.flush();
    }
    this.#text += rest;
    return rest;
  }
}
