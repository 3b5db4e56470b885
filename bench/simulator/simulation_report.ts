/**
 * The simulator's own section of summary.md: where its step and transfer costs come from, and per
 * run the simulated time, the wall time it took, simulated seconds per wall second, events, GPU
 * utilisation and the conservation audit.
 * @module
 */
import type { EngineProfile } from "../calibration/engine_profile.ts";
import type { SimulatedRunSummary } from "./simulate_configurations.ts";

/** Markdown of the simulation section. */
export function simulationSection(runs: readonly SimulatedRunSummary[], profile: EngineProfile): string {
  const lines = [
    "## Simulation",
    "",
    `Step costs: ${profile.source}.`,
    `Transfer costs: ${profile.transfer.source}.`,
    "",
    "| workload | configuration | seed | simulated s | wall s | sim s / wall s | events | GPU busy mean / max | audit |",
    "|---|---|---:|---:|---:|---:|---:|---:|---|",
  ];
  for (const r of runs) {
    const u = r.gpuUtilisation;
    const mean = u.length ? u.reduce((a, b) => a + b, 0) / u.length : 0;
    const max = u.length ? Math.max(...u) : 0;
    lines.push(
      `| ${r.workload} | ${r.configuration} | ${r.seed} | ${r.simulatedS.toFixed(1)} | ${r.wallS.toFixed(1)} | ${
        r.speed.toFixed(1)
      } | ${r.events} | ${(mean * 100).toFixed(0)}% / ${(max * 100).toFixed(0)}% | ${
        r.audit.length === 0 ? "ok" : r.audit.join("; ")
      } |`,
    );
  }
  return lines.join("\n") + "\n";
}
