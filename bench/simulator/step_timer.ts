/**
 * How long a simulated rank's step takes: the calibrated engine model's prediction for the step's
 * shape, optionally perturbed. The perturbation keeps a cost model honest: the simulated engines run
 * on a profile the control plane cannot read exactly (a fixed bias of prefill and decode time, and
 * seeded per-step noise), as a real GPU never runs exactly at its calibration.
 * @module
 */
import { type EngineProfile, stepCost, type StepWork } from "../calibration/engine_profile.ts";
import { SeededRandom } from "../workloads/prng.ts";
import type { StepTimer } from "./simulated_worker.ts";

/** Departures of the simulated engines from the profile. */
export interface Perturbation {
  /** Per-step multiplicative noise, uniform in [1 - noise, 1 + noise] (e.g. 0.15). */
  noise: number;
  /** Fixed relative bias of the prefill part (e.g. 0.10: prefill 10% slower than the profile). */
  prefillBias: number;
  /** Fixed relative bias of the decode part (e.g. -0.10: decode 10% faster). */
  decodeBias: number;
}

/** No departure: the engines run exactly at the profile. */
export const NO_PERTURBATION: Perturbation = { noise: 0, prefillBias: 0, decodeBias: 0 };

/** Parses "noise=0.15,prefill=0.1,decode=-0.1" (any subset; "none" for none). */
export function parsePerturbation(text: string): Perturbation {
  if (text === "none") return NO_PERTURBATION;
  const out = { ...NO_PERTURBATION };
  const keys: Record<string, keyof Perturbation> = { noise: "noise", prefill: "prefillBias", decode: "decodeBias" };
  for (const part of text.split(",")) {
    const [k, v] = part.split("=");
    const key = keys[k?.trim() ?? ""];
    const x = Number(v);
    if (!key || v === undefined || !Number.isFinite(x) || x <= -1 || x >= 1) {
      throw new RangeError(
        `--perturb takes noise=X,prefill=X,decode=X with -1 < X < 1 (or "none"), got ${JSON.stringify(text)}`,
      );
    }
    if (key === "noise" && x < 0) throw new RangeError(`--perturb noise must be >= 0, got ${x}`);
    out[key] = x;
  }
  return out;
}

/** The step time of one rank, with its own seeded noise stream. */
export function stepTimer(profile: EngineProfile, p: Perturbation, seed: number): StepTimer {
  const rng = new SeededRandom(seed);
  return (work: StepWork) => {
    const c = stepCost(profile, work);
    const prefillMs = c.prefillMs * (1 + p.prefillBias);
    const decodeMs = c.decodeMs * (1 + p.decodeBias);
    const noise = p.noise > 0 ? 1 + p.noise * (2 * rng.next() - 1) : 1;
    return {
      deviceMs: (c.fixedMs + prefillMs + decodeMs) * noise,
      hostMs: profile.hostOverheadMs,
    };
  };
}
