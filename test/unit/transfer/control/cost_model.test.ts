// The transfer config (documented defaults, validation) and the cost model: profile parsing,
// interpolation on payload bytes, residual + interference, the cold-start fallback, EWMA
// corrections from observed plans, phase waits from the ranks' step waits (and the learned excess
// beyond them), prefill time per token from worker timings, the admission gate.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import {
  DEFAULT_TRANSFER_OPTIONS,
  resolveTransferConfig,
  resolveTransferOptions,
} from "../../../../lib/transfer/control/transfer_config.ts";
import { DEFAULT_TRANSFER_TUNING, splitTransferSettings } from "../../../../lib/transfer/control/transfer_tuning.ts";
import {
  interpolateCurve,
  parseResiduals,
  parseTransferProfile,
  sizeBucket,
  TransferCostModel,
} from "../../../../lib/transfer/control/transfer_cost_model.ts";

describe("transfer config", () => {
  test("defaults: auto, caps 8 per chain and 128 per pair, zero fixed latency", () => {
    const c = resolveTransferConfig();
    expect(c).toEqual({ ...DEFAULT_TRANSFER_OPTIONS, ...DEFAULT_TRANSFER_TUNING });
    expect(c).toMatchObject({
      mode: "auto",
      backgroundCopyMaxBlocks: 8,
      backgroundCopyBatchMaxBlocks: 128,
      fallbackFixedMs: 0,
    });
  });
  test("a bare mode string and partial objects", () => {
    expect(resolveTransferConfig("force").mode).toBe("force");
    expect(resolveTransferConfig({ background: false, safetyRatio: 3 })).toMatchObject({
      mode: "auto",
      background: false,
      safetyRatio: 3,
    });
  });
  test("bad values name the field and value", () => {
    expect(() => resolveTransferConfig("always" as never)).toThrow(
      'transfers mode must be one of off, auto, force, got "always"',
    );
    expect(() => resolveTransferConfig({ safetyRatio: -1 })).toThrow(
      "transfers.safetyRatio must be a finite number >= 0, got -1",
    );
    expect(() => resolveTransferConfig({ backgroundCopyMaxBlocks: 2.5 })).toThrow(
      /backgroundCopyMaxBlocks must be an integer >= 1, got 2.5/,
    );
    expect(() => resolveTransferConfig({ ewmaAlpha: 0 })).toThrow(/ewmaAlpha/);
    expect(() => resolveTransferConfig({ foreground: "yes" as never })).toThrow(
      /transfers.foreground must be a boolean/,
    );
    expect(() => resolveTransferConfig({ bogus: 1 } as never)).toThrow(/unknown transfers setting "bogus"/);
  });
  test("the public options refuse an internal constant, which the tuning argument sets", () => {
    expect(() => resolveTransferOptions({ mode: "auto", hotnessThreshold: 3 } as never)).toThrow(
      /transfers.hotnessThreshold is not a transfer option/,
    );
    expect(resolveTransferOptions({ mode: "force", dataPath: "host" }, { hotnessThreshold: 3, ewmaAlpha: 0.5 }))
      .toMatchObject({ mode: "force", dataPath: "host", hotnessThreshold: 3, ewmaAlpha: 0.5 });
    expect(() => resolveTransferOptions("auto", { ewmaAlpha: 2 })).toThrow(
      /transfers.ewmaAlpha must be in \(0, 1\], got 2/,
    );
    expect(() => resolveTransferOptions("auto", { safetyRatio: 3 } as never)).toThrow(
      /unknown transfer constant "safetyRatio"/,
    );
    expect(splitTransferSettings({ dataPath: "ipc", offloadIntoColderCache: true })).toEqual({
      options: { dataPath: "ipc" },
      tuning: { offloadIntoColderCache: true },
    });
  });
});

const BLOCK = 1000;
const profileJson = { blockBytes: BLOCK, pairs: { "0->1": { "1": 0.2, "4": 0.5, "16": 1.7 }, "2-3": { "1": 1 } } };

