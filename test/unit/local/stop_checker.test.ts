// The stop checker's token- and text-level stops against a one-character-per-token tokenizer:
// EOS and stop token ids end a sequence only once min_tokens tokens precede them (vLLM's rule), and
// the text, token ids and finish reason of a stopped sequence agree.
import { describe, expect, test } from "bun:test";
import type { FinishReason } from "../../../lib/core/outputs.ts";
import { resolveSamplingParams, type SamplingParams } from "../../../lib/core/sampling_params.ts";
import { Sequence } from "../../../lib/core/sequence.ts";
import { StopChecker } from "../../../lib/local/stop_checker.ts";

// Token id t is the letter 'a' + t; id 99 is a special token (EOS) that decodes to "" when skipped.
const EOS = 99;
const tokenizer = {
  decode: (ids: readonly number[], o: { skipSpecialTokens?: boolean } = {}) =>
    ids.map((t) => (t === EOS ? (o.skipSpecialTokens ? "" : "<eos>") : String.fromCharCode(97 + t))).join(""),
};

interface Run {
  tokenIds: number[];
  text: string;
  finish: FinishReason;
}

/** Feeds `tokens` until the checker stops the sequence (or they run out: "length"). */
function run(tokens: number[], p: Partial<SamplingParams>, incremental = true): Run {
  const seq = new Sequence({
    requestId: "r",
    promptTokenIds: [0, 1],
    params: resolveSamplingParams({ maxTokens: tokens.length, ...p }),
    blockSize: 16,
  });
  const stop = new StopChecker(seq, { tokenizer, eosTokenIds: [EOS], maxModelLen: 1000, incremental });
  let text = "";
  for (const t of tokens) {
    seq.appendToken(t, -1, 0);
    const v = stop.onToken(t);
    text += v.text;
    if (v.finish) {
      text += stop.finish(v.finish);
      return { tokenIds: seq.tokenIds.slice(2), text, finish: v.finish };
    }
  }
  throw new Error("the checker never finished the sequence");
}

describe("min_tokens with stop token ids and EOS", () => {
  const stopId = 5; // 'f'

  test("a stop token at position min_tokens does not end the sequence; the text keeps min_tokens tokens", () => {
    // The case: min_tokens 3, the stop token sampled third.
    const r = run([0, 1, stopId, 2, stopId, 3], { minTokens: 3, stopTokenIds: [stopId] });
    expect(r.finish).toBe("stop");
    expect(r.tokenIds).toEqual([0, 1, stopId, 2, stopId]);
    // Text, token ids and the finish agree: every token but the final stop token is text.
    expect(r.text).toBe("abfc");
    expect(r.text.length).toBeGreaterThanOrEqual(3);
  });

  test("the first stop token after min_tokens tokens ends it", () => {
    const r = run([0, 1, 2, stopId, 3], { minTokens: 3, stopTokenIds: [stopId] });
    expect(r).toEqual({ tokenIds: [0, 1, 2, stopId], text: "abc", finish: "stop" });
  });

  test("EOS follows the same rule", () => {
    expect(run([0, EOS, 1, EOS, 2], { minTokens: 2 })).toEqual({
      tokenIds: [0, EOS, 1, EOS],
      text: "ab",
      finish: "stop",
    });
    expect(run([0, EOS, 1], { minTokens: 0 })).toEqual({ tokenIds: [0, EOS], text: "a", finish: "stop" });
  });

  test("without incremental detokenization the text is the same", () => {
    const r = run([0, 1, stopId, 2, stopId, 3], { minTokens: 3, stopTokenIds: [stopId] }, false);
    expect(r.text).toBe("abfc");
  });

  test("min_tokens equal to max_tokens runs to the length limit", () => {
    const r = run([stopId, stopId, stopId], { minTokens: 3, stopTokenIds: [stopId] });
    expect(r).toEqual({ tokenIds: [stopId, stopId, stopId], text: "fff", finish: "length" });
  });
});

describe("min_tokens with stop strings", () => {
  test("a stop string within the first min_tokens tokens is text; one completing after stops", () => {
    const r = run([2, 3, 0, 2, 3, 0], { minTokens: 2, stop: ["cd"] });
    expect(r.finish).toBe("stop");
    expect(r.text).toBe("cda");
    expect(r.tokenIds).toEqual([2, 3, 0, 2, 3]);
  });

  test("one straddling the min_tokens boundary stops", () => {
    const r = run([0, 2, 3, 1], { minTokens: 2, stop: ["cd"] });
    expect(r).toEqual({ tokenIds: [0, 2, 3], text: "a", finish: "stop" });
  });
});
