/**
 * Statistics and the printed report of `bun bench transfer_latency`: per plan size, p50/p95/max
 * dispatch-to-publish over the verified rounds (and p50 per direction), payload GB/s at p50, the
 * bytes each worker data path carried, the control plane's own window summary as a cross-check,
 * and the issue-6 line "1 block p50 <= 1 ms: PASS/FAIL".
 * @module
 */
import { percentile } from "./stats/percentile.ts";

/** Issue 6: 1-block dispatch-to-publish, control messages included, on 2 GPUs. */
export const ONE_BLOCK_TARGET_MS = 1;

/** One warm-up/follower round: its plan's dispatch-to-publish ms, or why it did not verify. */
export interface Round {
  blocks: number;
  /** Source rank -> destination rank. */
  direction: string;
  publishMs: number | null;
  bytes: number;
  error?: string;
}

/** The figures of one plan size. */
export interface LatencyPoint {
  blocks: number;
  rounds: number;
  verified: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
  meanMs: number;
  minMs: number;
  /** p50 per direction ("0->1": ms). */
  p50ByDirection: Record<string, number>;
  bytesPerPlan: number;
  /** Payload GB/s at p50. */
  gbpsAtP50: number;
}

/** Summarizes the measured rounds of one size (NaN figures when none verified). */
export function latencyPoint(blocks: number, rounds: readonly Round[]): LatencyPoint {
  const ok = rounds.filter((r) => r.publishMs !== null);
  const ms = ok.map((r) => r.publishMs!);
  const byDirection: Record<string, number> = {};
  for (const dir of [...new Set(ok.map((r) => r.direction))].sort()) {
    byDirection[dir] = percentile(ok.filter((r) => r.direction === dir).map((r) => r.publishMs!), 50);
  }
  const bytes = ok.length ? ok[0]!.bytes : 0;
  const p50 = percentile(ms, 50);
  return {
    blocks,
    rounds: rounds.length,
    verified: ok.length,
    p50Ms: p50,
    p95Ms: percentile(ms, 95),
    maxMs: ms.length ? Math.max(...ms) : Number.NaN,
    meanMs: ms.length ? ms.reduce((a, b) => a + b, 0) / ms.length : Number.NaN,
    minMs: ms.length ? Math.min(...ms) : Number.NaN,
    p50ByDirection: byDirection,
    bytesPerPlan: bytes,
    gbpsAtP50: bytes && p50 > 0 ? bytes / (p50 / 1e3) / 1e9 : Number.NaN,
  };
}

const f = (x: number, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : "-");
const pad = (cells: (string | number)[], widths: number[]) =>
  cells.map((c, i) => String(c).padStart(widths[i]!)).join(" ");

/** The issue-6 verdict on `points` (undefined without a 1-block size). */
export function oneBlockVerdict(points: readonly LatencyPoint[]): string | undefined {
  const one = points.find((p) => p.blocks === 1);
  if (!one) return undefined;
  const pass = one.verified > 0 && one.p50Ms <= ONE_BLOCK_TARGET_MS;
  return `1 block p50 <= ${ONE_BLOCK_TARGET_MS} ms: ${pass ? "PASS" : "FAIL"} (p50 ${f(one.p50Ms)} ms, p95 ${
    f(one.p95Ms)
  } ms, ${one.verified}/${one.rounds} rounds verified)`;
}

/** The printed report. */
export function formatLatencyReport(
  points: readonly LatencyPoint[],
  o: { quick: boolean; paths: Record<string, number>; control: Record<string, number> },
): string {
  const w = [7, 9, 9, 9, 9, 9, 10, 22, 9];
  const lines = [
    "",
    "dispatch (prepare sent) to publish acknowledged, ms, per verified round:",
    pad(["blocks", "verified", "p50", "p95", "max", "mean", "MiB/plan", "p50 by direction", "GB/s@p50"], w),
  ];
  for (const p of points) {
    const dirs = Object.entries(p.p50ByDirection).map(([d, ms]) => `${d} ${f(ms)}`).join(", ") || "-";
    lines.push(
      pad([
        p.blocks,
        `${p.verified}/${p.rounds}`,
        f(p.p50Ms),
        f(p.p95Ms),
        f(p.maxMs),
        f(p.meanMs),
        f(p.bytesPerPlan / 2 ** 20, 2),
        dirs,
        f(p.gbpsAtP50, 1),
      ], w),
    );
  }
  const total = Object.values(o.paths).reduce((t, x) => t + x, 0);
  lines.push(
    "",
    `payload bytes by worker data path: ${
      Object.entries(o.paths).map(([k, v]) => `${k} ${v}${total ? ` (${f((100 * v) / total, 0)}%)` : ""}`).join(", ")
    }`,
  );
  const c = o.control;
  if (c.transfer_publish_samples) {
    lines.push(
      `control plane window (${c.transfer_publish_samples} plans, warm-ups included): p50 ${
        f(c.transfer_publish_ms_p50!)
      } ms, p95 ${f(c.transfer_publish_ms_p95!)} ms, max ${f(c.transfer_publish_ms_max!)} ms` +
        (c.transfer_publish_1block_samples
          ? `; 1-block (${c.transfer_publish_1block_samples}): p50 ${f(c.transfer_publish_1block_ms_p50!)} ms, p95 ${
            f(c.transfer_publish_1block_ms_p95!)
          } ms`
          : "") +
        (c.transfer_publish_1block_prepare_ms_p50 !== undefined
          ? ` (p50 to the prepare acks ${f(c.transfer_publish_1block_prepare_ms_p50)} ms, then to the execute acks ${
            f(c.transfer_publish_1block_execute_ms_p50!)
          } ms, the rest is publish)`
          : ""),
    );
  }
  lines.push(
    `plans: ${c.transfer_completed ?? 0} completed, ${c.transfer_aborted ?? 0} aborted, ${
      c.transfer_blocks ?? 0
    } blocks`,
  );
  const verdict = oneBlockVerdict(points);
  if (verdict) lines.push("", `target: ${verdict}${o.quick ? " [--quick: CPU host path, informational]" : ""}`);
  return lines.join("\n");
}
