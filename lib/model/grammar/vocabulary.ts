/**
 * The vocabulary xgrammar needs to map grammar bytes to token ids: every token's raw string from
 * tokenizer.json (its model vocabulary and added tokens, by id), how those strings encode bytes,
 * the model's vocabulary size (its logits; rows past the tokenizer's tokens are never allowed) and
 * the stop tokens that end a constrained output. The encoding is read as xgrammar's
 * TokenizerInfo.from_huggingface reads it: a ByteLevel decoder (GPT-2 style, Qwen, Llama 3) is
 * "byte_level", a ByteFallback decoder (Llama 2 style sentencepiece) "byte_fallback", else "raw".
 * @module
 */
import { ModelFormatError } from "../../core/errors.ts";

/** How token strings encode bytes. */
export type VocabType = "byte_level" | "byte_fallback" | "raw";

/** What xgrammar's TokenizerInfo is built from. */
export interface GrammarVocabulary {
  /** Raw token strings by id ("" where the tokenizer has no token). */
  tokens: string[];
  vocabType: VocabType;
  /** The model's vocabulary size (its logit rows); tokenizer tokens past it are dropped. */
  vocabSize: number;
  /** Tokens that end a constrained output (the model's EOS ids inside the vocabulary). */
  stopTokenIds: readonly number[];
}

interface TokenizerJson {
  model?: { type?: string; vocab?: Record<string, number> | Array<[string, number]> };
  added_tokens?: Array<{ id: number; content: string }>;
  decoder?: { type?: string; decoders?: Array<{ type?: string }> } | null;
}

function decoderTypes(d: TokenizerJson["decoder"]): string[] {
  if (!d) return [];
  return [d.type ?? "", ...(d.decoders ?? []).map((x) => x.type ?? "")];
}

/** The vocabulary of a parsed tokenizer.json for a model of `vocabSize` logits. */
export function grammarVocabulary(
  tokenizerJson: object,
  vocabSize: number,
  eosTokenIds: readonly number[],
): GrammarVocabulary {
  if (!Number.isInteger(vocabSize) || vocabSize <= 0) throw new RangeError(`vocabSize must be > 0, got ${vocabSize}`);
  const json = tokenizerJson as TokenizerJson;
  const vocab = json.model?.vocab;
  if (!vocab) throw new ModelFormatError("tokenizer.json has no model.vocab: cannot build a grammar vocabulary");
  const tokens: string[] = [];
  // Unigram models list [piece, score] pairs by id; BPE and WordPiece map piece -> id.
  const entries: Array<[string, number]> = Array.isArray(vocab)
    ? vocab.map(([piece], id) => [piece, id])
    : Object.entries(vocab);
  for (const [piece, id] of entries) if (id < vocabSize) tokens[id] = piece;
  for (const t of json.added_tokens ?? []) if (t.id < vocabSize) tokens[t.id] = t.content;
  for (let i = 0; i < tokens.length; i++) tokens[i] ??= "";
  const types = decoderTypes(json.decoder);
  const vocabType: VocabType = types.includes("ByteLevel")
    ? "byte_level"
    : types.includes("ByteFallback")
    ? "byte_fallback"
    : "raw";
  return { tokens, vocabType, vocabSize, stopTokenIds: eosTokenIds.filter((id) => id < vocabSize) };
}
