/**
 * Line chart with markers as an SVG string, e.g. KV transfer latency against payload size per
 * GPU pair. The x axis can be logarithmic (sizes 1, 2, 4, ... 64 blocks).
 * @module
 */
import {
  escapeXml,
  formatTick,
  niceTicks,
  PALETTE_SIZE,
  seriesColor,
  svgDocument,
  svgText,
  titleAndYGrid,
} from "./svg.ts";

/** One line. */
export interface LineSeries {
  name: string;
  points: { x: number; y: number }[];
}

/** What to draw. */
export interface LineChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  series: LineSeries[];
  logX?: boolean;
  width?: number;
  height?: number;
}

/** Renders a line chart. */
export function lineChart(spec: LineChartSpec): string {
  const pts = spec.series.flatMap((s) => s.points);
  if (pts.length === 0) throw new RangeError(`line chart ${JSON.stringify(spec.title)} has no points`);
  for (const p of pts) {
    if (!Number.isFinite(p.x) || !Number.isFinite(p.y)) {
      throw new RangeError(`line chart point must be finite, got (${p.x}, ${p.y})`);
    }
    if (spec.logX && p.x <= 0) throw new RangeError(`log x axis needs x > 0, got ${p.x}`);
  }
  // Legend below the axis title, two columns, as many rows as the series need.
  const legendRows = Math.ceil(spec.series.length / 2);
  const width = spec.width ?? 560;
  const height = (spec.height ?? 380) + legendRows * 16;
  const m = { left: 70, right: 20, top: 40, bottom: 56 + legendRows * 16 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;
  const fx = (x: number) => (spec.logX ? Math.log2(x) : x);
  let xMin = Math.min(...pts.map((p) => fx(p.x)));
  let xMax = Math.max(...pts.map((p) => fx(p.x)));
  if (xMax === xMin) {
    xMin -= 1;
    xMax += 1;
  }
  const yTicks = niceTicks(0, Math.max(...pts.map((p) => p.y), 0) || 1);
  const yMax = yTicks[yTicks.length - 1] as number;
  const px = (x: number) => m.left + ((fx(x) - xMin) / (xMax - xMin)) * plotW;
  const py = (v: number) => m.top + plotH - (v / yMax) * plotH;
  const xTicks = spec.logX
    ? [...new Set(pts.map((p) => p.x))].sort((a, b) => a - b)
    : niceTicks(xMin, xMax).filter((t) => t >= xMin && t <= xMax);
  const out = titleAndYGrid(width, spec.title, m.left, plotW, yTicks, py);
  for (const t of xTicks) out.push(svgText(px(t), m.top + plotH + 16, formatTick(t), 'text-anchor="middle"'));
  out.push(`<line x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${m.top + plotH}" stroke="#333333"/>`);
  out.push(
    `<line x1="${m.left}" x2="${m.left + plotW}" y1="${m.top + plotH}" y2="${m.top + plotH}" stroke="#333333"/>`,
  );
  out.push(svgText(m.left + plotW / 2, m.top + plotH + 36, spec.xLabel, 'text-anchor="middle"'));
  out.push(
    svgText(
      16,
      m.top + plotH / 2,
      spec.yLabel,
      `text-anchor="middle" transform="rotate(-90 16 ${(m.top + plotH / 2).toFixed(1)})"`,
    ),
  );
  out.push("</g>");
  spec.series.forEach((s, si) => {
    const sorted = [...s.points].sort((a, b) => a.x - b.x);
    const color = seriesColor(si);
    // Past the palette, lines repeat colours but are dashed, so every series stays distinguishable.
    const dash = si >= PALETTE_SIZE ? ' stroke-dasharray="6 3"' : "";
    out.push(`<g class="series" data-name="${escapeXml(s.name)}">`);
    out.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2"${dash} points="${
        sorted.map((p) => `${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(" ")
      }"/>`,
    );
    for (const p of sorted) {
      out.push(
        `<circle class="point" cx="${px(p.x).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3" fill="${color}"><title>${
          escapeXml(`${s.name}: ${formatTick(p.x)} -> ${formatTick(p.y)}`)
        }</title></circle>`,
      );
    }
    out.push("</g>");
    const lx = m.left + (si % 2) * (plotW / 2);
    const ly = m.top + plotH + 56 + Math.floor(si / 2) * 16;
    out.push(
      `<line x1="${lx.toFixed(1)}" x2="${(lx + 14).toFixed(1)}" y1="${(ly - 4).toFixed(1)}" y2="${
        (ly - 4).toFixed(1)
      }" stroke="${color}" stroke-width="3"${dash}/>`,
    );
    out.push(svgText(lx + 20, ly, s.name));
  });
  return svgDocument(width, height, out.join("\n"));
}
