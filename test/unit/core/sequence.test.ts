// A Sequence owns its prompt: later changes to the caller's array do not reach it, and generated
// tokens extend tokenIds and the block hashes, never the prompt.
import { expect, test } from "bun:test";
import { prefixBlockHashes } from "../../../lib/core/block_hash.ts";
import { resolveSamplingParams } from "../../../lib/core/sampling_params.ts";
import { Sequence } from "../../../lib/core/sequence.ts";

test("a Sequence copies its prompt; appended tokens extend tokenIds and the block hashes only", () => {
  const prompt = Array.from({ length: 10 }, (_, i) => i + 1);
  const s = new Sequence({
    requestId: "r",
    promptTokenIds: prompt,
    params: resolveSamplingParams({ maxTokens: 4 }),
    blockSize: 4,
  });
  prompt[0] = 999;
  prompt.push(7);
  expect(s.promptTokenIds).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  expect(s.blockHashes).toEqual(prefixBlockHashes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4));
  s.appendToken(11, -0.5, 1);
  s.appendToken(12, -0.5, 2);
  expect(s.promptTokenIds).toHaveLength(10);
  expect(s.outputTokenIds).toEqual([11, 12]);
  expect(s.blockHashes).toEqual(prefixBlockHashes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 4));
});

test("prompt block hashes given by the caller are taken as they are; a count that does not fit is a RangeError", () => {
  const prompt = Array.from({ length: 10 }, (_, i) => i + 1);
  const params = resolveSamplingParams({ maxTokens: 4 });
  const given = prefixBlockHashes(prompt, 4);
  const s = new Sequence({ requestId: "r", promptTokenIds: prompt, params, blockSize: 4, promptBlockHashes: given });
  expect(s.blockHashes).toEqual(given);
  s.appendToken(11, -0.5, 1);
  s.appendToken(12, -0.5, 2);
  expect(s.blockHashes).toEqual(prefixBlockHashes([...prompt, 11, 12], 4));
  expect(() => new Sequence({ requestId: "x", promptTokenIds: prompt, params, blockSize: 4, promptBlockHashes: [] }))
    .toThrow("0 prompt block hashes for 2 complete blocks");
});
