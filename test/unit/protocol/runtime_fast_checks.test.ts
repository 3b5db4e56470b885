// The hand-written checks of the per-step runtime messages (lib/protocol/runtime_fast_checks.ts)
// may only vouch for what the zod schemas accept unchanged: the samples pass them, and no mutation
// passes them unless its schema accepts it too without stripping a field.
import { expect, test } from "bun:test";
import { validateMessage } from "../../../lib/protocol/message_codec.ts";
import { fastCheckVerdicts, oneFieldMutations } from "../../helpers/fast_check_soundness.ts";
import { RUNTIME_FAST_CHECKS } from "../../../lib/protocol/runtime_fast_checks.ts";

type Fields = Record<string, unknown>;
const BAD_VALUES: unknown[] = [undefined, null, -1, 1.5, NaN, Infinity, 2 ** 60, "", "x", true, [], [1, -1], [0.5], {}];

const samples: Fields[] = [
  {
    type: "token_delta",
    items: [{ requestId: "r1", tokenIds: [4, 5], text: "ab" }, { requestId: "r2", tokenIds: [], text: "" }],
  },
  { type: "token_delta", id: 3, items: [] },
  { type: "heartbeat", seq: 7, sentAt: 1796319222770.3, busyMs: 4.5 },
  { type: "heartbeat", seq: 0, sentAt: 0 },
];

/** Copies of `m` with one field (top level, or of its first item) replaced, deleted or added. */
function mutations(m: Fields): Fields[] {
  const out = [...oneFieldMutations(m, BAD_VALUES), { ...m, extra: 1 }];
  const item = (m.items as Fields[] | undefined)?.[0];
  if (item) {
    for (const v of oneFieldMutations(item, BAD_VALUES)) out.push({ ...m, items: [v] });
    out.push({ ...m, items: [{ ...item, logprobs: [-0.5, -1] }] }, { ...m, items: [item, null] });
  }
  return out;
}

test("every sample passes its fast check", () => {
  for (const m of samples) expect(RUNTIME_FAST_CHECKS[m.type as string]!(m)).toBe(true);
});

test("a mutation the fast check accepts is one its schema accepts unchanged", () => {
  const { accepted, rejected } = fastCheckVerdicts(RUNTIME_FAST_CHECKS, samples, mutations);
  expect(accepted).toBeGreaterThan(3);
  expect(rejected).toBeGreaterThan(accepted);
});

test("what the fast check refuses still gets the schema's verdict", () => {
  const withLogprobs = validateMessage({
    type: "token_delta",
    items: [{ requestId: "r1", tokenIds: [4], text: "a", logprobs: [-0.25] }],
  });
  expect(withLogprobs.ok).toBe(true);
  const bad = validateMessage({ type: "token_delta", items: [{ requestId: "r1", tokenIds: [4, -2], text: "a" }] });
  expect(!bad.ok && bad.error.details.field).toBe("items.0.tokenIds.1");
});
