/**
 * What the suite reads from the running server: /metrics scrapes (every request bounded by a
 * deadline), /health, a probe completion, and the waits built on them: ranks up, load drained,
 * leaked KV blocks. Metric names are the server's contract: lmpool_healthy_ranks,
 * lmpool_rank_up{engine}, lmpool_worker_restarts_total{engine}, lmpool_kv_leaked_blocks{engine},
 * vllm:num_requests_running / vllm:num_requests_waiting{engine}.
 * @module
 */
import { MetricsSnapshot } from "./prometheus_text.ts";
import { completionBody } from "./load.ts";
import { sendClassified } from "./request_outcome.ts";

/** How often waits poll /metrics. */
export const POLL_MS = 100;

/** The contract's metric names. */
export const METRIC = {
  healthyRanks: "lmpool_healthy_ranks",
  rankUp: "lmpool_rank_up",
  restarts: "lmpool_worker_restarts_total",
  leakedBlocks: "lmpool_kv_leaked_blocks",
  running: "vllm:num_requests_running",
  waiting: "vllm:num_requests_waiting",
  inFlight: "lmpool_http_requests_in_flight",
  transfers: "lmpool_transfers_total",
} as const;

/** Reads one server's /metrics and /health. */
export class ServerWatch {
  constructor(
    readonly baseUrl: string,
    readonly model: string,
    readonly ranks: number,
  ) {}

  /** One scrape, or null when /metrics did not answer 200 within `timeoutMs`. */
  async scrape(timeoutMs = 2000): Promise<MetricsSnapshot | null> {
    try {
      const res = await fetch(`${this.baseUrl}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
      if (res.status !== 200) return null;
      return new MetricsSnapshot(await res.text(), performance.now());
    } catch {
      return null;
    }
  }

  /** /health's status, or null when it did not answer within `timeoutMs`. */
  async health(timeoutMs = 2000): Promise<number | null> {
    try {
      const res = await fetch(`${this.baseUrl}/health`, { signal: AbortSignal.timeout(timeoutMs) });
      await res.arrayBuffer();
      return res.status;
    } catch {
      return null;
    }
  }

  /** True when a short completion succeeds within `deadlineMs`. */
  async probe(deadlineMs = 10_000): Promise<boolean> {
    const o = await sendClassified(this.baseUrl, {
      label: "probe",
      path: "/v1/completions",
      body: completionBody(this.model, "probe", 2, false),
      stream: false,
      deadlineMs,
    });
    return o.kind === "completed";
  }

  /** True when `s` says every rank serves (lmpool_healthy_ranks == ranks). */
  allRanksUp(s: MetricsSnapshot): boolean {
    return s.value(METRIC.healthyRanks) === this.ranks;
  }

  /** Polls until `test` holds on a scrape; the scrape, or null after `timeoutMs`. */
  async waitFor(test: (s: MetricsSnapshot) => boolean, timeoutMs: number): Promise<MetricsSnapshot | null> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      const s = await this.scrape();
      if (s && test(s)) return s;
      await Bun.sleep(POLL_MS);
    }
    return null;
  }

  /** Waits for every rank up and a probe answered; false after `timeoutMs`. */
  async waitServing(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      const s = await this.scrape();
      if (s && this.allRanksUp(s) && (await this.probe(Math.max(1000, deadline - performance.now())))) return true;
      await Bun.sleep(POLL_MS);
    }
    return false;
  }

  /**
   * Waits until no request runs, waits or is in flight, then reads the leaked blocks (summed over
   * ranks), allowing `settleMs` for releases that trail the last response. `leaked` is null when
   * the server does not export lmpool_kv_leaked_blocks; `drained` false when work never ended.
   */
  async leakedAfterDrain(
    drainMs: number,
    settleMs = 3000,
  ): Promise<{ drained: boolean; leaked: number | null; reason: string }> {
    const idle = (s: MetricsSnapshot) =>
      (s.sum(METRIC.running) ?? 0) + (s.sum(METRIC.waiting) ?? 0) + (s.sum(METRIC.inFlight) ?? 0) === 0;
    const drained = await this.waitFor(idle, drainMs);
    if (!drained) {
      const s = await this.scrape();
      const leaked = s?.sum(METRIC.leakedBlocks) ?? null;
      return {
        drained: false,
        leaked,
        reason: `work did not drain within ${drainMs} ms (running ${s?.sum(METRIC.running)}, waiting ${
          s?.sum(METRIC.waiting)
        }, in flight ${s?.sum(METRIC.inFlight)})`,
      };
    }
    if (!drained.has(METRIC.leakedBlocks)) {
      return { drained: true, leaked: null, reason: `/metrics has no ${METRIC.leakedBlocks}` };
    }
    const clean = await this.waitFor((s) => idle(s) && s.sum(METRIC.leakedBlocks) === 0, settleMs);
    const last = clean ?? (await this.scrape());
    return { drained: true, leaked: last?.sum(METRIC.leakedBlocks) ?? null, reason: "" };
  }
}
