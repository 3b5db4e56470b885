// Structured outputs in the in-process engine on the CPU backend: a random-weight model's outputs
// under choice, regex, a JSON schema and any JSON object always satisfy the constraint, across
// seeds and temperatures and batched with unconstrained requests. The tiny model has the full
// Qwen3 vocabulary (EOS included); the engine model's 4096-token vocabulary lacks EOS, so there a
// complete grammar ends the output itself.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { GrammarError } from "../../lib/core/errors.ts";
import { choiceGrammar, type GrammarSpec } from "../../lib/core/grammar_spec.ts";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { tinyModelDir } from "../helpers/tiny_model_dir.ts";
import { engineTestModelDir } from "./llm_fixtures.ts";

let llm: LLM;
let small: LLM;
setDefaultTimeout(30_000);

beforeAll(async () => {
  llm = await LLM.create({ model: await tinyModelDir(), backend: "cpu", numBlocks: 64, maxModelLen: 256 });
  small = await LLM.create({ model: engineTestModelDir(), backend: "cpu", numBlocks: 64, maxModelLen: 256 });
});
afterAll(async () => {
  await llm?.shutdown();
  await small?.shutdown();
});

const SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 8 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    ok: { type: "boolean" },
    tag: { enum: ["x", "y"] },
  },
  required: ["name", "age", "ok", "tag"],
  additionalProperties: false,
};

/** The schema's rules, checked by hand (no JSON Schema validator is installed). */
function satisfiesSchema(v: unknown): boolean {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).sort();
  return JSON.stringify(keys) === JSON.stringify(["age", "name", "ok", "tag"]) &&
    typeof o.name === "string" && [...o.name].length <= 8 &&
    Number.isInteger(o.age) && (o.age as number) >= 0 && (o.age as number) <= 120 &&
    typeof o.ok === "boolean" && (o.tag === "x" || o.tag === "y");
}

// Compact JSON: with any whitespace allowed (vLLM's default) a random model mostly emits whitespace.
const json = (schema: object): GrammarSpec => ({
  kind: "json_schema",
  text: JSON.stringify(schema),
  disableAnyWhitespace: true,
});
const CHOICES = ["red", "green", "blue sky", 'q"uote'];

/** A complete output satisfies `ok`; one cut by max_tokens is checked by the caller's prefix rule. */
function expectOutput(out: RequestOutput, ok: (text: string) => boolean, prefix: (text: string) => boolean): void {
  if (out.finishReason === "stop") expect({ text: out.text, ok: ok(out.text) }).toEqual({ text: out.text, ok: true });
  else {
    expect(out.finishReason).toBe("length");
    expect({ text: out.text, prefix: prefix(out.text) }).toEqual({ text: out.text, prefix: true });
  }
}

test("choice, regex and a JSON schema hold across seeds and temperatures, batched with free requests", async () => {
  const regex = "[a-c]{2}-[0-9]{1,3}";
  const cases: Array<[GrammarSpec, (t: string) => boolean, (t: string) => boolean]> = [
    [
      { kind: "ebnf", text: choiceGrammar(CHOICES) },
      (t) => CHOICES.includes(t),
      (t) => CHOICES.some((c) => c.startsWith(t)),
    ],
    [{ kind: "regex", text: regex }, (t) => new RegExp(`^${regex}$`).test(t), () => true],
    [json(SCHEMA), (t) => satisfiesSchema(JSON.parse(t)), (t) => t.trimStart().startsWith("{")],
    [{ kind: "json_object", text: "", disableAnyWhitespace: true }, (t) => {
      const v = JSON.parse(t);
      return typeof v === "object" && v !== null && !Array.isArray(v);
    }, (t) => t.trimStart().startsWith("{")],
  ];
  let stops = 0;
  for (const temperature of [0, 1.2]) {
    const runs: Promise<RequestOutput[]>[] = [];
    for (const [spec] of cases) {
      runs.push(llm.generate(["Answer:", "x y z"], { maxTokens: 40, temperature, seed: 11, structuredOutput: spec }));
    }
    // Unconstrained requests in the same batches.
    const free = llm.generate(["Answer:", "x y z"], { maxTokens: 40, temperature, seed: 11 });
    const outs = await Promise.all(runs);
    outs.forEach((pair, i) => {
      for (const out of pair) {
        expectOutput(out, cases[i]![1], cases[i]![2]);
        if (out.finishReason === "stop") stops++;
      }
    });
    for (const out of await free) expect(out.tokenIds.length).toBeGreaterThan(0);
  }
  // choice and regex always complete within 40 tokens; the JSON ones mostly do.
  expect(stops).toBeGreaterThanOrEqual(12);
  expect(llm.engine.grammars.size).toBe(0);
});

