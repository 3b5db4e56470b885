// The engine profile contract the simulator reads: the checked-in profile loads, a malformed one
// names the bad field, stepCost never falls when a step does more of anything and its parts add up,
// and the default transfer figures reproduce the measurements they were fitted to.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DEFAULT_ENGINE_PROFILE_PATH,
  dispatchToPublishMs,
  type EngineProfile,
  loadEngineProfile,
  parseEngineProfile,
  stepCost,
  type StepWork,
  transferMs,
} from "../../../bench/calibration/engine_profile.ts";
import { H200_NVLINK_TRANSFER, transferLine } from "../../../bench/calibration/transfer_defaults.ts";
import { seededRandom } from "../../../lib/core/seeded_random.ts";

const profile = loadEngineProfile();

test("the checked-in H200 profile loads and is the default path", () => {
  expect(DEFAULT_ENGINE_PROFILE_PATH).toEndWith("bench/calibration/profiles/h200-qwen3-0.6b.json");
  expect(profile.schema).toBe("lmpool-engine-profile/1");
  expect(profile.model.blockSize).toBe(256);
  expect(profile.model.kvBytesPerToken).toBe(28 * 2 * 8 * 128 * 2);
  expect(profile.transfer.source).toContain("2 x H200");
  // Measured on an H200; every fit point's prediction is the model's cost of that point's work.
  expect(profile.source).toStartWith("measured by bun bench calibrate");
  expect(profile.fit.points.length).toBeGreaterThan(50);
  for (const pt of profile.fit.points) expect(stepCost(profile, pt.work).totalMs).toBeCloseTo(pt.predictedMs, 6);
});

/** A copy of the profile with `path` set to `value` (undefined deletes it). */
function withField(path: string, value: unknown): unknown {
  const p = structuredClone(profile) as unknown as Record<string, unknown>;
  const keys = path.split(".");
  let o = p;
  for (const k of keys.slice(0, -1)) o = o[k] as Record<string, unknown>;
  if (value === undefined) delete o[keys.at(-1)!];
  else o[keys.at(-1)!] = value;
  return p;
}

test("a bad field is named with its value and the file", () => {
  const cases: [string, unknown, RegExp][] = [
    ["coefficients.kvReadMs", -1, /the\.json: invalid field: "coefficients\.kvReadMs" = -1/],
    ["hostOverheadMs", "0.3", /"hostOverheadMs" = "0\.3"/],
    ["schema", "lmpool-engine-profile/2", /"schema" = "lmpool-engine-profile\/2"/],
    ["transfer.linkCeilingGBps", undefined, /"transfer\.linkCeilingGBps" = undefined/],
    ["model.blockSize", 0, /"model\.blockSize" = 0/],
    ["coefficients.extraMs", 1, /unknown field "extraMs" in "coefficients"/],
  ];
  for (const [path, value, message] of cases) {
    expect(() => parseEngineProfile(withField(path, value), "the.json")).toThrow(RangeError);
    expect(() => parseEngineProfile(withField(path, value), "the.json")).toThrow(message);
  }
  expect(() => parseEngineProfile(withField("transfer.dispatchToPublishOneBlockMs", { min: 2, max: 1 }), "t.json"))
    .toThrow(/min 2 is above max 1/);
});

test("loadEngineProfile names a file that is missing or not JSON", () => {
  const dir = mkdtempSync(join(tmpdir(), "lmpool-profile-"));
  expect(() => loadEngineProfile(join(dir, "none.json"))).toThrow(/none\.json cannot be read/);
  writeFileSync(join(dir, "bad.json"), "{");
  expect(() => loadEngineProfile(join(dir, "bad.json"))).toThrow(/bad\.json is not JSON/);
});

const FIELDS = ["decodeSeqs", "decodeContext", "prefillSeqs", "prefillTokens", "prefillPairs"] as const;

function randomWork(rand: () => number): StepWork {
  const decodeSeqs = Math.floor(rand() * 300);
  const prefillSeqs = Math.floor(rand() * 4);
  const prefillTokens = prefillSeqs * Math.floor(1 + rand() * 4096);
  return {
    decodeSeqs,
    decodeContext: decodeSeqs * Math.floor(rand() * 40960),
    prefillSeqs,
    prefillTokens,
    prefillPairs: Math.floor(rand() * 2e8),
  };
}

/** The checked-in coefficients, and random ones with every term (the knee too) in play. */
function profiles(rand: () => number): EngineProfile[] {
  const out = [profile];
  for (let i = 0; i < 20; i++) {
    out.push({
      ...profile,
      coefficients: {
        fixedMs: rand(),
        decodeSeqMs: rand() * 0.01,
        prefillSeqMs: rand() * 0.01,
        tokenMs: rand() * 0.01,
        kneeTokens: Math.floor(rand() * 512),
        kvReadMs: rand() * 1e-4,
        pairMs: rand() * 1e-6,
      },
    });
  }
  return out;
}

test("stepCost is monotone in every StepWork field, and its parts add up to the total", () => {
  const rand = seededRandom(34);
  for (const p of profiles(rand)) {
    for (let i = 0; i < 200; i++) {
      const w = randomWork(rand);
      const base = stepCost(p, w);
      expect(base.fixedMs + base.decodeMs + base.prefillMs).toBeCloseTo(base.totalMs, 9);
      for (const f of FIELDS) {
        for (const step of [1, 17, 1000]) {
          const more = stepCost(p, { ...w, [f]: w[f] + step });
          expect(more.totalMs).toBeGreaterThanOrEqual(base.totalMs - 1e-12);
        }
      }
    }
  }
});

test("an empty step costs nothing, a bad StepWork field is named", () => {
  const none = { decodeSeqs: 0, decodeContext: 0, prefillSeqs: 0, prefillTokens: 0, prefillPairs: 0 };
  expect(stepCost(profile, none)).toEqual({ fixedMs: 0, decodeMs: 0, prefillMs: 0, totalMs: 0 });
  expect(() => stepCost(profile, { ...none, prefillPairs: -1 })).toThrow(/StepWork\.prefillPairs .* got -1/);
  expect(() => stepCost(profile, { ...none, decodeSeqs: Number.NaN })).toThrow(/StepWork\.decodeSeqs/);
});

test("the transfer line reproduces 1 block in 0.084 ms and 64 blocks at 375 GB/s, never past the ceiling", () => {
  const t = H200_NVLINK_TRANSFER;
  expect(transferMs(t, t.blockBytes)).toBeCloseTo(0.084, 9);
  const bytes64 = 64 * t.blockBytes;
  expect(bytes64 / transferMs(t, bytes64) / 1e6).toBeCloseTo(375, 6);
  expect(transferMs(t, 0)).toBe(0);
  // A faster line than the link is capped by the ceiling.
  const fast = { ...t, manyBlocksGBps: 600, oneBlockMs: 0.05 };
  expect(1e12 / transferMs(fast, 1e12) / 1e6).toBeCloseTo(fast.linkCeilingGBps, 6);
  expect(transferLine(t).latencyMs).toBeGreaterThan(0);
  // One block from dispatch to publish lies in the measured 0.64-0.93 ms.
  const d = dispatchToPublishMs(t, t.blockBytes);
  expect(d).toBeGreaterThanOrEqual(0.64);
  expect(d).toBeLessThanOrEqual(0.93);
  expect(dispatchToPublishMs(t, 8 * t.blockBytes)).toBeGreaterThan(d);
  expect(() => transferMs(t, -1)).toThrow(/transfer bytes/);
});
