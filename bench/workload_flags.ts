/**
 * The workload flags `bun bench e2e` and `bun bench simulate` share: which workloads (--workload,
 * --scales, --workload-file, --workload-options), the Mooncake window and caps (--first, --start,
 * --duration, --max-input, --max-output, --speedup), and how requests arrive (--arrival,
 * --max-in-flight, --seed). Parsed once here so both entries read them the same way.
 * @module
 */
import { intOption, numberOption } from "./cli_options.ts";
import { type ArrivalMode, parseArrival } from "./driver/arrival.ts";
import { LADDER_WORKLOAD, ladderRateOptions, type WorkloadArrival, workloadArrival } from "./driver/ladder_arrival.ts";
import { buildWorkload, FILE_WORKLOADS, type WorkloadSpec } from "./workloads/registry.ts";
import type { Workload } from "./workloads/types.ts";

/** parseArgs option table of the shared flags. */
export const WORKLOAD_FLAG_OPTIONS = {
  workload: { type: "string" },
  scales: { type: "string" },
  "workload-file": { type: "string" },
  "workload-options": { type: "string" },
  first: { type: "string" },
  start: { type: "string" },
  duration: { type: "string" },
  "max-input": { type: "string" },
  "max-output": { type: "string" },
  speedup: { type: "string" },
  seed: { type: "string" },
  arrival: { type: "string" },
  "max-in-flight": { type: "string" },
} as const;

/** The parsed values of {@link WORKLOAD_FLAG_OPTIONS}. */
export type WorkloadFlagValues = Partial<Record<keyof typeof WORKLOAD_FLAG_OPTIONS, string>>;

/** The Mooncake workload's flags, by the workload option each one sets. */
export const MOONCAKE_FLAGS = {
  first: "first",
  start: "start",
  duration: "duration",
  "max-input": "maxInput",
  "max-output": "maxOutput",
  speedup: "speedup",
} as const;

/** What the shared flags select. */
export interface WorkloadSelection {
  specs: WorkloadSpec[];
  seed: number;
  /** --arrival as given (undefined: absent). */
  arrivalText: string | undefined;
  /** --arrival parsed with `seed`. */
  arrival: ArrivalMode;
  maxInFlight: number | undefined;
  /**
   * Builds `spec`'s workload with `seed` (the model's context and vocabulary bound the Mooncake
   * replay) and pairs it with its arrival (rate ladders label their rungs).
   */
  build(spec: WorkloadSpec, model: Record<string, unknown>, seed?: number): WorkloadArrival;
}

