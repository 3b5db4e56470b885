/**
 * How `--arrival` applies to one workload, rate ladders included. The shared-prefix ladder brings
 * its own rates (one per phase, its warm-up first); a rate or a list of rates given to `--arrival`
 * becomes its rungs' rates, regenerating its rungs, and burst or trace arrival is refused since
 * the workload is defined by its rates. Any other workload takes `--arrival` as given; a ladder
 * of rates there splits its requests into rungs (by its phases, or into equal consecutive parts,
 * which are then labelled "rung k @ r req/s" so the report has one row per rung). Rungs of such a
 * workload run back to back unless the workload itself sets phase barriers.
 * @module
 */
import { ladderPhasesOf, rungPhase } from "../workloads/shared_prefix_ladder.ts";
import type { Workload } from "../workloads/types.ts";
import { type ArrivalMode, ladderRungs } from "./arrival.ts";

/** Name of the workload that defines its own rate ladder. */
export const LADDER_WORKLOAD = "shared-prefix-ladder";

/** One phase of a rate ladder as the run offers it. */
export interface LadderRung {
  /** The phase label its requests carry. */
  phase: string;
  /** Offered rate, requests/s. */
  rate: number;
  /** Requests it sends. */
  requests: number;
}

/** A workload ready to run: its requests (labelled by rung where needed), arrival and ladder rungs. */
export interface WorkloadArrival {
  workload: Workload;
  arrival: ArrivalMode;
  /** Present under a rate ladder: the rungs in request order. */
  rungs?: LadderRung[];
}

/**
 * The generator options `--arrival` sets on the shared-prefix ladder: its rungs' rates from a rate
 * or a list of rates (none when the flag is absent). A RangeError names `--arrival` when the arrival
 * cannot drive the ladder, or when `--workload-options` sets the rates as well.
 */
export function ladderRateOptions(
  arrivalText: string | undefined,
  parsed: ArrivalMode,
  workloadOptions: Record<string, unknown>,
): Record<string, unknown> {
  if (arrivalText === undefined) return {};
  if (parsed.kind === "burst" || parsed.kind === "trace") {
    throw new RangeError(
      `--arrival ${arrivalText}: the ${LADDER_WORKLOAD} workload is a ladder of Poisson rates; give them as --arrival 2,4,8 (or leave --arrival out for its own)`,
    );
  }
  if ("rates" in workloadOptions) {
    throw new RangeError(
      `--arrival ${arrivalText} and --workload-options' rates both set the ${LADDER_WORKLOAD} rungs' rates; give one of them`,
    );
  }
  return { rates: parsed.kind === "poisson" ? [parsed.rate] : [...parsed.rates] };
}

/** The arrival of `workload` under the parsed `--arrival` (`seed` seeds the ladder's gaps). */
export function workloadArrival(
  workload: Workload,
  arrivalText: string | undefined,
  parsed: ArrivalMode,
  seed: number,
): WorkloadArrival {
  if (workload.name === LADDER_WORKLOAD) {
    const phases = ladderPhasesOf(workload);
    return {
      workload,
      arrival: { kind: "ladder", rates: phases.map((p) => p.rate), seed },
      rungs: phases.map((p) => ({ phase: p.phase, rate: p.rate, requests: p.requests })),
    };
  }
  if (parsed.kind !== "ladder") return { workload, arrival: parsed };
  let parts: number[][];
  try {
    parts = ladderRungs(workload.requests, parsed.rates.length);
  } catch (e) {
    throw new RangeError(
      `--arrival ${arrivalText ?? parsed.rates.join(",")} on ${workload.name}: ${(e as Error).message}`,
    );
  }
  const labelled = workload.requests.some((r) => r.phase !== undefined);
  const requests = labelled ? workload.requests : workload.requests.slice();
  if (!labelled) {
    parts.forEach((rung, k) => {
      const phase = rungPhase(k, parsed.rates[k] as number);
      for (const i of rung) requests[i] = { ...(requests[i] as Workload["requests"][number]), phase };
    });
  }
  return {
    workload: labelled ? workload : { ...workload, requests },
    arrival: parsed,
    rungs: parts.map((rung, k) => ({
      phase: requests[rung[0] as number]?.phase as string,
      rate: parsed.rates[k] as number,
      requests: rung.length,
    })),
  };
}
