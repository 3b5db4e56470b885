/**
 * The step shapes the calibration sweeps measure, and the StepWork of each. Decode: a batch of
 * sequences at one context length, one token each. Prefill: chunks of one length behind a cached
 * prefix that is a fixed share of the context (0%, 50%, 90%: the chunk is then the last half or
 * the last tenth of its prompt), plus a few steps of several sequences so per-sequence and
 * per-token costs can be told apart. Mixed: a prefill chunk beside a decode batch, as chunked
 * prefill schedules them. A shape the KV cache or the model's context cannot hold is skipped, and
 * the reason recorded.
 * @module
 */
import { chunkPairs } from "../../lib/local/step_budget.ts";
import type { StepWork } from "./engine_profile.ts";

/** The sweep kinds, in the order they run (decode first: prefill heats the chip and lowers its clocks for a while). */
export const SWEEP_KINDS = ["decode", "mixed", "prefill"] as const;
/** One sweep kind. */
export type SweepKind = (typeof SWEEP_KINDS)[number];

/** The values each sweep takes. */
export interface SweepGrid {
  decode: { batches: number[]; contexts: number[] };
  prefill: { chunks: number[]; cachedPct: number[]; multiSeq: { seqs: number; chunk: number }[] };
  mixed: { chunks: number[]; batches: number[]; context: number };
}

/** The grid of the issue, for a real model on a GPU. */
export const FULL_SWEEP_GRID: SweepGrid = {
  decode: { batches: [1, 2, 4, 8, 16, 32, 64, 128, 256], contexts: [512, 1024, 2048, 4096, 8192, 16384, 32768, 40960] },
  prefill: {
    chunks: [256, 512, 1024, 2048, 4096, 8192],
    cachedPct: [0, 50, 90],
    multiSeq: [{ seqs: 4, chunk: 512 }, { seqs: 16, chunk: 512 }, { seqs: 8, chunk: 2048 }],
  },
  mixed: { chunks: [512, 2048], batches: [8, 32, 128], context: 2048 },
};

/** A small grid for the tiny model on the CPU backend (seconds). */
export const QUICK_SWEEP_GRID: SweepGrid = {
  decode: { batches: [1, 2, 4, 8, 16], contexts: [32, 64, 128, 256] },
  prefill: { chunks: [16, 32, 64, 128], cachedPct: [0, 50, 90], multiSeq: [{ seqs: 4, chunk: 32 }] },
  mixed: { chunks: [16, 64], batches: [2, 8], context: 64 },
};

/** One step shape to measure. */
export interface SweepPointSpec {
  kind: SweepKind;
  /** Decode sequences (0 in a prefill step). */
  batch: number;
  /** Context length of each decode sequence, the new token included (0 in a prefill step). */
  context: number;
  /** Prefill sequences (0 in a decode step). */
  seqs: number;
  /** Prefill tokens of each prefill sequence (0 in a decode step). */
  chunk: number;
  /** Cached share of a prefill sequence's context, percent. */
  cachedPct: number;
  /** Tokens already in the cache before each prefill chunk. */
  prefix: number;
  work: StepWork;
}

/** A shape left out, and why. */
export interface SkippedPoint {
  kind: SweepKind;
  label: string;
  why: string;
}

/** What bounds the shapes. */
export interface SweepLimits {
  /** Tokens the KV cache holds. */
  capacityTokens: number;
  blockSize: number;
  /** The model's longest context. */
  maxPosition: number;
}

/** A point's name in tables: "decode 64 x 4096", "prefill 2048 @ 50%", "prefill 8 x 2048 @ 0%", "mixed 512 + 32 x 2048". */
export function pointLabel(
  p: Pick<SweepPointSpec, "kind" | "batch" | "context" | "seqs" | "chunk" | "cachedPct">,
): string {
  const prefill = `${p.seqs > 1 ? `${p.seqs} x ` : ""}${p.chunk}`;
  if (p.kind === "decode") return `decode ${p.batch} x ${p.context}`;
  if (p.kind === "prefill") return `prefill ${prefill} @ ${p.cachedPct}%`;
  return `mixed ${prefill} + ${p.batch} x ${p.context}`;
}

