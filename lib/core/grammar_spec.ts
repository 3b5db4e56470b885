/**
 * A structured-output constraint as it travels with a request's sampling parameters: a kind and
 * its text, small and serializable, so the server, the launcher and the workers all pass the same
 * value and a worker can cache what it compiled by it. vLLM's forms map onto it: `json` and
 * `response_format: json_schema` are "json_schema" (the schema as JSON text), `json_object` is
 * "json_object" (any JSON object), `regex` is "regex", `grammar` is "ebnf" (xgrammar's EBNF), and
 * `choice` becomes an "ebnf" alternation of string literals (as vLLM's xgrammar backend does).
 * @module
 */

/** What the text of a {@link GrammarSpec} is. */
export type GrammarKind = "json_schema" | "json_object" | "regex" | "ebnf";

/** A structured-output constraint. */
export interface GrammarSpec {
  kind: GrammarKind;
  /** The schema (JSON text), the pattern, or the grammar; empty for json_object. */
  text: string;
  /**
   * JSON kinds: whitespace only as one-line `json.dumps` puts it (vLLM's `disable_any_whitespace`);
   * by default any whitespace may come between JSON tokens, as in vLLM.
   */
  disableAnyWhitespace?: boolean;
}

/** Every kind, for validation. */
export const GRAMMAR_KINDS: readonly GrammarKind[] = ["json_schema", "json_object", "regex", "ebnf"];

/** Longest spec text accepted (a bound on what one request can make a worker compile). */
export const MAX_GRAMMAR_TEXT = 256 * 1024;

/** The cache key of a spec. */
export function grammarSpecKey(spec: GrammarSpec): string {
  return `${spec.kind}\u0000${spec.disableAnyWhitespace === true ? 1 : 0}\u0000${spec.text}`;
}

/**
 * The EBNF that accepts exactly one of `choices`: each choice a string literal, JSON's escapes
 * being a subset of what xgrammar's EBNF reads in a literal.
 */
export function choiceGrammar(choices: readonly string[]): string {
  if (choices.length === 0) throw new RangeError("choice must hold at least one string");
  const literals = choices.map((c) => {
    if (typeof c !== "string") throw new TypeError(`choice entries must be strings, got ${JSON.stringify(c)}`);
    return JSON.stringify(c);
  });
  return `root ::= ${literals.join(" | ")}`;
}

/** Checks a spec's shape (not whether it compiles: the grammar engine says that); throws TypeError/RangeError. */
export function checkGrammarSpec(spec: unknown): asserts spec is GrammarSpec {
  const s = spec as Partial<GrammarSpec> | null;
  if (typeof s !== "object" || s === null || !GRAMMAR_KINDS.includes(s.kind as GrammarKind)) {
    throw new TypeError(`structuredOutput must be {kind: ${GRAMMAR_KINDS.join(" | ")}, text}, got ${String(spec)}`);
  }
  if (typeof s.text !== "string") throw new TypeError(`structuredOutput.text must be a string`);
  if (s.text.length > MAX_GRAMMAR_TEXT) {
    throw new RangeError(`structuredOutput.text holds ${s.text.length} characters, at most ${MAX_GRAMMAR_TEXT}`);
  }
  if (s.disableAnyWhitespace !== undefined && typeof s.disableAnyWhitespace !== "boolean") {
    throw new TypeError(`structuredOutput.disableAnyWhitespace must be a boolean`);
  }
  if (s.kind !== "json_object" && s.text.length === 0) {
    throw new RangeError(`structuredOutput.text must not be empty for kind ${s.kind}`);
  }
}
