/**
 * Text tables of the calibration: every measured point beside the model's prediction with its
 * error, and the fitted coefficients in words.
 * @module
 */
import type { EngineProfile } from "./engine_profile.ts";
import { type EngineFit, errorPct } from "./engine_fit.ts";
import { transferLine } from "./transfer_defaults.ts";

const ms = (x: number) => (x >= 100 ? x.toFixed(1) : x >= 10 ? x.toFixed(2) : x.toFixed(3));

/** Measured vs predicted per point, then the mean and max absolute error. */
export function formatFitTable(fit: EngineFit): string {
  const width = Math.max(5, ...fit.points.map((p) => p.label.length));
  const lines = [`  ${"point".padEnd(width)}   measured ms   predicted ms    error`];
  for (const p of fit.points) {
    const e = errorPct(p);
    lines.push(
      `  ${p.label.padEnd(width)}   ${ms(p.measuredMs).padStart(11)}   ${ms(p.predictedMs).padStart(12)}   ${
        `${e >= 0 ? "+" : ""}${e.toFixed(1)}%`.padStart(6)
      }`,
    );
  }
  lines.push(
    `  ${fit.points.length} points: mean |error| ${fit.meanAbsErrorPct.toFixed(1)}%, max |error| ${
      fit.maxAbsErrorPct.toFixed(1)
    }%`,
  );
  return lines.join("\n");
}

/** The profile's coefficients and host and transfer figures, one line each. */
export function formatProfileSummary(p: EngineProfile): string {
  const c = p.coefficients;
  const line = transferLine(p.transfer);
  const kvRate = c.kvReadMs > 0
    ? `${(p.model.kvBytesPerToken / c.kvReadMs / 1e6).toFixed(0)} GB/s`
    : "no measurable cost";
  return [
    `  fixed             ${ms(c.fixedMs)} ms per step`,
    `  per decode seq    ${(c.decodeSeqMs * 1e3).toFixed(2)} us`,
    `  per prefill seq   ${(c.prefillSeqMs * 1e3).toFixed(2)} us`,
    `  per token         ${(c.tokenMs * 1e3).toFixed(3)} us beyond a knee of ${c.kneeTokens} tokens per step`,
    `  per KV token read ${(c.kvReadMs * 1e6).toFixed(2)} ns (${kvRate} at ${p.model.kvBytesPerToken} bytes a token)`,
    `  per attn pair     ${(c.pairMs * 1e6).toFixed(4)} ns`,
    `  host overhead     ${ms(p.hostOverheadMs)} ms per step (${p.hostOverheadSource})`,
    `  transfer          ${line.latencyMs.toFixed(4)} ms + bytes at ${
      (line.bytesPerMs / 1e6).toFixed(0)
    } GB/s, ceiling ${p.transfer.linkCeilingGBps} GB/s (${p.transfer.source})`,
  ].join("\n");
}
