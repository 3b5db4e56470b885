/**
 * The markdown summary: one table per scenario, one row per configuration, means across complete
 * repetitions with their 95% Student-t half-widths; then, when any configuration transferred, a
 * table of what verifies its transfers (plans by kind, released source blocks, publish latency);
 * under a rate ladder, a table with one row per configuration and rung.
 * @module
 */
import type { ConfigurationResult } from "../driver/repetitions.ts";
import type { ConfidenceInterval } from "../stats/interval.ts";
import type { RungRow } from "./rung_table.ts";
import type { BenchResults, ScenarioResult } from "./schema.ts";

/** Renders rows as a GitHub-flavoured markdown table (pipes in cells are escaped). */
export function markdownTable(headers: string[], rows: string[][]): string {
  const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");
  const lines = [`| ${headers.map(cell).join(" | ")} |`, `|${headers.map(() => "---").join("|")}|`];
  for (const r of rows) {
    if (r.length !== headers.length) {
      throw new RangeError(`markdown row has ${r.length} cells for ${headers.length} headers: ${JSON.stringify(r)}`);
    }
    lines.push(`| ${r.map(cell).join(" | ")} |`);
  }
  return lines.join("\n");
}

/** "12.3 ± 0.4" (or just the mean with one repetition, "—" without data). */
export function formatInterval(ci: ConfidenceInterval | undefined, digits: number, scale = 1): string {
  if (!ci || !Number.isFinite(ci.mean)) return "—";
  const m = (ci.mean * scale).toFixed(digits);
  return ci.halfWidth === null ? m : `${m} ± ${(ci.halfWidth * scale).toFixed(digits)}`;
}

/** Interval cells of `i` in column order: [metric, digits, scale?] per column. */
function intervalCells(
  i: ConfigurationResult["intervals"],
  columns: readonly (readonly [string, number, number?])[],
): string[] {
  return columns.map(([k, digits, scale]) => formatInterval(i[k], digits, scale));
}

/** A share in [0, 1] as a percentage with two decimals, "12.34%". */
export function formatPercent(x: number): string {
  return `${(x * 100).toFixed(2)}%`;
}

/** A reference share: one percentage, or "lo%-hi%" for a published range. */
export function formatShare(share: number | readonly [number, number]): string {
  return typeof share === "number" ? formatPercent(share) : `${formatPercent(share[0])}-${formatPercent(share[1])}`;
}

function configurationRow(c: ConfigurationResult): string[] {
  const i = c.intervals;
  const last = [...c.repetitions].reverse().find((r) => r.complete)?.metrics;
  const ranks = last ? Object.entries(last.perRankRequests).map(([r, n]) => `${r}:${n}`).join(" ") : "—";
  const status = c.status === "ok" ? "ok" : `${c.status}${c.reason ? `: ${c.reason}` : ""}`;
  return [
    c.name,
    status,
    `${c.completeRepetitions}/${c.repetitions.length}`,
    ...intervalCells(i, [
      ["outputThroughput", 1],
      ["requestThroughput", 2],
      ["ttftMean", 1],
      ["ttftP99", 1],
      ["tpotMean", 2],
      ["e2eMean", 1],
      ["prefixHitRate", 1, 100],
      ["tokenReuse", 1, 100],
    ]),
    transferCell(i),
    ranks,
  ];
}

/** "done / blocks", then aborted plans and lease-moved routes when there were any. */
function transferCell(i: ConfigurationResult["intervals"]): string {
  const n = (k: string) => +(i[k]?.mean ?? 0).toFixed(1);
  if (!i.transferCount) return "—";
  const extra = [
    n("transferAborted") ? `${n("transferAborted")} aborted` : "",
    n("leaseRoutes") ? `${n("leaseRoutes")} lease routes` : "",
  ].filter(Boolean);
  return [`${n("transferCount")} / ${n("transferBlocks")}`, ...extra].join(", ");
}

