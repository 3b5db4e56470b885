// A fast message check may only vouch for what its zod schema accepts unchanged: this runs every
// mutation of every sample through the check and, where it accepts, through the schema too.
import { expect } from "bun:test";
import type { FastCheck } from "../../lib/protocol/messages.ts";
import { messageSchema, type MessageType } from "../../lib/protocol/messages.ts";

type Fields = Record<string, unknown>;

/** Counts of the mutations the checks accepted (each also accepted unchanged by its schema) and refused. */
export function fastCheckVerdicts(
  checks: Readonly<Record<string, FastCheck>>,
  samples: readonly Fields[],
  mutations: (m: Fields) => Fields[],
): { accepted: number; rejected: number } {
  let accepted = 0, rejected = 0;
  for (const m of samples) {
    for (const v of mutations(m)) {
      if (!checks[m.type as string]!(v)) {
        rejected++;
        continue;
      }
      accepted++;
      const parsed = messageSchema(m.type as MessageType).safeParse(v);
      expect({ message: v, ok: parsed.success }).toEqual({ message: v, ok: true });
      expect(parsed.data).toEqual(v as never);
    }
  }
  return { accepted, rejected };
}
