/**
 * Prometheus text exposition (format 0.0.4): label escaping, gauges, counters and labelled
 * histograms. Counters follow prometheus_client's convention (family `x`, sample `x_total`), which is
 * how vLLM's series look to the dashboards that scrape them.
 * @module
 */

/** Label names to values of one series. */
export type Labels = Readonly<Record<string, string>>;

/** One sample of a gauge or counter family. */
export interface Sample {
  labels: Labels;
  value: number;
}

/** Escapes a label value: backslash, double quote and newline. */
export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** Formats a sample value the way Prometheus reads it (+Inf, -Inf, NaN). */
function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

/** `{a="1",b="2"}`, or "" for no labels. */
export function formatLabels(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

function header(name: string, help: string, type: string): string {
  return `# HELP ${name} ${help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}\n# TYPE ${name} ${type}\n`;
}

/** A gauge family with its samples. */
export function renderGauge(name: string, help: string, samples: readonly Sample[]): string {
  return header(name, help, "gauge") +
    samples.map((s) => `${name}${formatLabels(s.labels)} ${formatValue(s.value)}\n`).join("");
}

/** A counter family `name` whose samples are named `name_total`. */
export function renderCounter(name: string, help: string, samples: readonly Sample[]): string {
  const family = name.endsWith("_total") ? name.slice(0, -"_total".length) : name;
  return header(family, help, "counter") +
    samples.map((s) => `${family}_total${formatLabels(s.labels)} ${formatValue(s.value)}\n`).join("");
}

function labelKey(labels: Labels): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** A counter family whose series are created on first increment. */
export class LabeledCounter {
  private readonly series = new Map<string, Sample>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  /** Adds `by` (>= 0) to the series with these labels. */
  inc(labels: Labels, by = 1): void {
    if (!(by >= 0)) throw new RangeError(`counter ${this.name} can only grow, got increment ${by}`);
    const key = labelKey(labels);
    const s = this.series.get(key);
    if (s) s.value += by;
    else this.series.set(key, { labels: { ...labels }, value: by });
  }

  /** Creates the series with these labels at 0 (a no-op when it exists). */
  ensure(labels: Labels): void {
    this.inc(labels, 0);
  }

  /** Current value of one series (0 when never incremented). */
  get(labels: Labels): number {
    return this.series.get(labelKey(labels))?.value ?? 0;
  }

  /** The family in text format. */
  render(): string {
    return renderCounter(this.name, this.help, [...this.series.values()]);
  }
}

interface HistogramSeries {
  labels: Labels;
  counts: number[]; // per bucket, not cumulative; last entry is +Inf
  sum: number;
  count: number;
}

/** A histogram family with fixed upper bounds, whose series are created on first observation. */
export class LabeledHistogram {
  private readonly series = new Map<string, HistogramSeries>();
  readonly buckets: readonly number[];
  constructor(
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
  ) {
    for (let i = 1; i < buckets.length; i++) {
      if (!(buckets[i]! > buckets[i - 1]!)) {
        throw new RangeError(`histogram ${name} buckets must increase, got ${buckets.join(",")}`);
      }
    }
    this.buckets = [...buckets];
  }

  /** The series with these labels, created empty when absent. */
  #series(labels: Labels): HistogramSeries {
    const key = labelKey(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { labels: { ...labels }, counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    return s;
  }

  /** Creates the series with these labels, empty (a no-op when it exists). */
  ensure(labels: Labels): void {
    this.#series(labels);
  }

  /** Adds whole bucket counts (per bucket, not cumulative, the last one +Inf) with their sum to a series. */
  add(labels: Labels, bucketCounts: readonly number[], sum: number): void {
    if (bucketCounts.length !== this.buckets.length + 1) {
      throw new RangeError(
        `histogram ${this.name} takes ${this.buckets.length + 1} bucket counts, got ${bucketCounts.length}`,
      );
    }
    const s = this.#series(labels);
    bucketCounts.forEach((c, i) => {
      s.counts[i]! += c;
      s.count += c;
    });
    s.sum += sum;
  }

  /** Records one value in the series with these labels. */
  observe(labels: Labels, value: number): void {
    const s = this.#series(labels);
    let i = this.buckets.findIndex((b) => value <= b);
    if (i < 0) i = this.buckets.length;
    s.counts[i]!++;
    s.sum += value;
    s.count++;
  }

  /** Observation count of one series (0 when never observed). */
  count(labels: Labels): number {
    return this.series.get(labelKey(labels))?.count ?? 0;
  }

  /** The family in text format: cumulative `_bucket{le}` lines, then `_sum` and `_count`. */
  render(): string {
    let out = header(this.name, this.help, "histogram");
    for (const s of this.series.values()) {
      let cumulative = 0;
      for (let i = 0; i <= this.buckets.length; i++) {
        cumulative += s.counts[i]!;
        const le = i < this.buckets.length ? formatValue(this.buckets[i]!) : "+Inf";
        out += `${this.name}_bucket${formatLabels({ ...s.labels, le })} ${cumulative}\n`;
      }
      out += `${this.name}_sum${formatLabels(s.labels)} ${formatValue(s.sum)}\n`;
      out += `${this.name}_count${formatLabels(s.labels)} ${s.count}\n`;
    }
    return out;
  }
}
