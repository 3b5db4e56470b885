/**
 * When each request of a run is due: all at once (burst), as a Poisson process at a given rate
 * with seeded exponential gaps (the first request at 0, as vLLM's benchmark sends it), or at the
 * arrival times a trace recorded. The in-flight limit is separate (see run_workload.ts) and
 * combines with any of these.
 * @module
 */
import { SeededRandom } from "../workloads/prng.ts";
import type { WorkloadRequest } from "../workloads/types.ts";

/** How requests arrive. */
export type ArrivalMode =
  | { kind: "burst" }
  | { kind: "poisson"; rate: number; seed: number }
  | { kind: "trace" };

/** Due time of each request, in ms after the start of the run, in request order. */
export function arrivalOffsetsMs(requests: readonly WorkloadRequest[], mode: ArrivalMode): number[] {
  switch (mode.kind) {
    case "burst":
      return requests.map(() => 0);
    case "poisson": {
      if (!(mode.rate > 0) || !Number.isFinite(mode.rate)) {
        throw new RangeError(`Poisson rate must be a finite number of requests/s > 0, got ${mode.rate}`);
      }
      const rng = new SeededRandom(mode.seed);
      let t = 0;
      return requests.map((_, i) => {
        if (i > 0) t += rng.exponential(mode.rate) * 1000;
        return t;
      });
    }
    case "trace":
      return requests.map((r) => {
        if (r.arrivalTime === undefined) {
          throw new RangeError(`trace arrival needs an arrival_time on every request; ${r.id} has none`);
        }
        return r.arrivalTime * 1000;
      });
    default:
      throw new RangeError(`unknown arrival mode ${JSON.stringify(mode)}`);
  }
}

/** Parses "burst", "trace" or a rate in requests/s (e.g. "4" or "inf") into an ArrivalMode. */
export function parseArrival(text: string, seed: number): ArrivalMode {
  if (text === "burst" || text === "inf") return { kind: "burst" };
  if (text === "trace") return { kind: "trace" };
  const rate = Number(text);
  if (!(rate > 0) || !Number.isFinite(rate)) {
    throw new RangeError(`arrival must be "burst", "trace" or a rate in requests/s > 0, got ${JSON.stringify(text)}`);
  }
  return { kind: "poisson", rate, seed };
}
