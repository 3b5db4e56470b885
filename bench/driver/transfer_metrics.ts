/**
 * What verifies a run's KV transfers, from the control plane's counters before and after it:
 * completed plans by kind (prefix copies, offload moves, background placements), aborted plans,
 * source blocks that moves released, routes placement leases moved, and dispatch-to-publish
 * p50/p95/max. Plan counts are differences; the publish figures are gauges over the control
 * plane's window of recent plans (lib/transfer/control/transfer_latency_log.ts), read after the run: on the
 * fresh engine of each repetition that is the run's plans (and its warm-up's, if it made any).
 * @module
 */

import type { LatencySummary } from "../../lib/transfer/control/transfer_latency_log.ts";

/** p50/p95/max ms of dispatch-to-publish over `samples` plans (the control plane's summary). */
export type PublishLatency = LatencySummary;

/** A run's transfer verification figures. */
export interface TransferMetrics {
  completed: { prefixCopy: number; offload: number; background: number };
  aborted: number;
  /** Source blocks released by moves (offloads) at finalize. */
  releasedBlocks: number;
  leaseRoutes: number;
  /** Every recent plan; null when none completed. */
  publishMs: PublishLatency | null;
  /** 1-block plans only; null when none completed. */
  publish1BlockMs: PublishLatency | null;
}

/** Control-plane stats that are gauges, not counters: a difference of two readings means nothing. */
export function isGaugeCounter(key: string): boolean {
  return key.startsWith("transfer_publish_");
}

function latency(c: Record<string, number> | undefined, prefix: string): PublishLatency | null {
  const samples = c?.[`${prefix}_samples`] ?? 0;
  const p50 = c?.[`${prefix}_ms_p50`];
  const p95 = c?.[`${prefix}_ms_p95`];
  const max = c?.[`${prefix}_ms_max`];
  if (!samples || p50 === undefined || p95 === undefined || max === undefined) return null;
  return { samples, p50, p95, max };
}

/** The figures of a run whose control-plane counters were `before` and `after` (either may be missing). */
export function transferMetrics(
  before: Record<string, number> | undefined,
  after: Record<string, number> | undefined,
): TransferMetrics {
  const d = (k: string) => (after?.[k] ?? 0) - (before?.[k] ?? 0);
  return {
    completed: {
      prefixCopy: d("transfer_prefix-copy_completed"),
      offload: d("transfer_offload_completed"),
      background: d("transfer_background_completed"),
    },
    aborted: d("transfer_aborted"),
    releasedBlocks: d("transfer_released_blocks"),
    leaseRoutes: d("lease_routes"),
    publishMs: latency(after, "transfer_publish"),
    publish1BlockMs: latency(after, "transfer_publish_1block"),
  };
}
