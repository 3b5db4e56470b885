/**
 * The sweep as a text table: each point's median device and wall time, and for decode steps the
 * bytes they must read (weights once, plus the KV of every context token) as a rate against the
 * device's measured copy bandwidth, the ceiling a decode step approaches.
 * @module
 */
import type { SweepFile } from "./sweep_file.ts";

/** One line per point, grouped by kind, then the skipped shapes and the sweep's wall time. */
export function formatSweepTable(s: SweepFile): string {
  const width = Math.max(5, ...s.points.map((p) => p.label.length));
  const lines = [
    `sweep on ${s.device} (${s.backend}), ${s.model.name}, block ${s.model.blockSize}, KV cache ${s.kvCapacityTokens} tokens; ` +
    `copy ceiling ${(s.copyBytesPerS / 1e9).toFixed(0)} GB/s (read + write)`,
    `  ${"point".padEnd(width)}   device ms    wall ms   decode read rate`,
  ];
  for (const p of s.points) {
    let rate = "";
    if (p.kind === "decode") {
      const bytes = s.weightBytes + p.work.decodeContext * s.model.kvBytesPerToken;
      const bps = bytes / (p.ms / 1e3);
      rate = `${(bps / 1e9).toFixed(0)} GB/s = ${((100 * bps) / s.copyBytesPerS).toFixed(0)}% of copy`;
    }
    lines.push(
      `  ${p.label.padEnd(width)}   ${p.ms.toFixed(3).padStart(9)}   ${p.wallMs.toFixed(3).padStart(8)}   ${rate}`,
    );
  }
  for (const k of s.skipped) lines.push(`  skipped ${k.label}: ${k.why}`);
  lines.push(`  ${s.points.length} points in ${s.wallSeconds.toFixed(1)} s of sweep wall time`);
  return lines.join("\n");
}
