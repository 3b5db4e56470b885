/**
 * Validation of the calibration files (engine profiles, sweeps) against their zod schemas, with
 * errors that name each bad field by its path, the value found there and the file.
 * @module
 */
import type { z } from "zod";

/** `value` checked against `schema`; a RangeError lists every bad field ("fit.range.maxDecodeSeqs" = -1: ...). */
export function parseJsonField<T extends z.ZodType>(schema: T, value: unknown, source: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const problems = r.error.issues.map((issue) => {
    const path = issue.path.map(String).join(".");
    if (issue.code === "unrecognized_keys") {
      const where = path === "" ? "" : ` in "${path}"`;
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}${where}`;
    }
    const got = issue.path.reduce<unknown>((v, k) => (v as Record<PropertyKey, unknown> | undefined)?.[k], value);
    return `"${path}" = ${JSON.stringify(got) ?? "undefined"}: ${issue.message}`;
  });
  throw new RangeError(`${source}: invalid field${problems.length > 1 ? "s" : ""}: ${problems.join("; ")}`);
}
