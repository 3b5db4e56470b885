// Whether a fast message check only vouches for what its zod schema accepts unchanged: the
// mutations to try, and the loop that runs each through the check and, where it accepts, the schema.
import { expect } from "bun:test";
import { type FastCheck, messageSchema, type MessageType } from "../../lib/protocol/messages.ts";

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

/** Copies of `m` with one of its fields (but `type`) left out, or replaced by each of `badValues`. */
export function oneFieldMutations(m: Fields, badValues: readonly unknown[]): Fields[] {
  const out: Fields[] = [];
  for (const k of Object.keys(m)) {
    if (k === "type") continue;
    const { [k]: _, ...without } = m;
    out.push(without);
    for (const v of badValues) out.push({ ...m, [k]: v });
  }
  return out;
}