describe("cost model", () => {
  test("profiles: directed and undirected keys; bad ones are named", () => {
    const p = parseTransferProfile(profileJson);
    expect([...p.pairs.keys()].sort()).toEqual(["0->1", "2->3", "3->2"]);
    expect(p.pairs.get("0->1")!.bytes).toEqual([1000, 4000, 16000]);
    expect(() => parseTransferProfile({ blockBytes: 0, pairs: {} })).toThrow(/blockBytes must be > 0/);
    expect(() => parseTransferProfile({ blockBytes: 1, pairs: { "0~1": { "1": 1 } } })).toThrow(/pair key "0~1"/);
    expect(() => parseTransferProfile({ blockBytes: 1, pairs: { "0-1": { x: 1 } } })).toThrow(
      /size "x" is not a block count/,
    );
    expect(() => parseResiduals({ pairs: { "0-1": { "2": -1 } } })).toThrow(/must be a finite ms >= 0, got -1/);
  });

  test("the benchmark's profile schema: its default path's p95 curve per directed device pair", () => {
    const point = (blocks: number, p95Ms: number) => ({
      blocks,
      bytes: blocks * BLOCK,
      p50Ms: p95Ms / 2,
      p95Ms,
      meanMs: p95Ms,
      minMs: p95Ms / 3,
      gbps: 1,
      samples: 5,
      validated: true,
    });
    const bench = {
      schema: "lmpool.transfer-profile/v1",
      createdAt: "now",
      backend: "cuda",
      bytesPerBlock: BLOCK,
      defaultPath: "kernel",
      segmentBytes: 0,
      ncclChannels: 0,
      shape: { numLayers: 1, numKvHeads: 1, headDim: 1, blockSize: 1, dtype: "bf16" },
      pairs: [{
        srcDevice: 1,
        dstDevice: 0,
        paths: [{ path: "nccl", points: [point(1, 9)] }, { path: "kernel", points: [point(1, 0.1), point(8, 0.8)] }],
      }],
    };
    const m = new TransferCostModel(resolveTransferConfig({ profile: bench }));
    expect(m.estimate(1, 0, 4, BLOCK)).toEqual({
      ms: expect.closeTo(0.4, 10),
      source: "profile",
      bytes: 4000,
      waitMs: 0,
    });
    expect(m.estimate(0, 1, 4, BLOCK).source).toBe("fallback");
    expect(() => parseTransferProfile({ ...bench, defaultPath: "copy_engine" })).toThrow(
      /no copy_engine curve for 1 -> 0/,
    );
  });

  test("a profile and residuals may be given as file paths (as the transfer benchmark writes them)", () => {
    const dir = mkdtempSync(`${tmpdir()}/lmp-profile-`);
    writeFileSync(`${dir}/profile.json`, JSON.stringify(profileJson));
    writeFileSync(`${dir}/residuals.json`, JSON.stringify({ pairs: { "0-1": { "1": 0.5 } } }));
    const m = new TransferCostModel(
      resolveTransferConfig({ profile: `${dir}/profile.json`, residuals: `${dir}/residuals.json` }),
    );
    expect(m.estimate(0, 1, 1, BLOCK)).toEqual({ ms: 0.7, source: "profile", bytes: 1000, waitMs: 0 });
    expect(m.estimate(1, 0, 1, BLOCK).source).toBe("fallback"); // the profile has 0->1 only
    expect(() => new TransferCostModel(resolveTransferConfig({ profile: `${dir}/missing.json` }))).toThrow(
      /cannot read the transfer profile/,
    );
  });

  test("interpolation on payload bytes: flat below, linear between, last slope above", () => {
    const c = parseTransferProfile(profileJson).pairs.get("0->1")!;
    expect(interpolateCurve(c, 500)).toBe(0.2);
    expect(interpolateCurve(c, 2500)).toBeCloseTo(0.35, 10);
    expect(interpolateCurve(c, 16000)).toBeCloseTo(1.7, 10);
    expect(interpolateCurve(c, 28000)).toBeCloseTo(2.9, 10);
    expect([1, 2, 3, 4, 7, 8, 9, 64, 100].map(sizeBucket)).toEqual([1, 2, 2, 4, 4, 8, 8, 64, 64]);
    expect(() => sizeBucket(0)).toThrow(/got 0/);
  });

  test("estimate = residual(pair, bucket) + interference x data path; a mismatched block size is rescaled by bytes", () => {
    const m = new TransferCostModel(
      resolveTransferConfig({
        profile: profileJson,
        residuals: { pairs: { "0->1": { "4": 0.3 } } },
        interferenceFactor: 2,
      }),
    );
    expect(m.estimate(0, 1, 4, BLOCK)).toEqual({ ms: 0.3 + 2 * 0.5, source: "profile", bytes: 4000, waitMs: 0 });
    expect(m.estimate(0, 1, 2, BLOCK).ms).toBeCloseTo(2 * (0.2 + (0.3 * 1000) / 3000), 10); // bucket 2: no residual
    expect(m.profileMatches(BLOCK)).toBe(true);
    expect(m.profileMatches(2 * BLOCK)).toBe(false);
    expect(m.estimate(0, 1, 2, 2 * BLOCK).ms).toBeCloseTo(2 * 0.5, 10); // 4000 bytes on the curve; bucket 2 has no residual
  });

  test("without a profile the cold-start fallback is fixed latency + bytes / bandwidth; observations correct it per bucket", () => {
    const m = new TransferCostModel(resolveTransferConfig({ fallbackBytesPerMs: 1000, ewmaAlpha: 0.5 }));
    expect(m.estimate(1, 0, 3, 500)).toEqual({ ms: 1.5, source: "fallback", bytes: 1500, waitMs: 0 });
    m.observe(1, 0, 3, { sourceMs: 1, publishMs: 4 });
    expect(m.estimate(1, 0, 2, 500)).toEqual({ ms: 4, source: "observed", bytes: 1000, waitMs: 0 }); // bucket 2 covers 2..3
    m.observe(1, 0, 2, { publishMs: 2 });
    expect(m.estimate(1, 0, 3, 500).ms).toBe(3);
    expect(m.observedSourceMs(1, 0, 3)).toBe(1);
    expect(m.estimate(1, 0, 4, 500).source).toBe("fallback"); // another bucket
    expect(m.estimate(0, 1, 3, 500).source).toBe("fallback"); // another direction
  });

  test("prefill ms per token: default until timings arrive, then an EWMA of measured increments", () => {
    const m = new TransferCostModel(resolveTransferConfig({ prefillMsPerToken: 0.1, ewmaAlpha: 0.5 }));
    expect(m.savedPrefillMs(0, 100)).toBeCloseTo(10, 10);
    m.observePrefillTimings(0, 1000, 50);
    expect(m.prefillMsPerToken(0)).toBe(0.1); // the first sample is a baseline
    m.observePrefillTimings(0, 1010, 60); // too few new tokens
    expect(m.prefillMsPerToken(0)).toBe(0.1);
    m.observePrefillTimings(0, 2000, 250);
    expect(m.prefillMsPerToken(0)).toBeCloseTo(0.2, 10);
    m.observePrefillTimings(0, 3000, 350);
    expect(m.prefillMsPerToken(0)).toBeCloseTo(0.15, 10);
    expect(m.prefillMsPerToken(1)).toBe(0.1);
  });

  test("phase waits: prepare and execute wait for the busier rank, publish for the destination", () => {
    const m = new TransferCostModel(resolveTransferConfig({ fallbackBytesPerMs: 1000 }));
    const base = 1.5; // 3 blocks of 500 bytes at 1000 bytes/ms
    expect(m.estimate(0, 1, 3, 500)).toEqual({ ms: base, source: "fallback", bytes: 1500, waitMs: 0 }); // both idle
    m.observeStepWait(0, 10); // busy source: prepare and execute wait 10 ms each, publish nothing
    expect(m.estimate(0, 1, 3, 500)).toEqual({ ms: base + 20, source: "fallback", bytes: 1500, waitMs: 20 });
    // The reverse direction: the busy rank is the destination, so publish waits too.
    expect(m.estimate(1, 0, 3, 500)).toMatchObject({ ms: base + 30, waitMs: 30 });
    m.observeStepWait(1, 4); // both busy: 2 x max(10, 4) + w(dst)
    expect(m.estimate(0, 1, 3, 500).waitMs).toBe(24);
    expect(m.estimate(1, 0, 3, 500).waitMs).toBe(30);
    expect(m.phaseWaitMs(0, 1)).toBe(24);
    m.observeStepWait(0, 0); // the source went idle
    expect(m.estimate(0, 1, 3, 500).waitMs).toBe(12);
    m.forgetRank(1);
    expect(m.estimate(0, 1, 3, 500)).toMatchObject({ ms: base, waitMs: 0 });
  });

  test("a rank that reads phase messages while its steps compute makes no phase wait", () => {
    const m = new TransferCostModel(resolveTransferConfig({ fallbackBytesPerMs: 1000 }));
    m.observeStepWait(0, 10);
    m.observeStepWait(1, 4);
    const queued = () => 100_000; // a long queued prefill: its half-step outweighs rank 1's report
    const q = m.queueWaitMs(1, 100_000);
    expect(q).toBeGreaterThan(10);
    expect(m.phaseWaitMs(0, 1, queued)).toBeCloseTo(3 * q, 9); // 2 x max(w0, w1) + w1, w = q on both
    m.observeReadsDuringSteps(1, true);
    expect(m.phaseWaitMs(0, 1, queued)).toBeCloseTo(2 * q, 9); // the destination waits for nothing
    m.observeReadsDuringSteps(0, true);
    expect(m.phaseWaitMs(0, 1, queued)).toBe(0);
    m.observeReadsDuringSteps(0, false);
    m.observeReadsDuringSteps(1, false);
    expect(m.phaseWaitMs(0, 1)).toBe(24); // the reports again: 2 x max(10, 4) + 4
    m.observeReadsDuringSteps(1, true);
    expect(m.phaseWaitMs(0, 1)).toBe(20); // 2 x max(10, 0) + 0
    m.forgetRank(1);
    expect(m.phaseWaitMs(0, 1)).toBe(20);
  });

  test("observations learn the time beyond the plan's predicted wait; the current wait is added back", () => {
    const m = new TransferCostModel(resolveTransferConfig({ ewmaAlpha: 0.5 }));
    m.observeStepWait(1, 10);
    expect(m.estimate(0, 1, 8, 0)).toMatchObject({ ms: 30, source: "fallback", waitMs: 30 });
    // Planned at a 30 ms wait, published after 35 ms: 5 ms beyond the wait.
    m.observe(0, 1, 8, { publishMs: 35, waitMs: 30 });
    expect(m.estimate(0, 1, 8, 0)).toMatchObject({ ms: 35, source: "observed", waitMs: 30 });
    m.observeStepWait(1, 0); // idle now: only the learned excess remains, not a stale busy wait
    expect(m.estimate(0, 1, 8, 0)).toMatchObject({ ms: 5, source: "observed", waitMs: 0 });
    m.observe(0, 1, 8, { publishMs: 20, waitMs: 30 }); // faster than its wait: excess 0
    expect(m.estimate(0, 1, 8, 0).ms).toBe(2.5);
    m.observe(0, 1, 8, { publishMs: 4.5 }); // no predicted wait: all of it is excess
    expect(m.estimate(0, 1, 8, 0).ms).toBe(3.5);
    // A timeout counts at least its time beyond the predicted wait (never lowers it).
    m.observeTimeout(0, 1, 8, 100, 30);
    expect(m.estimate(0, 1, 8, 0).ms).toBe(70);
    m.observeTimeout(0, 1, 8, 50, 30);
    expect(m.estimate(0, 1, 8, 0).ms).toBe(70);
  });

  test("the gate: auto needs saved >= ratio x cost; force admits all; off nothing", () => {
    const auto = new TransferCostModel(resolveTransferConfig({ safetyRatio: 2 }));
    expect(auto.admits(4, 2)).toBe(true);
    expect(auto.admits(3.9, 2)).toBe(false);
    expect(new TransferCostModel(resolveTransferConfig("force")).admits(0, 100)).toBe(true);
    expect(new TransferCostModel(resolveTransferConfig("off")).admits(100, 0)).toBe(false);
  });
});
