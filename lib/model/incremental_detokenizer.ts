/**
 * Streaming detokenization: token ids in one at a time, text deltas out, never emitting half of a
 * multi-byte character. It decodes a short window of recent tokens twice (up to the last emitted
 * token, and with the new ones) and emits the difference, holding back while the window's text
 * ends in U+FFFD (an incomplete UTF-8 sequence that a later token may complete). Decoding a window
 * rather than single tokens also keeps tokenizers whose text depends on the previous token right.
 * A byte-level tokenizer's table (token_byte_table.ts) replaces the window: each token's bytes go
 * through one streaming UTF-8 decoder, which holds back an incomplete character the same way.
 * @module
 */
import type { TextTokenizer } from "../core/engine_api.ts";
import type { TokenByteTable } from "./token_byte_table.ts";

const REPLACEMENT = "\uFFFD";

/** Options of IncrementalDetokenizer. */
export interface IncrementalDetokenizerOptions {
  skipSpecialTokens?: boolean;
  /** Last few prompt ids: context for the first window (their text is not emitted; unused with `bytes`). */
  contextIds?: readonly number[];
  /** The tokenizer's byte table, when it has one: constant work a token instead of two decodes. */
  bytes?: TokenByteTable | null;
}

/** Turns a stream of token ids into text deltas whose concatenation is the full decode. */
export class IncrementalDetokenizer {
  readonly #tokenizer: Pick<TextTokenizer, "decode">;
  readonly #skipSpecial: boolean;
  readonly #ids: number[];
  /** Window start, and the end of what is already emitted (indices into #ids). */
  #prefixOffset: number;
  #readOffset: number;
  #text = "";
  readonly #table: TokenByteTable | null;
  readonly #utf8: TextDecoder | null;

  constructor(tokenizer: Pick<TextTokenizer, "decode">, options: IncrementalDetokenizerOptions = {}) {
    this.#tokenizer = tokenizer;
    this.#skipSpecial = options.skipSpecialTokens ?? false;
    this.#table = options.bytes ?? null;
    this.#utf8 = this.#table ? new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }) : null;
    // The byte path needs no context: a byte-level token's text does not depend on the tokens
    // before it, and bytes of a character the prompt left incomplete are not the output's.
    this.#ids = this.#table ? [] : [...(options.contextIds ?? [])];
    this.#prefixOffset = 0;
    this.#readOffset = this.#ids.length;
  }

  /** All text emitted so far. */
  get text(): string {
    return this.#text;
  }

  /** Adds one token; returns the text that became final ("" while held back). */
  push(id: number): string {
    if (this.#table) return this.#emit(this.#pushBytes(id));
    this.#ids.push(id);
    return this.#advance(false);
  }

  /** Adds several tokens; returns the text that became final. */
  pushMany(ids: readonly number[]): string {
    if (this.#table) {
      let delta = "";
      for (const id of ids) delta += this.#pushBytes(id);
      return this.#emit(delta);
    }
    for (const id of ids) this.#ids.push(id);
    return this.#advance(false);
  }

  /** End of stream: returns whatever is held back (an incomplete character decodes as U+FFFD). */
  flush(): string {
    if (this.#utf8) return this.#emit(this.#utf8.decode());
    return this.#advance(true);
  }

  /** The byte path: the text token `id` completes (an added token first ends the byte run before it). */
  #pushBytes(id: number): string {
    const table = this.#table!, utf8 = this.#utf8!;
    if (table.isSilent(id, this.#skipSpecial)) return "";
    const added = table.addedText(id, this.#skipSpecial);
    return added === null ? utf8.decode(table.bytesOf(id), { stream: true }) : utf8.decode() + added;
  }

  #emit(delta: string): string {
    this.#text += delta;
    return delta;
  }

  #advance(final: boolean): string {
    if (this.#readOffset === this.#ids.length) return "";
    const opts = { skipSpecialTokens: this.#skipSpecial };
    const prefixText = this.#tokenizer.decode(this.#ids.slice(this.#prefixOffset, this.#readOffset), opts);
    const newText = this.#tokenizer.decode(this.#ids.slice(this.#prefixOffset), opts);
    if (!final && (newText.length <= prefixText.length || newText.endsWith(REPLACEMENT))) return "";
    // A held-back tail can decode shorter once completed only if the prefix text changed, which
    // the window excludes; guard anyway so a delta is never negative.
    const delta = newText.length > prefixText.length ? newText.slice(prefixText.length) : "";
    this.#prefixOffset = this.#readOffset;
    this.#readOffset = this.#ids.length;
    this.#text += delta;
    return delta;
  }
}
