/**
 * When each request of a run is due: all at once (burst), as a Poisson process at a given rate
 * with seeded exponential gaps (the first request at 0, as vLLM's benchmark sends it), as a
 * ladder of Poisson processes at rising rates (rung k's requests at rates[k], its first gap drawn
 * from when rung k-1's last request was due), or at the arrival times a trace recorded. The
 * in-flight limit is separate (see run_workload.ts) and combines with any of these. Offsets are a
 * pure function of the requests and the mode, so the cluster simulator replays them on virtual time.
 * @module
 */
import { SeededRandom } from "../workloads/prng.ts";
import type { WorkloadRequest } from "../workloads/types.ts";

/** How requests arrive. */
export type ArrivalMode =
  | { kind: "burst" }
  | { kind: "poisson"; rate: number; seed: number }
  | { kind: "ladder"; rates: number[]; seed: number }
  | { kind: "trace" };

function checkRate(rate: number, what: string): void {
  if (!(rate > 0) || !Number.isFinite(rate)) {
    throw new RangeError(`${what} must be a finite number of requests/s > 0, got ${rate}`);
  }
}

/**
 * The requests of each rung of a `rungs`-rung ladder, as index lists in request order. Requests that
 * carry phase labels form one rung per run of equal labels (their count must be `rungs`); requests
 * without any label are cut into `rungs` consecutive parts of near-equal size.
 */
export function ladderRungs(requests: readonly WorkloadRequest[], rungs: number): number[][] {
  if (!Number.isSafeInteger(rungs) || rungs < 1) throw new RangeError(`a ladder needs at least one rung, got ${rungs}`);
  if (requests.some((r) => r.phase !== undefined)) {
    const out: number[][] = [];
    requests.forEach((r, i) => {
      const cur = out[out.length - 1];
      if (cur && requests[cur[0] as number]?.phase === r.phase) cur.push(i);
      else out.push([i]);
    });
    if (out.length !== rungs) {
      throw new RangeError(
        `a ladder of ${rungs} rates needs ${rungs} phases, one per rung; the requests form ${out.length} (${
          out.map((p) => JSON.stringify(requests[p[0] as number]?.phase ?? null)).join(", ")
        })`,
      );
    }
    return out;
  }
  if (requests.length < rungs) {
    throw new RangeError(`a ladder of ${rungs} rates needs at least ${rungs} requests, got ${requests.length}`);
  }
  return Array.from({ length: rungs }, (_, k) => {
    const from = Math.floor((k * requests.length) / rungs);
    const to = Math.floor(((k + 1) * requests.length) / rungs);
    return Array.from({ length: to - from }, (_, i) => from + i);
  });
}

/** Due time of each request, in ms after the start of the run, in request order. */
export function arrivalOffsetsMs(requests: readonly WorkloadRequest[], mode: ArrivalMode): number[] {
  switch (mode.kind) {
    case "burst":
      return requests.map(() => 0);
    case "poisson": {
      checkRate(mode.rate, "Poisson rate");
      return poissonOffsets(requests.map(() => mode.rate), mode.seed);
    }
    case "ladder": {
      mode.rates.forEach((r, k) => checkRate(r, `ladder rate ${k + 1}`));
      const rateOf = new Array<number>(requests.length);
      ladderRungs(requests, mode.rates.length).forEach((rung, k) => {
        for (const i of rung) rateOf[i] = mode.rates[k] as number;
      });
      return poissonOffsets(rateOf, mode.seed);
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

/** The first request at 0, then one exponential gap per request at that request's rate, from one seeded stream. */
function poissonOffsets(rates: readonly number[], seed: number): number[] {
  const rng = new SeededRandom(seed);
  let t = 0;
  return rates.map((rate, i) => {
    if (i > 0) t += rng.exponential(rate) * 1000;
    return t;
  });
}

/** One arrival in words for reports: "burst", "trace", "poisson 4 req/s", "ladder 2, 4, 8 req/s". */
export function describeArrival(mode: ArrivalMode): string {
  switch (mode.kind) {
    case "poisson":
      return `poisson ${mode.rate} req/s`;
    case "ladder":
      return `ladder ${mode.rates.join(", ")} req/s`;
    default:
      return mode.kind;
  }
}

/**
 * Parses `--arrival`: "burst" (or "inf"), "trace", a rate in requests/s ("4": one Poisson process)
 * or a comma-separated ladder of rates ("2,4,8"). A RangeError names `--arrival` and the value.
 */
export function parseArrival(text: string, seed: number): ArrivalMode {
  if (text === "burst" || text === "inf") return { kind: "burst" };
  if (text === "trace") return { kind: "trace" };
  const parts = text.split(",");
  const rates = parts.map((s) => (s.trim() === "" ? Number.NaN : Number(s)));
  const bad = rates.findIndex((r) => !(r > 0) || !Number.isFinite(r));
  if (bad >= 0) {
    const what = parts.length > 1 ? `; rate ${bad + 1} (${JSON.stringify(parts[bad])}) is not one` : "";
    throw new RangeError(
      `--arrival must be "burst", "trace", a rate in requests/s > 0 or a comma-separated ladder of such rates, got ${
        JSON.stringify(text)
      }${what}`,
    );
  }
  if (rates.length === 1) return { kind: "poisson", rate: rates[0] as number, seed };
  return { kind: "ladder", rates, seed };
}
