/**
 * The work of one engine step in the terms its cost depends on: decoding sequences and the context
 * they read, prefilling sequences, their tokens and their causal attention pairs. Workers report it
 * per step when asked (LMPOOL_TRACE_STEPS), the calibration fits step times to it, and the cluster
 * simulator prices its simulated steps by it.
 * @module
 */
import type { SchedulerOutput } from "./scheduler.ts";
import { chunkPairs } from "./step_budget.ts";

/** The work of one step. */
export interface StepWork {
  /** Sequences computing one decode token this step. */
  decodeSeqs: number;
  /** Sum over those of their context length in tokens (the KV they read). */
  decodeContext: number;
  /** Sequences computing a prefill chunk this step. */
  prefillSeqs: number;
  /** Tokens of those chunks. */
  prefillTokens: number;
  /** Sum of chunkPairs(start, n) over those chunks. */
  prefillPairs: number;
}

/** The work of a scheduled step. */
export function stepWorkOf(out: SchedulerOutput): StepWork {
  const w: StepWork = { decodeSeqs: 0, decodeContext: 0, prefillSeqs: 0, prefillTokens: 0, prefillPairs: 0 };
  for (const s of out.scheduled) {
    if (s.isDecode) {
      w.decodeSeqs++;
      w.decodeContext += s.start + 1;
    } else {
      w.prefillSeqs++;
      w.prefillTokens += s.numNewTokens;
      w.prefillPairs += chunkPairs(s.start, s.numNewTokens);
    }
  }
  return w;
}

/**
 * Cumulative work and time of a worker's pure prefill and pure decode steps, as stats counters
 * (prefill_ms, prefill_steps, prefill_seqs, prefill_tokens, prefill_pairs; decode_ms, decode_steps,
 * decode_seqs, decode_context). The control plane compares them with its device cost model to learn how fast
 * each rank really runs (lib/global/device_cost.ts). Mixed steps are left out: their time cannot
 * be split between the two kinds.
 */
export class StepWorkTotals {
  prefillMs = 0;
  prefillSteps = 0;
  prefillSeqs = 0;
  prefillTokens = 0;
  prefillPairs = 0;
  decodeMs = 0;
  decodeSteps = 0;
  decodeSeqs = 0;
  decodeContext = 0;

  /** Adds one step of `work` that took `ms`. */
  add(work: StepWork, ms: number): void {
    if (work.decodeSeqs === 0 && work.prefillSeqs > 0) {
      this.prefillMs += ms;
      this.prefillSteps++;
      this.prefillSeqs += work.prefillSeqs;
      this.prefillTokens += work.prefillTokens;
      this.prefillPairs += work.prefillPairs;
    } else if (work.prefillSeqs === 0 && work.decodeSeqs > 0) {
      this.decodeMs += ms;
      this.decodeSteps++;
      this.decodeSeqs += work.decodeSeqs;
      this.decodeContext += work.decodeContext;
    }
  }

  /** The totals as stats counters. */
  counters(): Record<string, number> {
    return {
      prefill_ms: this.prefillMs,
      prefill_steps: this.prefillSteps,
      prefill_seqs: this.prefillSeqs,
      prefill_tokens: this.prefillTokens,
      prefill_pairs: this.prefillPairs,
      decode_ms: this.decodeMs,
      decode_steps: this.decodeSteps,
      decode_seqs: this.decodeSeqs,
      decode_context: this.decodeContext,
    };
  }
}