/** The JSON object of option `--name` (empty when absent); a RangeError naming the option otherwise. */
export function jsonObjectOption(name: string, text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new RangeError(`--${name} must be a JSON object, got ${JSON.stringify(text)}: ${(e as Error).message}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new RangeError(`--${name} must be a JSON object, got ${JSON.stringify(text)}`);
  }
  return v as Record<string, unknown>;
}

/**
 * Reads the shared flags. `quickOverrides` are the scaled-down generator options of a --quick run,
 * by workload name; `defaultScales` the locality scales when --scales is absent.
 */
export function selectWorkloads(
  a: WorkloadFlagValues,
  o: { quickOverrides?: Readonly<Record<string, Record<string, unknown>>>; defaultScales: string },
): WorkloadSelection {
  const seed = a.seed === undefined ? 0 : Number(a.seed);
  if (!Number.isSafeInteger(seed)) throw new RangeError(`--seed must be an integer, got ${JSON.stringify(a.seed)}`);
  const scales = (a.scales ?? o.defaultScales).split(",").map((s) => intOption("scales", s.trim(), 1));
  const extra = jsonObjectOption("workload-options", a["workload-options"]);
  const overridesOf = (name: string) => {
    const quickOptions: Record<string, unknown> = { ...(o.quickOverrides?.[name] ?? {}) };
    // The ladder's rungs are sized by a count or by seconds: a duration given replaces --quick's count.
    if ("secondsPerRung" in extra) delete quickOptions.requestsPerRung;
    return { ...quickOptions, ...extra };
  };
  // A trace file alone means the jsonl workload; with no jsonl among the named ones, the file would go unread.
  const workloadNames = (a.workload ?? (a["workload-file"] !== undefined ? "jsonl" : "locality")).split(",").map((s) =>
    s.trim()
  );
  if (a.scales !== undefined && !workloadNames.includes("locality")) {
    throw new RangeError(
      `--scales is read by --workload locality only, got --workload ${JSON.stringify(a.workload ?? "jsonl")}`,
    );
  }
  const fileReaders = workloadNames.filter((n) => FILE_WORKLOADS.includes(n));
  if (a["workload-file"] !== undefined && fileReaders.length !== 1) {
    throw new RangeError(
      `--workload-file is read by exactly one of --workload ${FILE_WORKLOADS.join(" or ")}, got --workload ${
        JSON.stringify(a.workload)
      }`,
    );
  }
  const mooncakeFlags = mooncakeFlagOptions(a, extra);
  if (Object.keys(mooncakeFlags).length > 0 && !workloadNames.includes("mooncake")) {
    const flag = Object.keys(MOONCAKE_FLAGS).find((f) => a[f as keyof typeof MOONCAKE_FLAGS] !== undefined);
    throw new RangeError(
      `--${flag} is read by --workload mooncake only, got --workload ${JSON.stringify(a.workload ?? "locality")}`,
    );
  }
  if ((a.speedup !== undefined || "speedup" in extra) && a.arrival !== "trace") {
    throw new RangeError(
      `--speedup scales the trace's arrival times and needs --arrival trace, got --arrival ${
        JSON.stringify(a.arrival ?? "burst")
      }`,
    );
  }
  const arrival = parseArrival(a.arrival ?? "burst", seed);
  const ladderOptions = workloadNames.includes(LADDER_WORKLOAD) ? ladderRateOptions(a.arrival, arrival, extra) : {};
  const specs: WorkloadSpec[] = workloadNames.flatMap((name): WorkloadSpec[] =>
    name === "locality" ? scales.map((scale) => ({ name, scale, seed, overrides: overridesOf(name) })) : [{
      name,
      seed,
      overrides: name === "mooncake"
        ? { ...overridesOf(name), ...mooncakeFlags }
        : name === LADDER_WORKLOAD
        ? { ...overridesOf(name), ...ladderOptions }
        : overridesOf(name),
      ...(name === fileReaders[0] && a["workload-file"] !== undefined ? { path: a["workload-file"] } : {}),
    }]
  );
  const maxInFlight = a["max-in-flight"] === undefined ? undefined : intOption("max-in-flight", a["max-in-flight"], 1);
  const build = (spec: WorkloadSpec, model: Record<string, unknown>, s = seed): WorkloadArrival => {
    const seeded = { ...spec, seed: s };
    const w: Workload = buildWorkload(spec.name === "mooncake" ? withModelLimits(seeded, model) : seeded);
    return workloadArrival(w, a.arrival, s === seed ? arrival : parseArrival(a.arrival ?? "burst", s), s);
  };
  return { specs, seed, arrivalText: a.arrival, arrival, maxInFlight, build };
}

/** The Mooncake options its flags set; a RangeError names a bad flag or one --workload-options also sets. */
function mooncakeFlagOptions(a: WorkloadFlagValues, extra: Record<string, unknown>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [flag, option] of Object.entries(MOONCAKE_FLAGS)) {
    const text = a[flag as keyof typeof MOONCAKE_FLAGS];
    if (text === undefined) continue;
    if (option in extra) {
      throw new RangeError(`--${flag} and --workload-options' ${option} set the same option; give one of them`);
    }
    const isCount = flag === "first" || flag === "max-input" || flag === "max-output";
    out[option] = isCount ? intOption(flag, text, 1) : numberOption(flag, text, 0, flag !== "start") as number;
  }
  return out;
}

/** `spec` with the served model's context and vocabulary, which a workload option may narrow but not widen. */
export function withModelLimits(spec: WorkloadSpec, model: Record<string, unknown>): WorkloadSpec {
  const limits: Record<string, number> = {
    maxModelLen: model.max_position_embeddings as number,
    vocabSize: model.vocab_size as number,
  };
  const overrides = { ...spec.overrides };
  for (const [key, limit] of Object.entries(limits)) {
    const given = overrides[key];
    if (given !== undefined && !(typeof given === "number" && given <= limit)) {
      throw new RangeError(`--workload-options' ${key} must be at most the model's ${limit}, got ${String(given)}`);
    }
    overrides[key] ??= limit;
  }
  return { ...spec, overrides };
}
