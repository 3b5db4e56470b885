/**
 * How many characters of input text one token can cover at most, read from a Hugging Face
 * tokenizer.json. The server multiplies it by max_model_len to refuse, before tokenizing, a text
 * that cannot fit the context: the bound must never be below what a real prompt needs, so every
 * tokenizer feature that lets one token swallow an unbounded run of input makes it Infinity.
 * @module
 */

/**
 * Most input characters (UTF-16 units) Unicode normalization folds into one: NFC/NFKC compose at
 * most a base and three marks into one character (e.g. U+1FAF), so a normalized token of k units
 * covers at most 4k input units.
 */
export const NORMALIZATION_CONTRACTION = 4;

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The factor by which `normalizer` can shrink text (1: never; Infinity: unbounded, e.g. stripping). */
function normalizerContraction(normalizer: unknown): number {
  if (normalizer === null || normalizer === undefined) return 1;
  if (!isObject(normalizer)) return Infinity;
  switch (normalizer.type) {
    case "Sequence": {
      const parts = Array.isArray(normalizer.normalizers) ? normalizer.normalizers : [];
      return parts.reduce((f: number, n) => f * normalizerContraction(n), 1);
    }
    case "NFC":
    case "NFD":
    case "NFKC":
    case "NFKD":
      return NORMALIZATION_CONTRACTION;
    case "Lowercase":
    case "Prepend":
      return 1;
    case "Replace": {
      // A replacement shorter than its pattern shrinks text by their ratio; an empty one deletes.
      const pattern = isObject(normalizer.pattern) ? normalizer.pattern.String : undefined;
      const content = normalizer.content;
      if (typeof pattern !== "string" || typeof content !== "string" || content.length === 0) return Infinity;
      return Math.max(1, pattern.length / content.length);
    }
    default:
      // Strip, StripAccents, BertNormalizer (drops control characters), Precompiled, ...: can delete.
      return Infinity;
  }
}

/** False when `pre` can drop input (whitespace splitters, a Split that removes its matches). */
function preTokenizerKeepsText(pre: unknown): boolean {
  if (pre === null || pre === undefined) return true;
  if (!isObject(pre)) return false;
  switch (pre.type) {
    case "Sequence":
      return (Array.isArray(pre.pretokenizers) ? pre.pretokenizers : []).every(preTokenizerKeepsText);
    case "Split":
      return pre.behavior !== "Removed";
    case "ByteLevel":
    case "Metaspace":
    case "Digits":
    case "Punctuation":
    case "UnicodeScripts":
      return true;
    default:
      return false;
  }
}

function longestKey(vocab: unknown): number {
  let max = 0;
  if (Array.isArray(vocab)) {
    // Unigram: [[piece, score], ...]
    for (const entry of vocab) {
      if (Array.isArray(entry) && typeof entry[0] === "string") max = Math.max(max, entry[0].length);
    }
  } else if (isObject(vocab)) {
    for (const k of Object.keys(vocab)) max = Math.max(max, k.length);
  }
  return max;
}

/**
 * Most input characters one token of this tokenizer can stand for: the longest vocabulary entry
 * or added token, times the normalizer's contraction; Infinity when no bound holds (unknown model
 * types, fused unknown runs, added tokens that strip surrounding whitespace, normalizers or
 * pre-tokenizers that delete text).
 */
export function maxInputCharsPerToken(tokenizerJson: unknown): number {
  if (!isObject(tokenizerJson) || !isObject(tokenizerJson.model)) return Infinity;
  const model = tokenizerJson.model;
  // Byte-level entries are one character per byte, so their length bounds the decoded text too.
  if (model.type !== "BPE" && model.type !== "Unigram") return Infinity;
  // Without byte fallback, a fused run of unknown characters is one token however long it is.
  if (model.type === "BPE" && model.fuse_unk === true && model.byte_fallback !== true && model.unk_token != null) {
    return Infinity;
  }
  if (model.type === "Unigram" && model.byte_fallback !== true && model.unk_id != null) return Infinity;
  if (!preTokenizerKeepsText(tokenizerJson.pre_tokenizer)) return Infinity;
  let longest = longestKey(model.vocab);
  const added = Array.isArray(tokenizerJson.added_tokens) ? tokenizerJson.added_tokens : [];
  for (const t of added) {
    if (!isObject(t) || typeof t.content !== "string") continue;
    if (t.lstrip === true || t.rstrip === true) return Infinity;
    longest = Math.max(longest, t.content.length);
  }
  if (longest === 0) return Infinity;
  return longest * normalizerContraction(tokenizerJson.normalizer);
}
