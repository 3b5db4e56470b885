/**
 * Reads the Prometheus text exposition format that /metrics serves: every sample with its
 * labels, and the sums and lookups the fault suite asks of them. A scrape is one immutable
 * snapshot, so one decision never mixes two scrapes.
 * @module
 */

/** One sample line: `name{labels} value`. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescapeLabel(v: string): string {
  return v.replace(/\\(.)/g, (_m, c: string) => (c === "n" ? "\n" : c));
}

/** Parses exposition text; comment lines and lines that are not samples are skipped. */
export function parsePrometheusText(text: string): MetricSample[] {
  const out: MetricSample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const brace = line.indexOf("{");
    const space = line.lastIndexOf(" ");
    if (space < 0) continue;
    const name = brace >= 0 && brace < space ? line.slice(0, brace) : line.slice(0, line.indexOf(" "));
    const labels: Record<string, string> = {};
    if (brace >= 0 && brace < space) {
      const body = line.slice(brace + 1, line.lastIndexOf("}"));
      for (const m of body.matchAll(LABEL)) labels[m[1]!] = unescapeLabel(m[2]!);
    }
    const value = Number(line.slice(space + 1));
    if (!Number.isNaN(value) || line.endsWith(" NaN")) out.push({ name, labels, value });
  }
  return out;
}

/** One scrape of /metrics, with lookups. */
export class MetricsSnapshot {
  readonly samples: readonly MetricSample[];

  constructor(text: string, readonly atMs: number) {
    this.samples = parsePrometheusText(text);
  }

  /** Samples of `name` whose labels include every pair of `labels`. */
  select(name: string, labels: Record<string, string> = {}): MetricSample[] {
    return this.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  }

  /** True when any sample of `name` is present. */
  has(name: string): boolean {
    return this.samples.some((s) => s.name === name);
  }

  /** The first matching sample's value, or undefined when none matches. */
  value(name: string, labels: Record<string, string> = {}): number | undefined {
    return this.select(name, labels)[0]?.value;
  }

  /** The sum over matching samples, or undefined when none matches. */
  sum(name: string, labels: Record<string, string> = {}): number | undefined {
    const xs = this.select(name, labels);
    return xs.length === 0 ? undefined : xs.reduce((a, s) => a + s.value, 0);
  }
}
