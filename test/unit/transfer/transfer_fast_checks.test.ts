// The hand-written checks of the transfer messages (lib/transfer/transfer_fast_checks.ts) may only
// ever vouch for what the zod schemas accept unchanged: every valid sample passes them, and no
// mutation of a sample passes them unless its schema accepts it too, without stripping a field.
import { expect, test } from "bun:test";
import { transferSampleMessages } from "../../../lib/transfer/codec_warmup.ts";
import { validateMessage } from "../../../lib/protocol/message_codec.ts";
import { fastCheckVerdicts, oneFieldMutations } from "../../helpers/fast_check_soundness.ts";
import { TRANSFER_FAST_CHECKS } from "../../../lib/transfer/transfer_fast_checks.ts";

type Fields = Record<string, unknown>;
const BAD_VALUES: unknown[] = [
  undefined,
  null,
  -1,
  1.5,
  NaN,
  Infinity,
  -Infinity,
  2 ** 60,
  "",
  "x",
  true,
  [],
  [1, -1],
  [0.5],
  {},
  { a: 1 },
];

/** Copies of `m` with one field (top level, or of its first block) replaced, deleted or added. */
function mutations(m: Fields): Fields[] {
  const out = [...oneFieldMutations(m, BAD_VALUES), { ...m, extra: 1 }];
  const blocks = m.blocks as Fields[] | undefined;
  if (blocks) {
    const b = blocks[0]!;
    for (const v of oneFieldMutations(b, BAD_VALUES)) out.push({ ...m, blocks: [v] });
    out.push({ ...m, blocks: [{ ...b, extra: 1 }] }, { ...m, blocks: [] }, { ...m, blocks: [b, null] });
  }
  return out;
}

const samples = transferSampleMessages().filter((m) => m.type in TRANSFER_FAST_CHECKS) as unknown as Fields[];

test("every transfer message type has a fast check, and every sample passes it", () => {
  for (
    const t of [
      "transfer_prepare",
      "transfer_execute",
      "transfer_publish",
      "transfer_finalize",
      "transfer_abort",
      "transfer_ack",
    ]
  ) expect(Object.hasOwn(TRANSFER_FAST_CHECKS, t)).toBe(true);
  for (const m of samples) expect(TRANSFER_FAST_CHECKS[m.type as string]!(m)).toBe(true);
});

test("a mutation the fast check accepts is one its schema accepts unchanged", () => {
  const { accepted, rejected } = fastCheckVerdicts(TRANSFER_FAST_CHECKS, samples, mutations);
  // Optional fields dropped are still valid; most mutations are not.
  expect(accepted).toBeGreaterThan(10);
  expect(rejected).toBeGreaterThan(accepted);
});

test("what the fast check refuses still gets the schema's error, naming the field", () => {
  const prepare = samples.find((m) => m.type === "transfer_prepare")!;
  const r = validateMessage({ ...prepare, blocks: [{ ...(prepare.blocks as Fields[])[0], srcBlock: -3 }] });
  expect(!r.ok && r.error.details.field).toBe("blocks.0.srcBlock");
  const ack = samples.find((m) => m.type === "transfer_ack")!;
  const a = validateMessage({ ...ack, phase: "teleport" });
  expect(!a.ok && a.error.details.field).toBe("phase");
  // An unknown field is stripped by the schema, not passed through.
  const extra = validateMessage({ ...ack, extra: 1 });
  expect(extra.ok && "extra" in extra.message).toBe(false);
});
