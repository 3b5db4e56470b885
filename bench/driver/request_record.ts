/**
 * What the driver measures for one request, from client-side timestamps (submission, each
 * streamed delta that carries tokens, the final delta) plus the engine's cache/rank facts.
 * TTFT = first token - sent; E2E = finish - sent; TPOT = (finish - first token) / (N - 1), only
 * for N > 1 output tokens (a single token has no decode interval); ITL = the gaps between
 * consecutive token-bearing deltas (one gap per delta, as vLLM's benchmark records them).
 * @module
 */
import type { FinishReason } from "../../lib/core/outputs.ts";
import type { WorkloadRequest } from "../workloads/types.ts";

/** One measured request. Times are ms relative to the start of the run. */
export interface RequestRecord {
  id: string;
  phase?: string;
  sessionId?: string;
  promptTokens: number;
  outputTokens: number;
  cachedTokens: number;
  rank: number;
  dueMs: number;
  sentMs: number;
  firstTokenMs: number | null;
  finishMs: number;
  ttftMs: number | null;
  tpotMs: number | null;
  itlMs: number[];
  e2eMs: number;
  finishReason: FinishReason;
  error?: string;
}

/** Raw observations of one request, before derivation. */
export interface RequestObservation {
  id: string;
  phase?: string;
  sessionId?: string;
  promptTokens: number;
  dueMs: number;
  sentMs: number;
  /** Time of each delta that carried at least one token, with its token count. */
  tokenDeltas: { atMs: number; tokens: number }[];
  /** Output tokens as the server reported them (HTTP usage), when deltas do not carry counts. */
  reportedOutputTokens?: number;
  finishMs: number;
  cachedTokens: number;
  rank: number;
  finishReason: FinishReason;
  error?: string;
}

/** The observation of `r` as it is sent at `sentMs`: no tokens yet, an error until it finishes. */
export function startObservation(r: WorkloadRequest, dueMs: number, sentMs: number): RequestObservation {
  return {
    id: r.id,
    promptTokens: r.promptTokenIds?.length ?? 0,
    dueMs,
    sentMs,
    tokenDeltas: [],
    finishMs: 0,
    cachedTokens: 0,
    rank: -1,
    finishReason: "error",
    ...(r.phase !== undefined ? { phase: r.phase } : {}),
    ...(r.sessionId !== undefined ? { sessionId: r.sessionId } : {}),
  };
}

/** Derives TTFT/TPOT/ITL/E2E from the observations of one request. */
export function toRecord(o: RequestObservation): RequestRecord {
  const outputTokens = o.reportedOutputTokens ?? o.tokenDeltas.reduce((n, d) => n + d.tokens, 0);
  const first = o.tokenDeltas[0];
  const firstTokenMs = first ? first.atMs : null;
  const itlMs: number[] = [];
  for (let i = 1; i < o.tokenDeltas.length; i++) {
    itlMs.push((o.tokenDeltas[i] as { atMs: number }).atMs - (o.tokenDeltas[i - 1] as { atMs: number }).atMs);
  }
  return {
    id: o.id,
    ...(o.phase !== undefined ? { phase: o.phase } : {}),
    ...(o.sessionId !== undefined ? { sessionId: o.sessionId } : {}),
    promptTokens: o.promptTokens,
    outputTokens,
    cachedTokens: o.cachedTokens,
    rank: o.rank,
    dueMs: o.dueMs,
    sentMs: o.sentMs,
    firstTokenMs,
    finishMs: o.finishMs,
    ttftMs: firstTokenMs === null ? null : firstTokenMs - o.sentMs,
    tpotMs: firstTokenMs !== null && outputTokens > 1 ? (o.finishMs - firstTokenMs) / (outputTokens - 1) : null,
    itlMs,
    e2eMs: o.finishMs - o.sentMs,
    finishReason: o.finishReason,
    ...(o.error !== undefined ? { error: o.error } : {}),
  };
}
