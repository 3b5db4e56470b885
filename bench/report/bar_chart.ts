/**
 * Grouped bar chart with interval error bars, as an SVG string: one group per category (e.g. a
 * workload or 1x/3x/5x), one bar per series (a configuration), whiskers at value ± error.
 * Missing values (a configuration that did not run) leave a gap marked "n/a".
 * @module
 */
import { escapeXml, formatTick, niceTicks, seriesColor, svgDocument, svgText, titleAndYGrid } from "./svg.ts";

/** One series of a grouped bar chart. */
export interface BarSeries {
  name: string;
  /** One value per category; null where there is none. */
  values: (number | null)[];
  /** Half-widths of the intervals, one per category; null for no error bar. */
  errors?: (number | null)[];
}

/** What to draw. */
export interface BarChartSpec {
  title: string;
  yLabel: string;
  categories: string[];
  series: BarSeries[];
  width?: number;
  height?: number;
}

/** Renders a grouped bar chart. */
export function groupedBarChart(spec: BarChartSpec): string {
  for (const s of spec.series) {
    if (s.values.length !== spec.categories.length) {
      throw new RangeError(
        `series ${JSON.stringify(s.name)} has ${s.values.length} values for ${spec.categories.length} categories`,
      );
    }
    if (s.errors && s.errors.length !== s.values.length) {
      throw new RangeError(
        `series ${JSON.stringify(s.name)} has ${s.errors.length} errors for ${s.values.length} values`,
      );
    }
  }
  const width = spec.width ?? Math.max(480, 120 + spec.categories.length * (40 + spec.series.length * 28));
  const legendRows = Math.ceil(spec.series.length / 4);
  const height = spec.height ?? 360 + legendRows * 18;
  const m = { left: 70, right: 20, top: 40, bottom: 60 + legendRows * 18 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;
  let top = 0;
  for (const s of spec.series) {
    s.values.forEach((v, i) => {
      if (v !== null && Number.isFinite(v)) top = Math.max(top, v + Math.max(0, s.errors?.[i] ?? 0));
    });
  }
  const ticks = niceTicks(0, top > 0 ? top : 1);
  const yMax = ticks[ticks.length - 1] as number;
  const y = (v: number) => m.top + plotH - (Math.max(0, v) / yMax) * plotH;
  const out = titleAndYGrid(width, spec.title, m.left, plotW, ticks, y);
  out.push(`<line x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${m.top + plotH}" stroke="#333333"/>`);
  out.push(
    `<line x1="${m.left}" x2="${m.left + plotW}" y1="${m.top + plotH}" y2="${m.top + plotH}" stroke="#333333"/>`,
  );
  out.push(
    svgText(
      16,
      m.top + plotH / 2,
      spec.yLabel,
      `text-anchor="middle" transform="rotate(-90 16 ${(m.top + plotH / 2).toFixed(1)})"`,
    ),
  );
  out.push("</g>");
  const groupW = plotW / Math.max(1, spec.categories.length);
  const barW = Math.min(40, (groupW * 0.8) / Math.max(1, spec.series.length));
  out.push('<g class="bars">');
  spec.categories.forEach((cat, ci) => {
    const gx = m.left + ci * groupW + (groupW - barW * spec.series.length) / 2;
    spec.series.forEach((s, si) => {
      const v = s.values[ci];
      const x = gx + si * barW;
      const label = `${s.name} / ${cat}`;
      if (v === null || v === undefined || !Number.isFinite(v)) {
        out.push(
          svgText(
            x + barW / 2,
            m.top + plotH - 4,
            "n/a",
            'class="missing" text-anchor="middle" font-size="9" fill="#888888"',
          ),
        );
        return;
      }
      const err = s.errors?.[ci];
      const tip = `${label}: ${formatTick(v)}${err !== null && err !== undefined ? ` ± ${formatTick(err)}` : ""}`;
      out.push(
        `<rect class="bar" x="${(x + 1).toFixed(1)}" y="${y(v).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${
          (m.top + plotH - y(v)).toFixed(1)
        }" fill="${seriesColor(si)}"><title>${escapeXml(tip)}</title></rect>`,
      );
      if (err !== null && err !== undefined && Number.isFinite(err) && err > 0) {
        const cx = (x + barW / 2).toFixed(1);
        const hi = y(v + err).toFixed(1);
        const lo = y(v - err).toFixed(1);
        out.push(
          `<g class="errorbar" stroke="#222222"><line x1="${cx}" x2="${cx}" y1="${hi}" y2="${lo}"/><line x1="${
            (x + barW / 2 - 4).toFixed(1)
          }" x2="${(x + barW / 2 + 4).toFixed(1)}" y1="${hi}" y2="${hi}"/><line x1="${
            (x + barW / 2 - 4).toFixed(1)
          }" x2="${(x + barW / 2 + 4).toFixed(1)}" y1="${lo}" y2="${lo}"/></g>`,
        );
      }
    });
    out.push(svgText(m.left + ci * groupW + groupW / 2, m.top + plotH + 18, cat, 'text-anchor="middle"'));
  });
  out.push("</g>");
  out.push('<g class="legend">');
  spec.series.forEach((s, si) => {
    const lx = m.left + (si % 4) * (plotW / 4);
    const ly = height - m.bottom + 40 + Math.floor(si / 4) * 18;
    out.push(
      `<rect x="${lx.toFixed(1)}" y="${(ly - 10).toFixed(1)}" width="12" height="12" fill="${seriesColor(si)}"/>`,
    );
    out.push(svgText(lx + 16, ly, s.name));
  });
  out.push("</g>");
  return svgDocument(width, height, out.join("\n"));
}