/** The StepWork of `seqs` chunks of `chunk` tokens after `prefix` cached ones, beside `batch` decodes at `context`. */
export function stepWorkOf(batch: number, context: number, seqs: number, chunk: number, prefix: number): StepWork {
  return {
    decodeSeqs: batch,
    decodeContext: batch * context,
    prefillSeqs: seqs,
    prefillTokens: seqs * chunk,
    prefillPairs: seqs * chunkPairs(prefix, chunk),
  };
}

/** Blocks each sequence of a point owns: enough for its longest context (the sweep lays every sequence out alike). */
export function blocksPerSeq(longestContext: number, blockSize: number): number {
  return Math.ceil(longestContext / blockSize);
}

/** The longest context of any sequence of a point. */
export function longestContext(p: Pick<SweepPointSpec, "context" | "prefix" | "chunk">): number {
  return Math.max(p.context, p.prefix + p.chunk);
}

/** Tokens already cached before a chunk of `chunk` tokens that is the last (100 - pct)% of its context. */
export function cachedPrefix(chunk: number, pct: number): number {
  if (!(pct >= 0 && pct < 100)) throw new RangeError(`cached prefix share must be in [0, 100) percent, got ${pct}`);
  return Math.round((chunk * pct) / (100 - pct));
}

/** The points of the chosen kinds that fit the limits, in run order, and the ones skipped. */
export function planSweep(
  grid: SweepGrid,
  kinds: readonly SweepKind[],
  limits: SweepLimits,
): { points: SweepPointSpec[]; skipped: SkippedPoint[] } {
  const points: SweepPointSpec[] = [], skipped: SkippedPoint[] = [];
  const blocks = (tokens: number) => blocksPerSeq(tokens, limits.blockSize);
  const capacityBlocks = Math.floor(limits.capacityTokens / limits.blockSize);
  const add = (spec: Omit<SweepPointSpec, "work">) => {
    const label = pointLabel(spec);
    const longest = longestContext(spec);
    const needed = (spec.batch + spec.seqs) * blocks(longest);
    if (longest > limits.maxPosition) {
      skipped.push({ kind: spec.kind, label, why: `context ${longest} > the model's ${limits.maxPosition}` });
    } else if (needed > capacityBlocks) {
      skipped.push({ kind: spec.kind, label, why: `needs ${needed} blocks, the cache holds ${capacityBlocks}` });
    } else {
      points.push({ ...spec, work: stepWorkOf(spec.batch, spec.context, spec.seqs, spec.chunk, spec.prefix) });
    }
  };
  for (const kind of SWEEP_KINDS) {
    if (!kinds.includes(kind)) continue;
    if (kind === "decode") {
      for (const batch of grid.decode.batches) {
        for (const context of grid.decode.contexts) {
          add({ kind, batch, context, seqs: 0, chunk: 0, cachedPct: 0, prefix: 0 });
        }
      }
    } else if (kind === "mixed") {
      const context = grid.mixed.context;
      for (const chunk of grid.mixed.chunks) {
        for (const batch of grid.mixed.batches) add({ kind, batch, context, seqs: 1, chunk, cachedPct: 0, prefix: 0 });
      }
    } else {
      for (const chunk of grid.prefill.chunks) {
        for (const cachedPct of grid.prefill.cachedPct) {
          add({ kind, batch: 0, context: 0, seqs: 1, chunk, cachedPct, prefix: cachedPrefix(chunk, cachedPct) });
        }
      }
      for (const { seqs, chunk } of grid.prefill.multiSeq) {
        add({ kind, batch: 0, context: 0, seqs, chunk, cachedPct: 0, prefix: 0 });
      }
    }
  }
  return { points, skipped };
}

/** Parses `--sweep decode,prefill,mixed` (any subset, any order). */
export function parseSweepKinds(text: string): SweepKind[] {
  const names = text.split(",").map((s) => s.trim()).filter((s) => s !== "");
  const bad = names.filter((n) => !(SWEEP_KINDS as readonly string[]).includes(n));
  if (names.length === 0 || bad.length > 0) {
    throw new RangeError(
      `--sweep takes a comma-separated subset of ${SWEEP_KINDS.join(",")}, got ${JSON.stringify(text)}`,
    );
  }
  return SWEEP_KINDS.filter((k) => names.includes(k));
}
