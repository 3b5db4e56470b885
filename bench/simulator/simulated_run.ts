/**
 * One simulated run: a workload through the benchmark's own request scheduler (arrivals, in-flight
 * limit, sessions, phase barriers) on a fresh simulated cluster, on virtual time. An event pump fires
 * the virtual clock's next timer and lets the promise jobs it started finish before the next one
 * (event_timers.ts says when there are none), so the driver's code runs unchanged; the result has the shape `bun bench e2e` aggregates.
 * @module
 */
import { resolveSamplingParams } from "../../lib/core/sampling_params.ts";
import { VirtualClock } from "../../lib/core/virtual_clock.ts";
import { type RequestObservation, startObservation } from "../driver/request_record.ts";
import type { RunResult } from "../driver/run_workload.ts";
import { runSchedule, type ScheduleOptions } from "../driver/schedule.ts";
import type { Workload, WorkloadRequest } from "../workloads/types.ts";
import { SimulatedCluster, type SimulatedClusterOptions } from "./simulated_cluster.ts";

/** Epoch ms the virtual clock starts at: fixed, so block recency stamps are the same every run. */
const VIRTUAL_EPOCH_MS = Date.UTC(2026, 0, 1);

/** A run that did not end: the pump ran out of events or past its bound with requests unfinished. */
export class SimulationStalledError extends Error {
  override readonly name = "SimulationStalledError";
}

/** What one simulated run produced, beyond the driver's result. */
export interface SimulatedRunResult extends RunResult {
  /** Conservation violations found at the end (empty when every check holds). */
  audit: string[];
  /** Virtual seconds simulated, and wall seconds it took. */
  simulatedS: number;
  wallS: number;
  /** Events fired (timers of the virtual clock). */
  events: number;
  /** Device-busy share of each GPU over the run. */
  gpuUtilisation: number[];
}

/** Options of {@link simulateRun}. */
export interface SimulatedRunOptions extends Omit<ScheduleOptions, "clock"> {
  cluster: Omit<SimulatedClusterOptions, "clock">;
  requestIdPrefix?: string;
}

/** Temperature of requests that set none (the e2e driver's default). */
const DEFAULT_TEMPERATURE = 0.6;
/** Virtual hours after which a run that has not ended is a stall. */
const MAX_VIRTUAL_HOURS = 48;

const settle: () => Promise<void> = () => new Promise((r) => setImmediate(r));

/** Runs `workload` on a fresh simulated cluster. */
export async function simulateRun(workload: Workload, o: SimulatedRunOptions): Promise<SimulatedRunResult> {
  const wall0 = performance.now();
  const clock = new VirtualClock({ timeOrigin: VIRTUAL_EPOCH_MS });
  const cluster = new SimulatedCluster({ ...o.cluster, clock });
  const statsBefore = cluster.stats();
  const prefix = o.requestIdPrefix ?? "";
  const send = (r: WorkloadRequest, now: () => number, dueMs: number): Promise<RequestObservation> => {
    const obs = startObservation(r, dueMs, now());
    const origin = clock.now() - now();
    if (!r.promptTokenIds) {
      obs.finishMs = now();
      obs.error = `request ${r.id} has a text prompt; the simulator takes token-id workloads only`;
      return Promise.resolve(obs);
    }
    obs.promptTokens = r.promptTokenIds.length;
    const params = resolveSamplingParams({
      maxTokens: r.maxTokens,
      temperature: r.temperature ?? DEFAULT_TEMPERATURE,
      ignoreEos: r.ignoreEos ?? false,
    });
    return new Promise((resolve) => {
      cluster.submit(
        {
          requestId: `${prefix}${r.id}`,
          promptTokenIds: r.promptTokenIds!,
          params,
          ...(r.sessionId !== undefined ? { sessionId: r.sessionId } : {}),
        },
        {
          token: (atMs) => obs.tokenDeltas.push({ atMs: atMs - origin, tokens: 1 }),
          finished: (reason, cached, rank, error) => {
            obs.finishMs = now();
            obs.finishReason = reason;
            obs.cachedTokens = cached;
            obs.rank = rank;
            if (error !== undefined) obs.error = error;
            else if (reason === "error" || reason === "abort") obs.error = `finished with reason ${reason}`;
            resolve(obs);
          },
        },
      );
    });
  };

  let ended = false;
  const schedule = runSchedule(workload, { ...o, clock }, send).finally(() => (ended = true));
  const boundMs = MAX_VIRTUAL_HOURS * 3_600_000;
  let events = 0;
  await settle();
  while (!ended) {
    const fired = cluster.timers.fireNext();
    if (fired === "none") {
      await settle();
      if (!ended && clock.pendingTimers === 0) {
        throw new SimulationStalledError(`simulation of ${workload.name} ran out of events with requests unfinished`);
      }
      continue;
    }
    events++;
    // An event that started promise jobs (a request finished, a transfer phase, the driver's own
    // timers) lets them run before time moves on; the simulator's own synchronous events do not.
    if (fired === "async") await settle();
    if (clock.now() > boundMs) {
      throw new SimulationStalledError(
        `simulation of ${workload.name} passed ${MAX_VIRTUAL_HOURS} virtual hours with requests unfinished`,
      );
    }
  }
  const run = await schedule;
  const endMs = clock.now();
  // Let the last releases, reports and plan phases land before the audit (a second of virtual time).
  await clock.advance(1000);
  cluster.decisions.stop();
  const simulatedS = endMs / 1000;
  return {
    ...run,
    statsBefore,
    statsAfter: cluster.stats(),
    audit: cluster.audit(),
    simulatedS,
    wallS: (performance.now() - wall0) / 1000,
    events,
    gpuUtilisation: cluster.gpus.map((g) => (endMs > 0 ? g.busyMs / endMs : 0)),
  };
}