/** One row per configuration that started transfer plans: kinds done, releases, dispatch-to-publish ms. */
export function transferTable(configs: readonly ConfigurationResult[]): string | undefined {
  const rows = configs.filter((c) =>
    (c.intervals.transferCount?.mean ?? 0) > 0 || (c.intervals.transferAborted?.mean ?? 0) > 0
  ).map((c) => {
    const i = c.intervals;
    return [
      c.name,
      ...intervalCells(i, [
        ["transferCount", 1],
        ["transferPrefixCopies", 1],
        ["transferOffloads", 1],
        ["transferBackground", 1],
        ["transferAborted", 1],
        ["transferBlocks", 1],
        ["transferReleasedBlocks", 1],
        ["leaseRoutes", 1],
        ["transferPublishP50", 2],
        ["transferPublishP95", 2],
        ["transferPublishMax", 2],
        ["transferPublish1BlockP50", 2],
      ]),
    ];
  });
  if (rows.length === 0) return undefined;
  return markdownTable(
    [
      "configuration",
      "plans done",
      "prefix copies",
      "offloads (move)",
      "background",
      "aborted",
      "blocks",
      "source blocks released",
      "lease routes",
      "publish p50 ms",
      "publish p95 ms",
      "publish max ms",
      "1-block p50 ms",
    ],
    rows,
  );
}

/** One row per configuration and rung: offered rate, requests, achieved req/s and tok/s, TTFT, TPOT, hit rate. */
export function rungTable(rows: readonly RungRow[]): string {
  return markdownTable(
    [
      "configuration",
      "rung",
      "offered req/s",
      "requests",
      "reps",
      "achieved req/s",
      "output tok/s",
      "mean TTFT ms",
      "p99 TTFT ms",
      "mean TPOT ms",
      "hit %",
    ],
    rows.map((r) => [
      r.configuration,
      r.phase,
      String(r.rate),
      String(r.requests),
      String(r.repetitions),
      ...intervalCells(r.intervals, [
        ["requestThroughput", 2],
        ["outputThroughput", 1],
        ["ttftMean", 1],
        ["ttftP99", 1],
        ["tpotMean", 2],
        ["prefixHitRate", 1, 100],
      ]),
    ]),
  );
}

/** The section of one scenario. */
export function scenarioSection(s: ScenarioResult): string {
  const w = s.workload;
  const lines = [
    `## ${w.name}`,
    "",
    `${w.description}. ${w.requests} requests; arrival ${s.arrival}; max in flight ${
      s.maxInFlight ?? "unlimited"
    }; seed ${w.seed ?? "—"}.`,
  ];
  if (s.traceProfile) {
    const ref = w.reference;
    lines.push(
      `Trace profile (block ${s.traceProfile.blockSize}): request share ${
        formatPercent(s.traceProfile.requestShare)
      }, token share ${formatPercent(s.traceProfile.tokenShare)}${
        ref ? ` (reference ${formatPercent(ref.requestShare)} / ${formatShare(ref.tokenShare)})` : ""
      }.`,
    );
  }
  lines.push("");
  lines.push(markdownTable(
    [
      "configuration",
      "status",
      "reps",
      "output tok/s",
      "req/s",
      "mean TTFT ms",
      "p99 TTFT ms",
      "mean TPOT ms",
      "mean E2E ms",
      "hit %",
      "token reuse %",
      "transfers n / blocks",
      "requests per rank",
    ],
    s.configurations.map(configurationRow),
  ));
  if (s.ladder && s.ladder.rows.length > 0) {
    lines.push(
      "",
      "Per rung (achieved rates over the rung's own span, first request sent to last finished; each rung drains before the next starts when the workload sets phase barriers):",
      "",
      rungTable(s.ladder.rows),
    );
  }
  const transfers = transferTable(s.configurations);
  if (transfers) {
    lines.push(
      "",
      "Transfers (publish = plan dispatch to the destination's publish ack, control messages included; per repetition over the control plane's recent-plan window):",
      "",
      transfers,
    );
  }
  return lines.join("\n");
}

/** The whole summary.md. */
export function renderSummary(r: BenchResults): string {
  const md = r.metadata;
  const gpus = md.gpus.length ? md.gpus.map((g) => `${g.index}: ${g.name}`).join(", ") : "none";
  const head = [
    `# ${r.entry} benchmark`,
    "",
    `Created ${md.createdAt}; git ${md.gitRevision ?? "unknown"}${
      md.gitDirty ? " (dirty)" : ""
    }; ${md.runtime.name} ${md.runtime.version}; GPUs: ${gpus}.`,
    md.model ? `Model: ${JSON.stringify(md.model)}.` : "",
    "Values are means across complete repetitions ± the half-width of the two-sided 95% Student-t interval; TPOT = (finish - first token) / (N - 1) over requests with N > 1.",
  ].filter(Boolean);
  return `${[...head, "", ...r.scenarios.map(scenarioSection)].join("\n\n").replace(/\n{3,}/g, "\n\n")}\n`;
}
