/**
 * Plain-string SVG building blocks shared by the charts: escaping, the document wrapper, a
 * colour palette and "nice" axis ticks. No DOM, canvas or browser involved.
 * @module
 */

/** Escapes text for use in SVG element content and attribute values. */
export function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(
    /'/g,
    "&apos;",
  );
}

/** Series colours (colour-blind-safe Okabe-Ito order). */
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];

/** Distinct colours before seriesColor repeats. */
export const PALETTE_SIZE = PALETTE.length;

/** Colour of the i-th series (the palette repeats). */
export function seriesColor(i: number): string {
  return PALETTE[i % PALETTE.length] as string;
}

/** A complete SVG document of the given size around `body`. */
export function svgDocument(width: number, height: number, body: string): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    body,
    "</svg>",
    "",
  ].join("\n");
}

/** Evenly spaced round tick values from 0 (or `min`) up to at least `max`. */
export function niceTicks(min: number, max: number, target = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) {
    throw new RangeError(`tick range must be finite, got [${min}, ${max}]`);
  }
  if (max <= min) max = min + 1;
  const raw = (max - min) / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * mag >= raw) ?? 10) * mag;
  const start = Math.floor(min / step) * step;
  const ticks: number[] = [];
  for (let v = start; v < max + step * 0.5 && ticks.length < 50; v += step) ticks.push(Number(v.toPrecision(12)));
  if ((ticks[ticks.length - 1] as number) < max) {
    ticks.push(Number(((ticks[ticks.length - 1] as number) + step).toPrecision(12)));
  }
  return ticks;
}

/** A short label for a tick value (1.5k, 0.25, 12). */
export function formatTick(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toPrecision(3)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(3)}k`;
  return `${+v.toPrecision(3)}`;
}

/** Text element helper. */
export function svgText(x: number, y: number, text: string, attrs = ""): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}"${attrs ? ` ${attrs}` : ""}>${escapeXml(text)}</text>`;
}

/**
 * The opening of a chart body: the centred title, then the axes group opened with a horizontal
 * grid line and a label per y tick (`y` maps a value to its pixel row; the plot starts at `left`).
 */
export function titleAndYGrid(
  width: number,
  title: string,
  left: number,
  plotW: number,
  yTicks: readonly number[],
  y: (v: number) => number,
): string[] {
  const out: string[] = [];
  out.push(svgText(width / 2, 22, title, 'text-anchor="middle" font-size="15" font-weight="bold"'));
  out.push('<g class="axes">');
  for (const t of yTicks) {
    out.push(
      `<line x1="${left}" x2="${left + plotW}" y1="${y(t).toFixed(1)}" y2="${y(t).toFixed(1)}" stroke="#dddddd"/>`,
    );
    out.push(svgText(left - 6, y(t) + 4, formatTick(t), 'text-anchor="end"'));
  }
  return out;
}
