/**
 * Time to detect and time to serve again after a fault, measured from the moment of the fault by
 * polling /metrics every POLL_MS: detection is the first scrape that shows the fault (a case
 * gives the test: e.g. lmpool_rank_up{engine=r} == 0, fewer healthy ranks, a restart counted);
 * serving again is the first moment after it when lmpool_healthy_ranks is back to every rank and
 * a probe request succeeds.
 * @module
 */
import { findWorkers } from "./process_tree.ts";
import type { MetricsSnapshot } from "./prometheus_text.ts";
import { METRIC, POLL_MS, type ServerWatch } from "./server_watch.ts";

/** The two figures of one fault, in ms from the fault (null: not seen within the timeout), and why one is missing. */
export interface Recovery {
  detectMs: number | null;
  serveAgainMs: number | null;
  note: string;
}

/** A test for "the fault shows", given a scrape (null when /metrics did not answer) and the /health status. */
export type DetectTest = (s: MetricsSnapshot | null, health: number | null) => boolean;

/**
 * The detection test of a worker fault on `rank`: lmpool_rank_up{engine=rank} == 0, fewer than
 * every rank healthy, /health not 200, its restart counter past `restartsBefore`, or the rank
 * served by another process than `victimPid` (it was restarted between two scrapes).
 */
export function workerDownTest(
  watch: ServerWatch,
  serverPid: number,
  rank: number,
  victimPid: number,
  restartsBefore: number,
): DetectTest {
  const engine = { engine: String(rank) };
  return (s, health) => {
    if (health !== null && health !== 200) return true;
    if (s && (s.value(METRIC.rankUp, engine) === 0 || (s.value(METRIC.healthyRanks) ?? watch.ranks) < watch.ranks)) {
      return true;
    }
    if (s && (s.value(METRIC.restarts, engine) ?? 0) > restartsBefore) return true;
    return findWorkers(serverPid).some((w) => w.rank === rank && w.pid !== victimPid);
  };
}

/** Restarts counted for `rank` in `s` (0 when the counter is absent). */
export function restartsOf(s: MetricsSnapshot | null, rank: number): number {
  return s?.value(METRIC.restarts, { engine: String(rank) }) ?? 0;
}

/** Polls from `faultAt` (performance.now()) until detection and serving again, or `timeoutMs`. */
export async function measureRecovery(
  watch: ServerWatch,
  faultAt: number,
  detected: DetectTest,
  timeoutMs: number,
): Promise<Recovery> {
  const deadline = faultAt + timeoutMs;
  let detectMs: number | null = null;
  let sawHealthyGauge = false;
  while (performance.now() < deadline) {
    const [s, health] = await Promise.all([watch.scrape(), watch.health()]);
    if (s?.has(METRIC.healthyRanks)) sawHealthyGauge = true;
    if (detectMs === null && detected(s, health)) detectMs = performance.now() - faultAt;
    if (
      detectMs !== null && s && watch.allRanksUp(s) && (await watch.probe(Math.max(1000, deadline - performance.now())))
    ) {
      return { detectMs, serveAgainMs: performance.now() - faultAt, note: "" };
    }
    await Bun.sleep(POLL_MS);
  }
  const gauges = sawHealthyGauge ? "" : ` (/metrics has no ${METRIC.healthyRanks})`;
  const why = detectMs === null
    ? `fault not detected within ${timeoutMs} ms${gauges}`
    : sawHealthyGauge
    ? `not back to ${watch.ranks} healthy ranks with a probe answered within ${timeoutMs} ms`
    : `/metrics has no ${METRIC.healthyRanks}`;
  return { detectMs, serveAgainMs: null, note: why };
}
