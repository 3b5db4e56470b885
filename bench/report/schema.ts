/**
 * The results.json layout every benchmark entry writes: metadata, then one scenario per workload
 * (its trace profile and every configuration's repetitions and intervals; under a rate ladder, a row
 * per configuration and rung).
 * @module
 */
import type { ConfigurationResult } from "../driver/repetitions.ts";
import type { LadderRung } from "../driver/ladder_arrival.ts";
import type { TraceProfile } from "../trace_profile.ts";
import type { RungRow } from "./rung_table.ts";
import type { ReferenceShares, WorkloadSettings } from "../workloads/types.ts";
import type { RunMetadata } from "./metadata.ts";

/** Schema tag of results.json. */
export const RESULTS_SCHEMA = "lmpool-bench/1";

/** A workload, described without its request bodies. */
export interface WorkloadSummary {
  name: string;
  description: string;
  seed: number | null;
  params: Record<string, unknown>;
  settings: WorkloadSettings;
  requests: number;
  reference?: ReferenceShares;
}

/** One workload run on every configuration. */
export interface ScenarioResult {
  workload: WorkloadSummary;
  traceProfile: TraceProfile | null;
  arrival: string;
  maxInFlight: number | null;
  configurations: ConfigurationResult[];
  /** A rate ladder's rungs and every configuration's row per rung (absent without a ladder). */
  ladder?: { rungs: LadderRung[]; rows: RungRow[] };
}

/** A measured transfer latency (e.g. from a KV transfer microbenchmark). */
export interface TransferLatencyPoint {
  pair: string;
  blocks: number;
  bytes: number;
  latencyMs: number;
}

/** The whole results.json. */
export interface BenchResults {
  schema: typeof RESULTS_SCHEMA;
  entry: string;
  metadata: RunMetadata;
  scenarios: ScenarioResult[];
  transferLatency?: TransferLatencyPoint[];
}
