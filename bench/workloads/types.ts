/**
 * The shape every workload generator and trace reader produces: an ordered list of requests plus
 * the run settings the workload is defined with (in-flight limit, KV budget, phase barriers).
 * @module
 */

/** One request of a workload. Exactly one of `promptTokenIds` and `prompt` is set. */
export interface WorkloadRequest {
  /** Stable id within the workload, e.g. "locality-0007". */
  id: string;
  promptTokenIds?: number[];
  prompt?: string;
  maxTokens: number;
  temperature?: number;
  ignoreEos?: boolean;
  /** Seconds after the start of the run at which the request arrives (trace replay). */
  arrivalTime?: number;
  /** Requests of one session run in order, each after the previous one finished. */
  sessionId?: string;
  /** Phase label (e.g. "warmup", "pressure", "reuse"); see WorkloadSettings.phaseBarrier. */
  phase?: string;
}

/** How the workload is meant to be run. Unset fields leave the driver's defaults. */
export interface WorkloadSettings {
  /** Most requests in flight at once (the reference's submit window). */
  maxInFlight?: number;
  /** KV cache budget per GPU, in blocks of `blockSize` tokens. */
  kvBlocksPerGpu?: number;
  blockSize?: number;
  /** When true, a phase starts only after every request of the previous phase finished. */
  phaseBarrier?: boolean;
}

/** Trace-profile figures the reference publishes for this workload, for side-by-side reports. */
export interface ReferenceShares {
  requestShare: number;
  tokenShare: number | [number, number];
}

/** A complete, deterministic workload. */
export interface Workload {
  name: string;
  description: string;
  /** Seed it was generated from (null for a trace read from a file). */
  seed: number | null;
  /** The generator's parameters, recorded in result metadata. */
  params: Record<string, unknown>;
  settings: WorkloadSettings;
  requests: WorkloadRequest[];
  reference?: ReferenceShares;
}

/** Validates a positive-integer option, throwing a RangeError that names it and its value. */
export function positiveInt(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

/** Formats request index `i` of workload `name` as a stable, sortable id. */
export function requestId(name: string, i: number): string {
  return `${name}-${String(i).padStart(4, "0")}`;
}

/** Options every workload takes: its seed, its token range and the engine's block size. */
export interface WorkloadOptions {
  seed?: number;
  blockSize?: number;
  /** Token ids are drawn from [0, maxTokenId]. */
  maxTokenId?: number;
}

/** Options the routing workloads (locality, load skew, memory skew) share. */
export interface RoutingWorkloadOptions extends WorkloadOptions {
  outputTokens?: number;
  maxInFlight?: number;
  kvBlocksPerGpu?: number;
}
