/**
 * Each token's text as UTF-8 bytes, for tokenizers whose decode is the concatenation of their
 * tokens' bytes: byte-level BPE (GPT-2's byte alphabet: Qwen, Llama 3) without text clean-up.
 * With it a stream detokenizes each new token in constant time (incremental_detokenizer.ts);
 * without it every token re-decodes a window of tokens through the tokenizer, which at a few
 * hundred sequences a step costs a worker more host time than the step's own bookkeeping.
 *
 * The table is built from tokenizer.json and then checked against the tokenizer's own decode on
 * sample sequences (random ids across the whole id range, special tokens skipped and kept, ids
 * past the vocabulary): any disagreement leaves the table out and the caller on the general path,
 * so an unusual tokenizer costs speed, never text.
 * @module
 */

/** How a token decodes: vocabulary bytes, or an added token's literal text. */
const enum TokenKind {
  /** Not a token: decodes to nothing. */
  None = 0,
  Vocab = 1,
  /** An added token: its content, verbatim, between the byte runs around it. */
  Added = 2,
  /** An added special token: left out when special tokens are skipped. */
  Special = 3,
}

/** The decode of `ids` by the tokenizer the table stands for. */
export type ReferenceDecode = (ids: number[], options: { skipSpecialTokens: boolean }) => string;

/** Token id -> UTF-8 bytes, for byte-level tokenizers. */
export class TokenByteTable {
  readonly #bytes: Uint8Array;
  /** Byte offsets: token `id` is bytes [offsets[id], offsets[id + 1]). */
  readonly #offsets: Int32Array;
  readonly #kinds: Uint8Array;

  private constructor(bytes: Uint8Array, offsets: Int32Array, kinds: Uint8Array) {
    this.#bytes = bytes;
    this.#offsets = offsets;
    this.#kinds = kinds;
  }

  /**
   * The table of a tokenizer.json (with its tokenizer_config.json), or null when its decode is not
   * a byte concatenation or `reference` (the tokenizer's decode) disagrees with it.
   */
  static build(
    tokenizerJson: Record<string, unknown>,
    tokenizerConfig: Record<string, unknown>,
    reference: ReferenceDecode,
  ): TokenByteTable | null {
    const table = TokenByteTable.#fromJson(tokenizerJson, tokenizerConfig);
    return table !== null && table.#agreesWith(reference) ? table : null;
  }

  /** One past the largest token id. */
  get size(): number {
    return this.#kinds.length;
  }

