/**
 * Runs the calibration sweeps on the native library: builds the model with random weights, sizes
 * one KV cache from the device's free memory (leaving headroom for workspaces and the decode
 * graphs), and times every shape of the grid that fits. A point's time is the median device time
 * of its timed steps after warm-up, as `bun bench native_step` measures it. The cache is zero
 * filled when allocated; attention reads it at the same cost whatever it holds, so no prefill has to
 * fill it first.
 * @module
 */
import type { Native, NativeModelConfig } from "../../ffi/native.ts";
import { percentile } from "../stats/percentile.ts";
import type { ProfileModel } from "./engine_profile.ts";
import type { SweepFile, SweepIterations, SweepPoint, SweepTiming } from "./sweep_file.ts";
import { SWEEP_FILE_SCHEMA } from "./sweep_file.ts";
import {
  blocksPerSeq,
  longestContext,
  planSweep,
  pointLabel,
  type SweepGrid,
  type SweepKind,
  type SweepPointSpec,
} from "./sweep_grid.ts";
import { buildSyntheticModel, makeGroupedStep, type SeqGroup, timeMs } from "./synthetic_model.ts";

/** Iterations for a real model on a GPU: the whole grid runs in well under a minute on an H200. */
export const FULL_SWEEP_TIMING: SweepTiming = {
  decode: { warmupSteps: 3, warmupMs: 100, timedSteps: 20 },
  mixed: { warmupSteps: 3, warmupMs: 50, timedSteps: 15 },
  prefill: { warmupSteps: 2, warmupMs: 0, timedSteps: 8 },
};

/** Iterations for the tiny model on the CPU backend. */
export const QUICK_SWEEP_TIMING: SweepTiming = {
  decode: { warmupSteps: 1, warmupMs: 0, timedSteps: 3 },
  mixed: { warmupSteps: 1, warmupMs: 0, timedSteps: 3 },
  prefill: { warmupSteps: 1, warmupMs: 0, timedSteps: 3 },
};

/** Free device memory the sweep leaves unused: the larger of this many bytes and HEADROOM_FRACTION of the total. */
const HEADROOM_BYTES = 4 * 2 ** 30;
const HEADROOM_FRACTION = 0.05;
/** On the CPU backend the cache is host memory: at most this much, and a quarter of what is free. */
const CPU_KV_MAX_BYTES = 2 * 2 ** 30;

/** What to sweep. */
export interface SweepOptions {
  native: Native;
  config: NativeModelConfig;
  /** The model's name for the record. */
  modelName: string;
  blockSize: number;
  grid: SweepGrid;
  kinds: readonly SweepKind[];
  timing: SweepTiming;
  /** Device name for the record (e.g. "NVIDIA H200"). */
  device: string;
  /** Bytes and iterations of the copy-bandwidth ceiling. */
  copy: { bytes: number; iters: number };
  /** Called after each point (progress lines). */
  onPoint?: (p: SweepPoint, index: number, total: number) => void;
}

/** The profile's record of the model shape; `kvBytesPerToken` as the native KV cache stores it. */
export function profileModel(
  name: string,
  c: NativeModelConfig,
  blockSize: number,
  kvBytesPerToken: number,
): ProfileModel {
  return {
    name,
    numLayers: c.numLayers,
    hiddenSize: c.hiddenSize,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    kvBytesPerToken,
    blockSize,
    maxPosition: c.maxPosition,
  };
}

/** Runs the sweep and returns the sweep file's contents (without metadata). */
export function runSweep(o: SweepOptions): SweepFile {
  const { native, config: c, blockSize: bs } = o;
  const backend = native.backend;
  // Every point the grid names, before the cache bounds it: they size the model's buffers and the cache.
  const unbounded = planSweep(o.grid, o.kinds, { capacityTokens: Infinity, blockSize: bs, maxPosition: c.maxPosition });
  if (unbounded.points.length === 0) {
    throw new RangeError(`no sweep point fits the model's context of ${c.maxPosition}`);
  }
  const stepTokens = (p: SweepPointSpec) => p.batch + p.seqs * p.chunk;
  const maxTokens = Math.max(...unbounded.points.map(stepTokens));
  const maxSeqs = Math.max(...unbounded.points.map((p) => p.batch + p.seqs));
  const wantedBlocks = Math.max(
    ...unbounded.points.map((p) => (p.batch + p.seqs) * blocksPerSeq(longestContext(p), bs)),
  );
  const copyBytesPerS = native.benchCopyBandwidth(o.copy.bytes, o.copy.iters);
  const model = buildSyntheticModel(native, c, maxTokens, maxSeqs);
  try {
    const probe = model.createKvCache(1, bs);
    const blockBytes = probe.blockBytes;
    probe.dispose();
    native.synchronize();
    const { free, total } = native.deviceMemory();
    const budget = backend === "cuda"
      ? free - Math.max(HEADROOM_BYTES, HEADROOM_FRACTION * total)
      : Math.min(CPU_KV_MAX_BYTES, free / 4);
    const numBlocks = Math.min(wantedBlocks, Math.floor(budget / blockBytes));
    if (numBlocks < 1) {
      throw new RangeError(`no room for a KV cache: ${free} bytes free, a block needs ${blockBytes}`);
    }
    const plan = planSweep(o.grid, o.kinds, {
      capacityTokens: numBlocks * bs,
      blockSize: bs,
      maxPosition: c.maxPosition,
    });
    const kv = model.createKvCache(numBlocks, bs);
    try {
      const t0 = performance.now();
      const points: SweepPoint[] = [];
      for (const spec of plan.points) {
        const groups: SeqGroup[] = [];
        if (spec.seqs > 0) groups.push({ seqs: spec.seqs, len: spec.chunk, cached: spec.prefix });
        if (spec.batch > 0) groups.push({ seqs: spec.batch, len: 1, cached: spec.context - 1 });
        const perSeq = blocksPerSeq(longestContext(spec), bs);
        const batch = makeGroupedStep(groups, 0, perSeq, bs, c.vocabSize, points.length + 1);
        const it: SweepIterations = o.timing[spec.kind];
        const warmUntil = performance.now() + it.warmupMs;
        for (let w = 0; w < it.warmupSteps || performance.now() < warmUntil; w++) model.step(kv, batch);
        const device: number[] = [], wall: number[] = [];
        for (let i = 0; i < it.timedSteps; i++) {
          wall.push(timeMs(() => model.step(kv, batch)));
          device.push(model.lastStepMs());
        }
        const point: SweepPoint = {
          ...spec,
          label: pointLabel(spec),
          ms: percentile(device, 50),
          wallMs: percentile(wall, 50),
          samples: device.length,
        };
        points.push(point);
        o.onPoint?.(point, points.length, plan.points.length);
      }
      return {
        schema: SWEEP_FILE_SCHEMA,
        createdAt: new Date().toISOString(),
        backend,
        device: o.device,
        model: profileModel(o.modelName, c, bs, blockBytes / bs),
        weightBytes: model.weightBytes(),
        copyBytesPerS,
        kvCapacityTokens: numBlocks * bs,
        iterations: o.timing,
        wallSeconds: (performance.now() - t0) / 1e3,
        points,
        skipped: plan.skipped,
      };
    } finally {
      kv.dispose();
    }
  } finally {
    model.dispose();
  }
}
