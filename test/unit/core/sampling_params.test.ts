// resolveSamplingParams: defaults, and every field checked as the native step will read it
// (floats as float32, integers as int32), each error naming the field and the value.
import { describe, expect, test } from "bun:test";
import { DEFAULT_SAMPLING_PARAMS, INT32_MAX, resolveSamplingParams } from "../../../lib/core/sampling_params.ts";

describe("resolveSamplingParams", () => {
  test("fills the defaults", () => {
    expect(resolveSamplingParams()).toEqual({ ...DEFAULT_SAMPLING_PARAMS, stop: [], stopTokenIds: [] });
  });

  test("accepts the edges of every range", () => {
    const p = resolveSamplingParams({
      temperature: 3.4e38,
      topP: 1e-45,
      topK: INT32_MAX,
      maxTokens: INT32_MAX,
      minTokens: INT32_MAX,
      seed: Number.MAX_SAFE_INTEGER,
      stopTokenIds: [0, INT32_MAX],
    });
    expect(Number.isFinite(Math.fround(p.temperature))).toBe(true);
    expect(Math.fround(p.topP)).toBeGreaterThan(0);
    expect(resolveSamplingParams({ temperature: 0, topP: 1, topK: -1 })).toMatchObject({
      temperature: 0,
      topP: 1,
      topK: -1,
    });
  });

  const rejected: [string, Parameters<typeof resolveSamplingParams>[0], RegExp][] = [
    // Finite doubles that are not finite (or not in range) as float32.
    [
      "temperature 1e308 (infinite as float32)",
      { temperature: 1e308 },
      /^temperature must be a finite number >= 0 as a float32, got 1e\+308 \(a float32 rounds it to Infinity\)/,
    ],
    ["temperature 3.5e38 (just past float32's max)", { temperature: 3.5e38 }, /^temperature .*float32.*got 3\.5e\+38/],
    ["temperature Infinity", { temperature: Infinity }, /^temperature must be a finite number >= 0, got Infinity/],
    ["temperature NaN", { temperature: NaN }, /^temperature must be a finite number >= 0, got NaN/],
    ["temperature -1", { temperature: -1 }, /^temperature must be a finite number >= 0, got -1/],
    ["temperature as a string", { temperature: "1" as unknown as number }, /^temperature .*got 1/],
    [
      "topP 1e-50 (0 as float32)",
      { topP: 1e-50 },
      /^topP must be in \(0, 1\] as a float32, got 1e-50 \(a float32 rounds it to 0\)/,
    ],
    ["topP 0", { topP: 0 }, /^topP must be in \(0, 1\], got 0/],
    ["topP 1.5", { topP: 1.5 }, /^topP must be in \(0, 1\], got 1\.5/],
    ["topP NaN", { topP: NaN }, /^topP must be in \(0, 1\], got NaN/],
    // Integers past int32.
    ["topK 2^31", { topK: 2 ** 31 }, /^topK must be an integer <= 2147483647 \(an int32\), got 2147483648/],
    ["topK 1e300", { topK: 1e300 }, /^topK must be an integer <= 2147483647/],
    ["topK -2", { topK: -2 }, /^topK must be an integer >= -1, got -2/],
    ["topK 1.5", { topK: 1.5 }, /^topK must be an integer >= -1, got 1\.5/],
    [
      "maxTokens 2^31",
      { maxTokens: 2 ** 31 },
      /^maxTokens must be an integer <= 2147483647 \(an int32\), got 2147483648/,
    ],
    ["maxTokens 0", { maxTokens: 0 }, /^maxTokens must be an integer >= 1, got 0/],
    ["minTokens 2^40", { minTokens: 2 ** 40 }, /^minTokens must be an integer <= 2147483647/],
    [
      "seed 2^53 (not exact as a double)",
      { seed: 2 ** 53 },
      /^seed must be a non-negative safe integer, got 9007199254740992/,
    ],
    ["seed -1", { seed: -1 }, /^seed must be a non-negative safe integer, got -1/],
    [
      "stopTokenIds entry 2^31",
      { stopTokenIds: [5, 2 ** 31] },
      /^stopTokenIds entries must be token ids .*got 2147483648/,
    ],
    ["stopTokenIds entry -1", { stopTokenIds: [-1] }, /^stopTokenIds entries .*got -1/],
  ];
  for (const [what, params, message] of rejected) {
    test(`rejects ${what}`, () => {
      expect(() => resolveSamplingParams(params)).toThrow(RangeError);
      expect(() => resolveSamplingParams(params)).toThrow(message);
    });
  }
});
