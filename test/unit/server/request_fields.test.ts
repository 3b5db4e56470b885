// The request-field table (lib/server/request_fields.ts) against the schemas and the app: each
// schema has exactly the fields its rows list, every refused row's example value is a 400 naming
// the field (and the engine never sees the request), no row says "ignored", and README's server
// section is the table as rendered.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createApp } from "../../../lib/server/app.ts";
import { fieldsOf, REQUEST_FIELDS, requestFieldsMarkdown } from "../../../lib/server/request_fields.ts";
import { chatCompletionRequestSchema, completionRequestSchema } from "../../../lib/server/schemas.ts";
import { FakeEngine } from "./fake_engine.ts";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

// deno-lint-ignore no-explicit-any
type Json = any;

const ENDPOINTS = [
  { name: "completions", path: "/v1/completions", schema: completionRequestSchema, base: { prompt: "x" } },
  {
    name: "chat",
    path: "/v1/chat/completions",
    schema: chatCompletionRequestSchema,
    base: { messages: [{ role: "user", content: "x" }] },
  },
] as const;

describe("the table and the schemas agree", () => {
  for (const e of ENDPOINTS) {
    test(`${e.name}: the schema's fields are the table's rows`, () => {
      const schemaFields = Object.keys(e.schema.shape).sort();
      const tableFields = [...new Set(fieldsOf(e.name).map((r) => r.field))].sort();
      expect(schemaFields).toEqual(tableFields);
    });
  }

  test("no row says ignored; every refused row has an example", () => {
    for (const r of REQUEST_FIELDS) {
      expect(`${r.field} ${r.note}`).not.toMatch(/\bignored\b/i);
      if (r.verdict === "refused") expect(r.refusedExample).toBeDefined();
    }
  });
});

describe("every refused field is a 400 naming it", () => {
  const engine = new FakeEngine();
  const app = createApp({ engine, servedModelName: "served" });
  for (const e of ENDPOINTS) {
    for (const r of fieldsOf(e.name).filter((r) => r.verdict === "refused")) {
      test(`${e.name}: ${r.field} = ${JSON.stringify(r.refusedExample)}`, async () => {
        const before = engine.requests.length;
        const res = await app.fetch(
          new Request(`http://x${e.path}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ ...e.base, [r.field]: r.refusedExample }),
          }),
        );
        expect(res.status).toBe(400);
        const body: Json = await res.json();
        expect(body.error).toMatchObject({ type: "BadRequestError", code: 400, param: r.field });
        expect(body.error.message).toContain(r.field);
        expect(engine.requests.length).toBe(before);
      });
    }
  }

  test("an unknown field is a 400 naming it on every body route", async () => {
    for (
      const [path, base] of [...ENDPOINTS.map((e) => [e.path, e.base] as const), ["/tokenize", { prompt: "x" }], [
        "/detokenize",
        { tokens: [1] },
      ]] as const
    ) {
      const res = await app.fetch(
        new Request(`http://x${path}`, { method: "POST", body: JSON.stringify({ ...base, frobnicate: 1 }) }),
      );
      expect(res.status).toBe(400);
      const body: Json = await res.json();
      expect(body.error.param).toBe("frobnicate");
      expect(body.error.message).toContain("Unknown field 'frobnicate'");
    }
  });
});

test("README's server section is the table, as requestFieldsMarkdown renders it", () => {
  const readme = readFileSync(`${ROOT}README.md`, "utf8");
  const begin = "<!-- request-fields:begin -->\n", end = "\n<!-- request-fields:end -->";
  const at = readme.indexOf(begin);
  expect(at).toBeGreaterThanOrEqual(0);
  expect(readme.slice(at + begin.length, readme.indexOf(end, at))).toBe(requestFieldsMarkdown());
});
