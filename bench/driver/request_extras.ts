/**
 * Request extras the serving benchmark mixes into a share of its requests, to measure what they
 * cost the requests without them: top logprobs, a short structured output (a JSON object of enums
 * and small integers) and a long one (an array of 100 to 120 one-word enum items). Structured
 * outputs go as vLLM's `structured_outputs` with `disable_any_whitespace` (a random-weight model
 * would otherwise fill the output with whitespace wherever JSON allows it), so the grammar alone
 * ends them. Each schema is a zod schema: the JSON Schema sent is made from it, and every output is
 * checked against it.
 * @module
 */
import { z } from "zod";
import { SeededRandom } from "../workloads/prng.ts";

/** The extras, by the name `--extras` takes. */
export const EXTRA_KINDS = ["logprobs", "json-schema", "long-schema"] as const;
export type ExtraKind = typeof EXTRA_KINDS[number];

/** Top alternatives asked for per position by the logprobs extra. */
const TOP_LOGPROBS = 5;
/** Output cap of the long structured output: an item costs two or three tokens. */
const LONG_SCHEMA_MAX_TOKENS = 800;
/** Output cap of the short one: about 20 tokens end it, whatever the workload's own cap. */
const SHORT_SCHEMA_MAX_TOKENS = 64;

const SHORT_ANSWER = z.object({
  color: z.enum(["red", "green", "blue", "yellow"]),
  size: z.number().int().min(0).max(9),
  ok: z.boolean(),
}).strict();

const LONG_ANSWER = z.array(z.enum(["alpha", "beta", "gamma", "delta"])).min(100).max(120);

/** What one extra adds to a request, and how its output is judged. */
export interface RequestExtra {
  kind: ExtraKind;
  /** Fields merged into the /v1/completions body. */
  body: Record<string, unknown>;
  /** The problem with a finished output's text, or undefined when it is what was asked for (unset: not checked). */
  check?(text: string): string | undefined;
}

function schemaExtra(kind: ExtraKind, schema: z.ZodType, extraBody: Record<string, unknown> = {}): RequestExtra {
  const { $schema: _, ...json } = z.toJSONSchema(schema) as Record<string, unknown>;
  return {
    kind,
    body: { ...extraBody, structured_outputs: { json, disable_any_whitespace: true } },
    check(text) {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (e) {
        return `not JSON: ${(e as Error).message}`;
      }
      const r = schema.safeParse(value);
      return r.success ? undefined : `does not fit the schema: ${r.error.issues[0]?.message}`;
    },
  };
}

/** The extra of `kind`. */
export function requestExtra(kind: ExtraKind): RequestExtra {
  switch (kind) {
    case "logprobs":
      return { kind, body: { logprobs: TOP_LOGPROBS } };
    case "json-schema":
      return schemaExtra(kind, SHORT_ANSWER, { max_tokens: SHORT_SCHEMA_MAX_TOKENS });
    case "long-schema":
      return schemaExtra(kind, LONG_ANSWER, { max_tokens: LONG_SCHEMA_MAX_TOKENS });
  }
}

/** Parses `--extras KIND`; throws naming the value and the kinds. */
export function parseExtraKind(value: string): ExtraKind {
  if (!(EXTRA_KINDS as readonly string[]).includes(value)) {
    throw new RangeError(`--extras must be one of ${EXTRA_KINDS.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as ExtraKind;
}

/** Which of `n` requests carry the extra: each with probability `share`, drawn from `seed`. */
export function pickExtras(n: number, share: number, seed: number): boolean[] {
  if (!(share > 0 && share <= 1)) throw new RangeError(`--extras-share must be in (0, 1], got ${share}`);
  const rand = new SeededRandom(seed);
  return Array.from({ length: n }, () => rand.next() < share);
}
