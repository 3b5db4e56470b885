/**
 * Where step time goes, per step kind: wall time inside the native step call versus the whole
 * step (scheduling, batch building, applying results: the TypeScript share).
 * @module
 */
import type { StepKind } from "./scheduler.ts";

/** Totals for one step kind. */
export interface StepKindTotals {
  steps: number;
  tokens: number;
  nativeMs: number;
  totalMs: number;
  /** The longest step's whole time, ms (what holds the thread the longest). */
  maxTotalMs: number;
}

/** Accumulated step timings by kind. */
export class StepTimings {
  readonly byKind: Record<StepKind, StepKindTotals> = {
    prefill: { steps: 0, tokens: 0, nativeMs: 0, totalMs: 0, maxTotalMs: 0 },
    decode: { steps: 0, tokens: 0, nativeMs: 0, totalMs: 0, maxTotalMs: 0 },
    mixed: { steps: 0, tokens: 0, nativeMs: 0, totalMs: 0, maxTotalMs: 0 },
  };

  record(kind: StepKind, tokens: number, nativeMs: number, totalMs: number): void {
    const k = this.byKind[kind];
    k.steps++;
    k.tokens += tokens;
    k.nativeMs += nativeMs;
    k.totalMs += totalMs;
    k.maxTotalMs = Math.max(k.maxTotalMs, totalMs);
  }

  /** Sum over kinds. */
  total(): StepKindTotals {
    const t = { steps: 0, tokens: 0, nativeMs: 0, totalMs: 0, maxTotalMs: 0 };
    for (const k of Object.values(this.byKind)) {
      t.steps += k.steps;
      t.tokens += k.tokens;
      t.nativeMs += k.nativeMs;
      t.totalMs += k.totalMs;
      t.maxTotalMs = Math.max(t.maxTotalMs, k.maxTotalMs);
    }
    return t;
  }

  reset(): void {
    for (const k of Object.values(this.byKind)) {
      k.steps =
        k.tokens =
        k.nativeMs =
        k.totalMs =
        k.maxTotalMs =
          0;
    }
  }
}