test("several seeds of the JSON schema at temperature 1 complete and validate; any whitespace stays valid", async () => {
  const prompts = Array.from({ length: 6 }, (_, i) => `seed ${i}`);
  const outs = await llm.generate(prompts, { maxTokens: 64, temperature: 1, seed: 3, structuredOutput: json(SCHEMA) });
  for (const out of outs) expectOutput(out, (t) => satisfiesSchema(JSON.parse(t)), (t) => t.startsWith("{"));
  expect(outs.filter((o) => o.finishReason === "stop").length).toBeGreaterThanOrEqual(4);
  const spaced = await llm.generate(prompts.slice(0, 2), {
    maxTokens: 16,
    temperature: 1,
    seed: 3,
    structuredOutput: { kind: "json_schema", text: JSON.stringify(SCHEMA) },
  });
  // Whitespace between JSON tokens is allowed: whatever came is a prefix of an object.
  for (const out of spaced) expect(out.text).toMatch(/^\{\s*("(n(a(me?)?)?|a(ge?)?|ok?|t(ag?)?)?("\s*:?)?)?/);
});

test("with ignore_eos a complete grammar still ends the output, with finish_reason stop", async () => {
  const prompts = Array.from({ length: 4 }, (_, i) => `seed ${i}`);
  const outs = await llm.generate(prompts, {
    maxTokens: 64,
    temperature: 1,
    seed: 7,
    ignoreEos: true,
    structuredOutput: json(SCHEMA),
  });
  for (const out of outs) {
    expect(out.finishReason).toBe("stop");
    expect(satisfiesSchema(JSON.parse(out.text))).toBe(true);
  }
  expect(llm.engine.grammars.size).toBe(0);
});

test("without EOS in the model's vocabulary a complete grammar ends the output with finish_reason stop", async () => {
  const outs = await small.generate(["a", "b", "c"], {
    maxTokens: 32,
    temperature: 1,
    seed: 5,
    structuredOutput: { kind: "ebnf", text: choiceGrammar(["yes", "no"]) },
  });
  for (const out of outs) {
    expect(out.finishReason).toBe("stop");
    expect(["yes", "no"]).toContain(out.text);
  }
  expect(small.engine.grammars.size).toBe(0);
});

test("an invalid spec is a GrammarError naming xgrammar's complaint, and the engine keeps serving", async () => {
  await expect(llm.generate("x", { structuredOutput: { kind: "json_schema", text: "{bad" } })).rejects.toThrow(
    GrammarError,
  );
  await expect(llm.generate("x", { structuredOutput: { kind: "regex", text: "[a-" } })).rejects.toThrow(/Unclosed/);
  const [out] = await llm.generate("x", { maxTokens: 8, structuredOutput: { kind: "regex", text: "(ab)+" } });
  expect(out!.text).toMatch(/^(ab)*a?$/);
});

test("streaming yields the same constrained text as its deltas", async () => {
  let text = "";
  let last;
  for await (
    const d of llm.stream("s", {
      maxTokens: 24,
      temperature: 1,
      seed: 1,
      structuredOutput: { kind: "ebnf", text: choiceGrammar(CHOICES) },
    })
  ) {
    text += d.text;
    last = d;
  }
  expect(last!.finished).toBe(true);
  expect(CHOICES).toContain(text);
});
