/**
 * Workloads by name, for command lines and result metadata: `buildWorkload({ name: "locality",
 * scale: 5, seed: 1 })`. Options not named here pass through to the generator as `overrides`.
 * @module
 */
import { readJsonlWorkload } from "./jsonl.ts";
import { loadSkewWorkload } from "./load_skew.ts";
import { localityWorkload } from "./locality.ts";
import { memorySkewWorkload } from "./memory_skew.ts";
import { mooncakeWorkload } from "./mooncake.ts";
import { multiTurnWorkload } from "./multi_turn.ts";
import { randomLengthsWorkload, readRandom256 } from "./random_lengths.ts";
import { sharedPrefixWorkload } from "./shared_prefix.ts";
import { sharedPrefixLadderWorkload } from "./shared_prefix_ladder.ts";
import type { Workload } from "./types.ts";

/** Which workload to build and with what. */
export interface WorkloadSpec {
  name: string;
  seed?: number;
  /** Prefix-length multiplier of the locality workload. */
  scale?: number;
  /** Trace file of the jsonl or mooncake workload (only those read a path). */
  path?: string;
  /** Generator options beyond seed/scale (e.g. numRequests for a scaled-down run). */
  overrides?: Record<string, unknown>;
}

/** Names buildWorkload() accepts, with one line each. */
export const WORKLOAD_NAMES: Readonly<Record<string, string>> = {
  locality: "192 requests, 16 recurring prefix groups, --scale 1|3|5",
  "load-skew": "3 hot-prefix warm-ups, then 189 revisits",
  "memory-skew": "6 session warm-ups, 30 anchor/cold pressure requests, 36 session reuses",
  "shared-prefix": "SGLang generated-shared-prefix (64 groups x 16 prompts)",
  "shared-prefix-ladder":
    "llm-d's shared-prefix ladder: 40 groups x 5 users, Poisson rungs 2 -> 60 req/s (--arrival 2,4,8)",
  random: "256 random-length prompts (compact-engine throughput workload)",
  "random-256": "the published random-256.jsonl",
  "multi-turn": "sessions whose turns extend the previous prompt and answer",
  jsonl: "a custom trace: --workload-file path.jsonl",
  mooncake: "the Mooncake FAST'25 conversation trace (12,031 requests), or --workload-file in its format",
};

/** Workloads that read a trace file (WorkloadSpec.path). */
export const FILE_WORKLOADS: readonly string[] = ["jsonl", "mooncake"];

/** Builds the named workload; throws a RangeError naming an unknown workload. */
export function buildWorkload(spec: WorkloadSpec): Workload {
  if (spec.path !== undefined && !FILE_WORKLOADS.includes(spec.name)) {
    throw new RangeError(
      `a workload file (${spec.path}) is read by the ${FILE_WORKLOADS.join(" and ")} workloads only, not by ${
        JSON.stringify(spec.name)
      }`,
    );
  }
  const fromFile = spec.name === "jsonl" || spec.name === "random-256";
  const overrideNames = Object.keys(spec.overrides ?? {});
  if (fromFile && overrideNames.length > 0) {
    throw new RangeError(
      `the ${spec.name} workload is read from a file; generator options do not apply to it, got ${
        overrideNames.join(", ")
      }`,
    );
  }
  const o = { ...(spec.overrides ?? {}), ...(spec.seed !== undefined ? { seed: spec.seed } : {}) };
  switch (spec.name) {
    case "locality":
      return localityWorkload({ ...o, ...(spec.scale !== undefined ? { scale: spec.scale } : {}) });
    case "load-skew":
      return loadSkewWorkload(o);
    case "memory-skew":
      return memorySkewWorkload(o);
    case "shared-prefix":
      return sharedPrefixWorkload(o);
    case "shared-prefix-ladder":
      return sharedPrefixLadderWorkload(o);
    case "random":
      return randomLengthsWorkload(o);
    case "random-256":
      return readRandom256();
    case "multi-turn":
      return multiTurnWorkload(o);
    case "jsonl":
      if (!spec.path) throw new RangeError("the jsonl workload needs a file path (--workload-file)");
      return readJsonlWorkload(spec.path);
    case "mooncake":
      return mooncakeWorkload({ ...o, ...(spec.path !== undefined ? { path: spec.path } : {}) });
    default:
      throw new RangeError(
        `unknown workload ${JSON.stringify(spec.name)}; known: ${Object.keys(WORKLOAD_NAMES).join(", ")}`,
      );
  }
}
