// Trace profile on hand-made traces (block size 4): which requests share and how many tokens.
import { expect, test } from "bun:test";
import { profilePrompts, profileTrace } from "../../../bench/trace_profile.ts";

test("counts only complete, contiguous, previously seen blocks from block zero", () => {
  const a = [1, 2, 3, 4, 5, 6, 7, 8, 9]; // blocks [1..4] [5..8], tail 9
  const b = [1, 2, 3, 4, 5, 6, 7, 0, 9]; // shares block 1 only
  const c = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2]; // shares both blocks of a
  const d = [9, 9, 9, 9, 5, 6, 7, 8]; // second block equals a's, but chained after another parent
  const e = [1, 2, 3]; // no complete block
  const p = profilePrompts([a, b, c, d, e], 4);
  expect(p.shareableRequests).toBe(2);
  expect(p.shareableBlocks).toBe(3);
  expect(p.shareableTokens).toBe(12);
  expect(p.promptTokens).toBe(9 + 9 + 10 + 8 + 3);
  expect(p.requestShare).toBeCloseTo(2 / 5, 12);
  expect(p.tokenShare).toBeCloseTo(12 / 39, 12);
  expect(p.completeBlocks).toBe(2 + 2 + 2 + 2 + 0);
  expect(p.uniqueBlocks).toBe(2 + 1 + 0 + 2);
});

test("order matters: a request only reuses what came before it", () => {
  const long = [1, 2, 3, 4, 5, 6, 7, 8];
  const short = [1, 2, 3, 4];
  expect(profilePrompts([long, short], 4).shareableTokens).toBe(4);
  expect(profilePrompts([short, long], 4).shareableTokens).toBe(4);
  expect(profilePrompts([long, long], 4).tokenShare).toBeCloseTo(0.5, 12);
});

test("text prompts need a tokenizer; one is used when given", () => {
  const reqs = [{ id: "a", prompt: "x y z w", maxTokens: 1 }, { id: "b", prompt: "x y z w q", maxTokens: 1 }];
  expect(() => profileTrace(reqs, 2)).toThrow(/request a has a text prompt/);
  const encode = (t: string) => t.split(" ").map((s) => s.charCodeAt(0));
  expect(profileTrace(reqs, 2, encode).shareableTokens).toBe(4);
});
