// The grammar module against the real Qwen3 tokenizer of the tiny test model: the vocabulary it
// builds for xgrammar, JSON schema, regex, choice and EBNF grammars matched token by token, the
// mask as allowed or banned lists, the compiled-grammar cache, and invalid specs failing with
// xgrammar's message (in the checker thread, which survives them).
import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { GrammarError } from "../../../lib/core/errors.ts";
import { choiceGrammar, type GrammarSpec } from "../../../lib/core/grammar_spec.ts";
import { checkGrammar } from "../../../lib/model/grammar/grammar_checker.ts";
import { GrammarEngine, type GrammarMatcher } from "../../../lib/model/grammar/grammar_engine.ts";
import { tokenMaskOf } from "../../../lib/model/grammar/token_mask.ts";
import { grammarVocabulary } from "../../../lib/model/grammar/vocabulary.ts";
import type { ModelTokenizer } from "../../../lib/model/tokenizer.ts";
import { tinyModelDir, tinyTokenizer } from "../../helpers/tiny_model_dir.ts";

const VOCAB = 151936;
let tok: ModelTokenizer;
let engine: GrammarEngine;

beforeAll(async () => {
  tok = await tinyTokenizer();
  const json = JSON.parse(readFileSync(join(await tinyModelDir(), "tokenizer.json"), "utf8"));
  engine = await GrammarEngine.create(grammarVocabulary(json, VOCAB, tok.eosTokenIds), { cacheSize: 2 });
});

function allows(m: GrammarMatcher, token: number): boolean {
  const mask = m.mask();
  return mask.allowed ? mask.allowed.includes(token) : !mask.banned!.includes(token);
}

/** Feeds `text`'s tokens, each checked against the mask first; true when all were accepted. */
function feed(m: GrammarMatcher, text: string): boolean {
  for (const t of tok.encode(text, { addSpecialTokens: false })) {
    if (!allows(m, t)) return false;
    if (!m.accept(t)) throw new Error(`token ${t} allowed by the mask but rejected`);
  }
  return true;
}

/** Whether the grammar accepts exactly `text` then EOS. */
function matches(spec: GrammarSpec, text: string): boolean {
  const m = engine.matcher(spec);
  try {
    if (!feed(m, text)) return false;
    const eos = tok.eosTokenIds[0]!;
    return allows(m, eos) && m.accept(eos) && m.terminated;
  } finally {
    m.dispose();
  }
}

test("the vocabulary is Qwen3's byte-level BPE, padded to the model's size, EOS as the stop token", async () => {
  const json = JSON.parse(readFileSync(join(await tinyModelDir(), "tokenizer.json"), "utf8"));
  const v = grammarVocabulary(json, VOCAB, tok.eosTokenIds);
  expect(v.vocabType).toBe("byte_level");
  expect(v.tokens[tok.encode(" hello", { addSpecialTokens: false })[0]!]).toBe("Ġhello");
  expect(v.tokens[tok.eosTokenIds[0]!]).toBe("<|im_end|>");
  expect(v.stopTokenIds).toEqual(tok.eosTokenIds);
  // A model with a smaller head: tokens and stop ids past it are dropped.
  const small = grammarVocabulary(json, 4096, tok.eosTokenIds);
  expect(small.tokens.length).toBe(4096);
  expect(small.stopTokenIds).toEqual([]);
});

describe("matching", () => {
  test("JSON schema", () => {
    const spec: GrammarSpec = {
      kind: "json_schema",
      text: JSON.stringify({
        type: "object",
        properties: { a: { type: "integer" }, b: { enum: ["x", "y"] } },
        required: ["a", "b"],
        additionalProperties: false,
      }),
    };
    expect(matches(spec, '{"a": 12, "b": "x"}')).toBe(true);
    expect(matches(spec, '{ "a" : -3 ,\n "b":"y" }')).toBe(true); // any whitespace, as vLLM
    expect(matches(spec, '{"a": "12", "b": "x"}')).toBe(false);
    expect(matches(spec, '{"a": 1}')).toBe(false);
    expect(matches(spec, '{"a": 1, "b": "x", "c": 2}')).toBe(false);
    const compact = { ...spec, disableAnyWhitespace: true };
    expect(matches(compact, '{"a": 12, "b": "x"}')).toBe(true);
    expect(matches(compact, '{ "a": 12, "b": "x"}')).toBe(false);
  });

  test("json_object takes any object, not arrays or scalars", () => {
    const spec: GrammarSpec = { kind: "json_object", text: "" };
    expect(matches(spec, '{"k": [1, {"z": null}]}')).toBe(true);
    expect(matches(spec, "[1, 2]")).toBe(false);
    expect(matches(spec, "3")).toBe(false);
  });

  test("regex", () => {
    const spec: GrammarSpec = { kind: "regex", text: "[a-c]{2}-\\d{1,3}" };
    expect(matches(spec, "ab-7")).toBe(true);
    expect(matches(spec, "cc-123")).toBe(true);
    expect(matches(spec, "ad-1")).toBe(false);
    expect(matches(spec, "ab-1234")).toBe(false);
  });

  test("choice, with quotes, backslashes and newlines in the choices", () => {
    const choices = ["yes", "no way", 'say "hi"', "back\\slash", "two\nlines", "café"];
    const spec: GrammarSpec = { kind: "ebnf", text: choiceGrammar(choices) };
    for (const c of choices) expect({ c, ok: matches(spec, c) }).toEqual({ c, ok: true });
    expect(matches(spec, "ye")).toBe(false);
    expect(matches(spec, "yes no")).toBe(false);
    expect(() => choiceGrammar([])).toThrow(RangeError);
  });

  test("EBNF grammar", () => {
    const spec: GrammarSpec = { kind: "ebnf", text: 'root ::= "(" num ("," num)* ")"\nnum ::= [0-9]+' };
    expect(matches(spec, "(1,22,333)")).toBe(true);
    expect(matches(spec, "(1,)")).toBe(false);
  });
});