  /** The bytes of vocabulary token `id` (empty for added tokens and unknown ids). */
  bytesOf(id: number): Uint8Array {
    if (this.#kindOf(id) !== TokenKind.Vocab) return EMPTY;
    return this.#bytes.subarray(this.#offsets[id], this.#offsets[id + 1]);
  }

  /** The literal text of added token `id`, or null when `id` is not one (or is skipped). */
  addedText(id: number, skipSpecialTokens: boolean): string | null {
    const kind = this.#kindOf(id);
    if (kind === TokenKind.Added || (kind === TokenKind.Special && !skipSpecialTokens)) {
      return UTF8.decode(this.#bytes.subarray(this.#offsets[id], this.#offsets[id + 1]));
    }
    return null;
  }

  /** True when `id` contributes nothing to the text (a skipped special token or an unknown id). */
  isSilent(id: number, skipSpecialTokens: boolean): boolean {
    const kind = this.#kindOf(id);
    return kind === TokenKind.None || (kind === TokenKind.Special && skipSpecialTokens);
  }

  /** The text of `ids`, as the tokenizer decodes it. */
  decode(ids: readonly number[], skipSpecialTokens: boolean): string {
    const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
    let text = "";
    for (const id of ids) {
      if (this.isSilent(id, skipSpecialTokens)) continue;
      const added = this.addedText(id, skipSpecialTokens);
      text += added === null ? decoder.decode(this.bytesOf(id), { stream: true }) : decoder.decode() + added;
    }
    return text + decoder.decode();
  }

  #kindOf(id: number): TokenKind {
    return Number.isInteger(id) && id >= 0 && id < this.#kinds.length ? this.#kinds[id] as TokenKind : TokenKind.None;
  }

  static #fromJson(json: Record<string, unknown>, config: Record<string, unknown>): TokenByteTable | null {
    const decoder = json.decoder as { type?: unknown } | null | undefined;
    const model = json.model as { type?: unknown; vocab?: unknown; end_of_word_suffix?: unknown } | undefined;
    // The tokenizer cleans up spaces around punctuation unless the config says false.
    if (config.clean_up_tokenization_spaces !== false) return null;
    if (decoder?.type !== "ByteLevel" || model?.type !== "BPE" || model.end_of_word_suffix) return null;
    if (typeof model.vocab !== "object" || model.vocab === null || Array.isArray(model.vocab)) return null;
    const added = Array.isArray(json.added_tokens) ? json.added_tokens as AddedToken[] : [];
    const vocab = model.vocab as Record<string, unknown>;
    let size = 0;
    for (const token in vocab) {
      const id = vocab[token];
      if (isId(id)) size = Math.max(size, id + 1);
    }
    for (const t of added) if (isId(t.id)) size = Math.max(size, t.id + 1);
    const pieces: (Uint8Array | undefined)[] = new Array(size);
    const kinds = new Uint8Array(size);
    const byteOf = byteAlphabet();
    for (const token in vocab) {
      const id = vocab[token];
      if (!isId(id)) continue;
      const bytes = new Uint8Array(token.length);
      for (let i = 0; i < token.length; i++) {
        const b = byteOf[token.charCodeAt(i)] ?? -1;
        // A character outside the byte alphabet: the table cannot say what the tokenizer makes of it.
        if (b < 0) return null;
        bytes[i] = b;
      }
      pieces[id] = bytes;
      kinds[id] = TokenKind.Vocab;
    }
    for (const t of added) {
      if (!isId(t.id) || typeof t.content !== "string") return null;
      pieces[t.id] = UTF8_ENCODER.encode(t.content);
      kinds[t.id] = t.special === true ? TokenKind.Special : TokenKind.Added;
    }
    const offsets = new Int32Array(size + 1);
    for (let id = 0; id < size; id++) offsets[id + 1] = offsets[id]! + (pieces[id]?.length ?? 0);
    const bytes = new Uint8Array(offsets[size]!);
    for (let id = 0; id < size; id++) if (pieces[id]) bytes.set(pieces[id]!, offsets[id]);
    return new TokenByteTable(bytes, offsets, kinds);
  }

  /** Compares with the tokenizer's decode on deterministic sample sequences. */
  #agreesWith(reference: ReferenceDecode): boolean {
    const special: number[] = [];
    for (let id = 0; id < this.size; id++) if (this.#kinds[id]! >= TokenKind.Added) special.push(id);
    let state = 0x9e3779b9;
    const random = (n: number): number => {
      state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
      return state % n;
    };
    const samples: number[][] = [special];
    for (let s = 0; s < 48; s++) {
      const ids: number[] = [];
      for (let i = 0; i < 12; i++) {
        const r = random(16);
        // Mostly vocabulary tokens; some added tokens and ids past the table mixed in.
        ids.push(
          r === 0 && special.length > 0
            ? special[random(special.length)]!
            : r === 1
            ? this.size + random(64)
            : random(this.size),
        );
      }
      samples.push(ids);
    }
    for (const ids of samples) {
      for (const skip of [false, true]) {
        if (ids.length > 0 && this.decode(ids, skip) !== reference(ids, { skipSpecialTokens: skip })) return false;
      }
    }
    return true;
  }
}

interface AddedToken {
  id?: unknown;
  content?: unknown;
  special?: unknown;
}

const EMPTY = new Uint8Array(0);
const UTF8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const UTF8_ENCODER = new TextEncoder();

function isId(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 0;
}

/**
 * GPT-2's byte alphabet, reversed (UTF-16 code unit -> byte, -1 where none): the printable Latin-1
 * bytes stand for themselves and the other 68 bytes for the code points from U+0100 up, in order.
 */
function byteAlphabet(): Int16Array {
  const byteOf = new Int16Array(256 + 68).fill(-1);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byteOf[printable ? b : next++] = b;
  }
  return byteOf;
}
