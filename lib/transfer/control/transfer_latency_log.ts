/**
 * A bounded record of recent completed plans' dispatch-to-publish times (prepare sent through the
 * destination's publish ack, control messages included), summarized as control-plane stats so a
 * benchmark can check the issue-6 latency target without reading logs:
 * - transfer_publish_samples, transfer_publish_ms_p50 / _p95 / _max: every recent plan;
 * - transfer_publish_1block_samples, transfer_publish_1block_ms_p50 / _p95 / _max: 1-block plans;
 * - transfer_publish_last_ms, transfer_publish_last_blocks: the latest plan (a benchmark that runs
 *   one plan at a time reads each plan's own time from these);
 * - transfer_publish_1block_prepare_ms_p50 / _execute_ms_p50: where a 1-block plan's time goes
 *   (dispatch to both prepare acks; then to both execute acks; the rest is the publish round trip).
 * Percentile keys are absent while their sample is empty (stats counters are finite numbers), and
 * they are gauges over the window: differences of two readings mean nothing.
 * @module
 */
import { percentileOfSorted } from "../../core/percentile.ts";

/** One completed plan. */
export interface PublishSample {
  blocks: number;
  publishMs: number;
  /** Dispatch to the prepare acks, and prepare acks to the execute acks (when known). */
  phases?: PhaseTimes;
}

/** A plan's time to its prepare acks, and from those to its execute acks. */
export interface PhaseTimes {
  prepareMs: number;
  executeMs: number;
}

/** p50, p95 and max of a sample. */
export interface LatencySummary {
  samples: number;
  p50: number;
  p95: number;
  max: number;
}

/** Default number of plans kept. */
const DEFAULT_LATENCY_LOG_CAPACITY = 512;

/** The last `capacity` completed plans, oldest first once full (a ring). */
export class TransferLatencyLog {
  readonly capacity: number;
  readonly #ring: PublishSample[] = [];
  #next = 0;
  #total = 0;

  constructor(capacity = DEFAULT_LATENCY_LOG_CAPACITY) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`latency log capacity must be an integer >= 1, got ${capacity}`);
    }
    this.capacity = capacity;
  }

  /** Plans recorded since creation (including those the window dropped). */
  get total(): number {
    return this.#total;
  }

  /** Records a completed plan of `blocks` blocks that published `publishMs` after dispatch. */
  record(blocks: number, publishMs: number, phases?: PhaseTimes): void {
    if (!Number.isInteger(blocks) || blocks < 1) {
      throw new RangeError(`plan block count must be an integer >= 1, got ${blocks}`);
    }
    if (!Number.isFinite(publishMs) || publishMs < 0) {
      throw new RangeError(`publishMs must be a finite number >= 0, got ${publishMs}`);
    }
    const s: PublishSample = phases ? { blocks, publishMs, phases } : { blocks, publishMs };
    if (this.#ring.length < this.capacity) this.#ring.push(s);
    else this.#ring[this.#next] = s;
    this.#next = (this.#next + 1) % this.capacity;
    this.#total++;
  }

  /** The window, oldest first. */
  recent(): PublishSample[] {
    return this.#ring.length < this.capacity
      ? [...this.#ring]
      : [...this.#ring.slice(this.#next), ...this.#ring.slice(0, this.#next)];
  }

  /** Summary of the window's plans that `keep` selects (all by default); undefined when none. */
  summary(keep: (blocks: number) => boolean = () => true): LatencySummary | undefined {
    return summarize(this.#ring.filter((s) => keep(s.blocks)).map((s) => s.publishMs));
  }

  /** transfer_publish_* stats (see the module doc). */
  counters(): Record<string, number> {
    const out: Record<string, number> = {
      transfer_publish_samples: this.#ring.length,
      transfer_publish_1block_samples: 0,
    };
    const put = (prefix: string, s: LatencySummary | undefined) => {
      if (!s) return;
      out[`${prefix}_samples`] = s.samples;
      out[`${prefix}_ms_p50`] = s.p50;
      out[`${prefix}_ms_p95`] = s.p95;
      out[`${prefix}_ms_max`] = s.max;
    };
    put("transfer_publish", this.summary());
    put("transfer_publish_1block", this.summary((b) => b === 1));
    const one = this.#ring.filter((s) => s.blocks === 1 && s.phases);
    const prepare = summarize(one.map((s) => s.phases!.prepareMs)),
      execute = summarize(one.map((s) => s.phases!.executeMs));
    if (prepare && execute) {
      out.transfer_publish_1block_prepare_ms_p50 = prepare.p50;
      out.transfer_publish_1block_execute_ms_p50 = execute.p50;
    }
    const last = this.#ring[(this.#next + this.capacity - 1) % this.capacity];
    if (this.#ring.length > 0 && last) {
      out.transfer_publish_last_ms = last.publishMs;
      out.transfer_publish_last_blocks = last.blocks;
    }
    return out;
  }
}

/** p50/p95 (lib/core/percentile.ts) and max; undefined for none. */
export function summarize(values: readonly number[]): LatencySummary | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return {
    samples: sorted.length,
    p50: percentileOfSorted(sorted, 50),
    p95: percentileOfSorted(sorted, 95),
    max: sorted[sorted.length - 1]!,
  };
}