test("the mask is the shorter list; a complete output allows only EOS", () => {
  const m = engine.matcher({ kind: "ebnf", text: choiceGrammar(["yes"]) });
  const first = m.mask();
  expect(first.allowed).toBeDefined();
  expect(first.allowed!.length).toBeLessThan(10);
  expect(feed(m, "yes")).toBe(true);
  expect([...m.mask().allowed!].sort()).toEqual([...tok.eosTokenIds].sort());
  m.dispose();
  const free = engine.matcher({ kind: "regex", text: '[^"]*' });
  expect(free.mask().banned).toBeDefined(); // most tokens are allowed: the banned list is sent
  expect(free.mask().banned!.length).toBeLessThan(VOCAB / 2);
  free.dispose();
});

test("prepareMask computes the mask mask() returns, the same as computed in place, at every token", async () => {
  const spec: GrammarSpec = {
    kind: "json_schema",
    text: '{"type": "object", "properties": {"a": {"type": "integer"}}}',
  };
  const fast = engine.matcher(spec);
  const slow = engine.matcher(spec);
  for (const t of tok.encode('{"a": 12}', { addSpecialTokens: false })) {
    await fast.prepareMask();
    expect(fast.mask()).toEqual(slow.mask());
    expect(fast.accept(t) && slow.accept(t)).toBe(true);
  }
  fast.dispose();
  slow.dispose();
});

test("tokenMaskOf picks the shorter list and ignores bits past the vocabulary", () => {
  const bits = new Int32Array(2);
  bits[0] = 0b1010;
  bits[1] = -1; // bits past 40 must be ignored
  expect(tokenMaskOf(bits, 40)).toEqual({ allowed: Int32Array.from([1, 3, 32, 33, 34, 35, 36, 37, 38, 39]) });
  bits[0] = ~0b1010; // most allowed: the banned list is shorter
  expect(tokenMaskOf(bits, 40)).toEqual({ banned: Int32Array.from([1, 3]) });
  expect(tokenMaskOf(new Int32Array([0b110]), 32)).toEqual({ allowed: new Int32Array([1, 2]) });
});

test("compiled grammars are cached by spec, least recently used out", () => {
  const specs: GrammarSpec[] = ["a", "b", "c"].map((c) => ({ kind: "ebnf", text: `root ::= "${c}"` }));
  for (const s of specs) engine.matcher(s).dispose();
  expect(engine.cachedGrammars).toBe(2);
  // A matcher outlives its grammar's eviction.
  const held = engine.matcher(specs[0]!);
  for (const s of specs.slice(1)) engine.matcher(s).dispose();
  expect(feed(held, "a")).toBe(true);
  held.dispose();
});

describe("invalid specs", () => {
  const bad: Array<[GrammarSpec, RegExp]> = [
    [{ kind: "json_schema", text: "{not json" }, /parse JSON/],
    [{ kind: "json_schema", text: '{"properties": {"a": {"$ref": "#/defs/none"}}}' }, /none/],
    [{ kind: "regex", text: "(ab" }, /regex|Regex/],
    [{ kind: "ebnf", text: "root ::= undefined_rule" }, /undefined_rule/],
    [{ kind: "ebnf", text: 'start ::= "a"' }, /root/],
  ];
  test("fail in the checker with xgrammar's message, and the checker keeps working", async () => {
    for (const [spec, message] of bad) {
      const err = await checkGrammar(spec).then(() => null, (e) => e);
      expect(err).toBeInstanceOf(GrammarError);
      expect(err.message).toMatch(message);
    }
    await checkGrammar({ kind: "json_schema", text: '{"type": "string"}' });
  });
});
