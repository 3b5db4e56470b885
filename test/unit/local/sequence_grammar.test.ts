// DeviceGrammars: a grammar engine that cannot load refuses constrained requests with the reason,
// once settled, instead of leaving them waiting or trying to load again on every request.
import { expect, test } from "bun:test";
import { GrammarError } from "../../../lib/core/errors.ts";
import { resolveSamplingParams } from "../../../lib/core/sampling_params.ts";
import { Sequence } from "../../../lib/core/sequence.ts";
import { DeviceGrammars, SequenceGrammar } from "../../../lib/local/sequence_grammar.ts";
import type { GrammarMatcher } from "../../../lib/model/grammar/grammar_engine.ts";

test("a vocabulary that cannot be read settles the engine as failed: requests get a GrammarError naming why", async () => {
  let reads = 0;
  const grammars = new DeviceGrammars(() => {
    reads++;
    throw new Error("tokenizer.json has no model.vocab");
  });
  expect(grammars.settled).toBe(false);
  await expect(grammars.load()).rejects.toThrow(GrammarError);
  expect(grammars.settled).toBe(true);
  await expect(grammars.load()).rejects.toThrow("no model.vocab"); // kept, not retried
  expect(reads).toBe(1);
  const spec = { kind: "regex", text: "a+" } as const;
  const seq = new Sequence({
    requestId: "r",
    promptTokenIds: [1, 2],
    params: resolveSamplingParams({ maxTokens: 4, structuredOutput: spec }),
    blockSize: 4,
  });
  expect(() => grammars.add(seq, spec)).toThrow(/request r: the grammar engine could not load: .*no model.vocab/);
  expect(grammars.size).toBe(0);
});

test("advance leaves the next token's mask to the next step, unless the vocabulary has no stop token", () => {
  for (const canStop of [true, false]) {
    let masks = 0;
    const matcher = {
      canStop,
      terminated: false,
      accept: () => true,
      mask: () => {
        masks++;
        return { allowed: Int32Array.of(7) };
      },
    } as unknown as GrammarMatcher;
    const seq = new Sequence({
      requestId: "r",
      promptTokenIds: [1, 2],
      params: resolveSamplingParams({ maxTokens: 4 }),
      blockSize: 4,
    });
    seq.appendToken(7, 0, 0);
    expect(new SequenceGrammar(matcher).advance(seq)).toBe("continue");
    // With a stop token the mask is never empty: the forward pass of the next step hides its cost.
    expect(masks).toBe(canStop ? 0 : 1);
  }
});
