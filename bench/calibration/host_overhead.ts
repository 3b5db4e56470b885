/**
 * The host time an engine adds to each step beyond the device time the sweeps measure: the
 * scheduler, batch building, applying sampled tokens, the loop between steps, and the native
 * call's own launch and synchronisation. It is measured by running a short workload through the
 * real in-process engine (LLM: the same LocalEngine a worker process runs) on the same backend:
 *
 *   hostOverheadMs = (workload wall time - time inside native calls) / steps
 *                    + median over the sweep of (native call wall time - device time)
 *
 * The first term is everything outside the native call; the second is the part of the native call
 * the device is idle for, which the engine's timings cannot separate from device time but the
 * sweep can. A worker process adds message handling and block reports that the in-process engine
 * does not, so `bun bench calibrate --host-overhead-ms` can set the figure instead.
 * @module
 */
import type { BackendKind } from "../../ffi/loader.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { seededRandom } from "../../lib/core/seeded_random.ts";
import { percentile } from "../stats/percentile.ts";
import type { HostOverheadMeasurement, SweepPoint } from "./sweep_file.ts";

/** The workload the overhead is measured on. */
export interface HostWorkload {
  requests: number;
  promptTokens: number;
  outputTokens: number;
}

/** About a decode batch of 64 behind a few chunked prefill steps: the steps a busy engine runs. */
export const FULL_HOST_WORKLOAD: HostWorkload = { requests: 64, promptTokens: 1024, outputTokens: 128 };
/** Small enough for the tiny model on the CPU backend. */
export const QUICK_HOST_WORKLOAD: HostWorkload = { requests: 8, promptTokens: 48, outputTokens: 16 };

/** What the measurement runs on. */
export interface HostOverheadOptions {
  modelDir: string;
  backend?: BackendKind;
  blockSize: number;
  workload: HostWorkload;
  /** The sweep's points: their wall and device times give the native call's own overhead. */
  sweepPoints: readonly SweepPoint[];
}

/** Median over the sweep of (native call wall time - device time), ms. */
export function nativeCallOverheadMs(points: readonly SweepPoint[]): number {
  if (points.length === 0) return 0;
  return Math.max(0, percentile(points.map((p) => p.wallMs - p.ms), 50));
}

/** Runs the workload through LLM and returns the per-step host overhead. */
export async function measureHostOverhead(o: HostOverheadOptions): Promise<HostOverheadMeasurement> {
  const w = o.workload;
  const seqLen = w.promptTokens + w.outputTokens;
  const blocksPerSeq = Math.ceil(seqLen / o.blockSize);
  await using llm = await LLM.create({
    model: o.modelDir,
    backend: o.backend,
    blockSize: o.blockSize,
    numBlocks: (w.requests + 2) * blocksPerSeq,
    maxModelLen: seqLen,
    maxNumSeqs: Math.max(w.requests, 2),
    detokenize: false,
  });
  const vocab = llm.model.vocabSize;
  const rand = seededRandom(7);
  // Distinct random prompts: no prefix is shared, every step does the work its shape says.
  const prompt = () => Array.from({ length: w.promptTokens }, () => 1 + Math.floor(rand() * (vocab - 2)));
  const params = { maxTokens: w.outputTokens, ignoreEos: true, temperature: 0 };
  // Warm-up: first calls allocate, capture graphs and bring code up to speed.
  await llm.generate([{ promptTokenIds: prompt() }, { promptTokenIds: prompt() }], params);
  llm.engine.timings.reset();
  const prompts = Array.from({ length: w.requests }, () => ({ promptTokenIds: prompt() }));
  const t0 = performance.now();
  await llm.generate(prompts, params);
  const wallMs = performance.now() - t0;
  const total = llm.engine.timings.total();
  if (total.steps === 0) throw new Error("the host overhead workload ran no steps");
  const outside = (wallMs - total.nativeMs) / total.steps;
  const callOverhead = nativeCallOverheadMs(o.sweepPoints);
  return {
    hostOverheadMs: Math.max(0, outside) + callOverhead,
    steps: total.steps,
    wallMs,
    nativeMs: total.nativeMs,
    outsideNativeMsPerStep: Math.max(0, outside),
    nativeCallOverheadMs: callOverhead,
    requests: w.requests,
    promptTokens: w.requests * w.promptTokens,
    outputTokens: w.requests * w.outputTokens,
  };
}
