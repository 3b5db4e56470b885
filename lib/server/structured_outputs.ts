/**
 * The structured-output fields, as vLLM's OpenAI server has them: `response_format` (`text`,
 * `json_object`, `json_schema` with its schema) and `structured_outputs` (exactly one of `json`,
 * `regex`, `choice`, `grammar`, `json_object`, plus `disable_any_whitespace`). Both become the one
 * GrammarSpec the engine takes, and the spec is compiled once (on the grammar check thread) before
 * anything is dispatched, so a bad schema, regex or grammar is a 400 naming the field and carrying
 * xgrammar's message.
 * @module
 */
import { z } from "zod";
import { GrammarError } from "../core/errors.ts";
import { choiceGrammar, type GrammarSpec, MAX_GRAMMAR_TEXT } from "../core/grammar_spec.ts";
import { checkGrammar } from "../model/grammar/grammar_checker.ts";
import { badRequest } from "./errors.ts";

const jsonSchemaValue = z.union([z.record(z.string(), z.unknown()), z.boolean()], {
  error: "the schema must be a JSON object",
});

/** `response_format` (vLLM's ResponseFormat; `structural_tag` is refused). */
export const responseFormatSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text") }),
  z.strictObject({ type: z.literal("json_object") }),
  z.strictObject({
    type: z.literal("json_schema"),
    json_schema: z.strictObject({
      name: z.string(),
      description: z.string().nullish(),
      schema: jsonSchemaValue,
      strict: z.boolean().nullish(),
    }),
  }),
], {
  error: (issue) =>
    (issue.input as { type?: unknown } | null)?.type === "structural_tag"
      ? "response_format type structural_tag is not supported yet by LMPool"
      : 'response_format type must be "text", "json_object" or "json_schema"',
}).nullish();

/** `structured_outputs` (vLLM's StructuredOutputsParams, the fields LMPool implements). */
export const structuredOutputsSchema = z.strictObject({
  json: z.union([z.string(), z.record(z.string(), z.unknown())]).nullish(),
  regex: z.string().nullish(),
  choice: z.array(z.string()).min(1).nullish(),
  grammar: z.string().nullish(),
  json_object: z.literal(true, { error: "json_object accepts only true" }).nullish(),
  disable_any_whitespace: z.boolean().nullish(),
  // Which backend runs the constraint does not change its meaning: only xgrammar here.
  disable_fallback: z.boolean().nullish(),
}).superRefine((v, ctx) => {
  const kinds = (["json", "regex", "choice", "grammar", "json_object"] as const).filter((k) => v[k] != null);
  if (kinds.length !== 1) {
    ctx.addIssue({
      code: "custom",
      message: kinds.length === 0
        ? "You must use one kind of structured outputs constraint but none are specified"
        : `You can only use one kind of structured outputs constraint but multiple are specified: ${kinds.join(", ")}`,
      input: v,
    });
  }
}).nullish();

/** The structured-output fields of a parsed body. */
export interface StructuredOutputFields {
  response_format?: z.infer<typeof responseFormatSchema>;
  structured_outputs?: z.infer<typeof structuredOutputsSchema>;
}

/** The field a spec came from, for the 400 (`tools`: a forced tool choice's schema). */
export type StructuredOutputField = "response_format" | "structured_outputs" | "tools";

/** The body's constraint and the field it came from, or null for free text. */
export function grammarSpecOf(
  body: StructuredOutputFields,
): { spec: GrammarSpec; field: StructuredOutputField } | null {
  const rf = body.response_format, so = body.structured_outputs;
  if (rf != null && rf.type !== "text" && so != null) {
    throw badRequest("response_format and structured_outputs cannot both constrain the output", "response_format");
  }
  let found: { spec: GrammarSpec; field: StructuredOutputField } | null = null;
  if (rf?.type === "json_object") found = { spec: { kind: "json_object", text: "" }, field: "response_format" };
  else if (rf?.type === "json_schema") {
    found = { spec: { kind: "json_schema", text: JSON.stringify(rf.json_schema.schema) }, field: "response_format" };
  } else if (so != null) {
    const spec: GrammarSpec = so.json != null
      ? { kind: "json_schema", text: typeof so.json === "string" ? so.json : JSON.stringify(so.json) }
      : so.regex != null
      ? { kind: "regex", text: so.regex }
      : so.choice != null
      ? { kind: "ebnf", text: choiceGrammar(so.choice) }
      : so.grammar != null
      ? { kind: "ebnf", text: so.grammar }
      : { kind: "json_object", text: "" };
    if (so.disable_any_whitespace === true) spec.disableAnyWhitespace = true;
    found = { spec, field: "structured_outputs" };
  }
  if (found && found.spec.text.length > MAX_GRAMMAR_TEXT) {
    throw badRequest(
      `the constraint holds ${found.spec.text.length} characters, at most ${MAX_GRAMMAR_TEXT}`,
      found.field,
    );
  }
  if (found && found.spec.kind !== "json_object" && found.spec.text.length === 0) {
    throw badRequest("the constraint must not be empty", found.field);
  }
  return found;
}

/** Compiles the spec on the check thread; a 400 naming `field` with xgrammar's message when it fails. */
export async function checkStructuredOutput(spec: GrammarSpec, field: StructuredOutputField): Promise<void> {
  try {
    await checkGrammar(spec);
  } catch (e) {
    if (e instanceof GrammarError) throw badRequest(`Invalid ${field}: ${e.message}`, field);
    throw e;
  }
}
