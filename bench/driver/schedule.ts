/**
 * The request scheduler every driver shares (in-process engine or HTTP server): it releases each
 * request at its arrival time, keeps at most `maxInFlight` running, runs a session's requests in
 * order (each after the previous one finished) and, with phase barriers, opens a phase only once
 * the previous phase drained. How one request is sent and measured is the caller's `send`.
 * @module
 */
import { type Clock, realClock } from "../../lib/core/clock.ts";
import type { Workload, WorkloadRequest } from "../workloads/types.ts";
import { type ArrivalMode, arrivalOffsetsMs } from "./arrival.ts";
import { type RequestObservation, type RequestRecord, toRecord } from "./request_record.ts";
import { Semaphore } from "./semaphore.ts";

/** Scheduling options. Unset fields fall back to the workload's own settings. */
export interface ScheduleOptions {
  arrival?: ArrivalMode;
  /** Most requests in flight (default: workload.settings.maxInFlight, else unlimited). */
  maxInFlight?: number;
  phaseBarrier?: boolean;
  onRequestDone?: (record: RequestRecord, done: number, total: number) => void;
  /** Time and timers of the run (default the real clock; the cluster simulator passes its virtual one). */
  clock?: Clock;
}

/** Sends request `r` now and observes it; `now()` is ms since the start of the run. Must not throw. */
export type SendRequest = (r: WorkloadRequest, now: () => number, dueMs: number) => Promise<RequestObservation>;

/** Records in workload order plus the run's timing. */
export interface ScheduledRun {
  startedAtEpochMs: number;
  /** From the first request sent to the last one finished. */
  elapsedMs: number;
  records: RequestRecord[];
}

// Consecutive requests with the same phase label form one phase.
function phasesOf(requests: readonly WorkloadRequest[]): number[][] {
  const out: number[][] = [];
  requests.forEach((r, i) => {
    const cur = out[out.length - 1];
    if (cur && requests[cur[0] as number]?.phase === r.phase) cur.push(i);
    else out.push([i]);
  });
  return out;
}

/** Runs every request of `workload` through `send` under the scheduling rules. */
export async function runSchedule(
  workload: Workload,
  options: ScheduleOptions,
  send: SendRequest,
): Promise<ScheduledRun> {
  const requests = workload.requests;
  if (requests.length === 0) throw new RangeError(`workload ${workload.name} has no requests`);
  const offsets = arrivalOffsetsMs(requests, options.arrival ?? { kind: "burst" });
  const slots = new Semaphore(options.maxInFlight ?? workload.settings.maxInFlight ?? Infinity);
  const barrier = options.phaseBarrier ?? workload.settings.phaseBarrier ?? false;
  const phases = barrier ? phasesOf(requests) : [requests.map((_, i) => i)];
  const sessionTail = new Map<string, Promise<void>>();
  const records: RequestRecord[] = new Array(requests.length);
  let done = 0;
  const clock = options.clock ?? realClock;
  const t0 = clock.now();
  const now = () => clock.now() - t0;

  // `previous` is the same session's preceding request, captured before this one replaces it.
  const runOne = async (i: number, dueMs: number, previous: Promise<void> | undefined): Promise<void> => {
    const r = requests[i] as WorkloadRequest;
    const wait = dueMs - now();
    if (wait > 0) await new Promise<void>((res) => clock.setTimeout(res, wait));
    if (previous) await previous;
    await slots.acquire();
    let obs: RequestObservation;
    try {
      obs = await send(r, now, dueMs);
    } finally {
      slots.release();
    }
    const rec = toRecord(obs);
    records[i] = rec;
    options.onRequestDone?.(rec, ++done, requests.length);
  };

  for (const phase of phases) {
    const phaseStart = now();
    const base = offsets[phase[0] as number] as number;
    await Promise.all(phase.map((i) => {
      const r = requests[i] as WorkloadRequest;
      const previous = r.sessionId !== undefined ? sessionTail.get(r.sessionId) : undefined;
      const task = runOne(i, phaseStart + (offsets[i] as number) - base, previous);
      if (r.sessionId !== undefined) sessionTail.set(r.sessionId, task);
      return task;
    }));
  }
  const firstSent = Math.min(...records.map((r) => r.sentMs));
  const lastFinish = Math.max(...records.map((r) => r.finishMs));
  return { startedAtEpochMs: clock.timeOrigin + t0, elapsedMs: lastFinish - firstSent, records };
}
