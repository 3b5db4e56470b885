/**
 * Runs named configurations of `bun bench e2e` (the same routing policy and transfer switches per
 * name) on simulated clusters, one run per seed, and summarises the seeds as e2e summarises its
 * repetitions: per-scalar 95% intervals and vLLM `bench serve` keys. A seed chooses the workload's
 * generation (for generated workloads), its Poisson arrivals and the engines' step noise.
 * @module
 */
import type { WorkloadArrival } from "../driver/ladder_arrival.ts";
import { aggregateRun } from "../driver/aggregate.ts";
import { type ConfigurationResult, summarizeRepetitions } from "../driver/repetitions.ts";
import type { RequestRecord } from "../driver/request_record.ts";
import type { SchedulerConfig } from "../../lib/local/scheduler.ts";
import { splitTransferSettings } from "../../lib/transfer/control/transfer_tuning.ts";
import type { EngineProfile } from "../calibration/engine_profile.ts";
import { CONFIGURATION_NAMES, MULTI_GPU_SETTINGS } from "../configurations.ts";
import { clusterLayout, type DeviceLocalCopy, type LinkKind } from "./cluster_layout.ts";
import { simulateRun } from "./simulated_run.ts";
import { type Perturbation, stepTimer } from "./step_timer.ts";

/** The simulated cluster and run settings every configuration shares. */
export interface SimulationSettings {
  profile: EngineProfile;
  perturbation: Perturbation;
  gpus: number;
  ranksPerGpu: number;
  links: LinkKind;
  deviceLocalCopy: DeviceLocalCopy | null;
  seeds: readonly number[];
  /** KV blocks of each rank. */
  numBlocks: number;
  blockSize: number;
  scheduler: SchedulerConfig;
  messageMs: number;
  /** Extra slowdown of decode-only and other steps while ranks share a GPU (1: ideal sharing). */
  sharedGpuPenalty: { decode: number; other: number };
  /** Host time per step, ms, in place of the profile's (undefined: the profile's). */
  hostOverheadMs?: number;
  maxInFlight?: number;
  transferMode: "auto" | "force";
  transferOptions: Record<string, unknown>;
  log: (line: string) => void;
  /** Called with each seed's per-request records, e.g. to save them. */
  onRun?: (configuration: string, seed: number, records: readonly RequestRecord[]) => void;
}

/** One simulated run's own figures (beyond the driver's metrics). */
export interface SimulatedRunSummary {
  workload: string;
  configuration: string;
  seed: number;
  simulatedS: number;
  wallS: number;
  /** Simulated seconds per wall second. */
  speed: number;
  events: number;
  /** Conservation violations (empty: every request finished once, page table equals the workers, nothing leaked). */
  audit: string[];
  gpuUtilisation: number[];
}

/** Configurations the simulator runs: every multi-rank one of e2e (single-gpu has no cluster to simulate). */
export const SIMULATED_CONFIGURATIONS = CONFIGURATION_NAMES.filter((n) => n !== "single-gpu");

/** Runs configuration `name` once per seed. */
export async function simulateConfiguration(
  name: string,
  workloadFor: (seed: number) => WorkloadArrival,
  s: SimulationSettings,
): Promise<{ result: ConfigurationResult; runs: SimulatedRunSummary[] }> {
  if (!(SIMULATED_CONFIGURATIONS as readonly string[]).includes(name)) {
    throw new RangeError(
      `the simulator runs the configurations ${SIMULATED_CONFIGURATIONS.join(", ")}; got ${JSON.stringify(name)}`,
    );
  }
  const setting = MULTI_GPU_SETTINGS[name as keyof typeof MULTI_GPU_SETTINGS];
  const wantsTransfer = setting.transfer.foreground || setting.transfer.background;
  const { options, tuning } = splitTransferSettings(s.transferOptions);
  const layout = clusterLayout({
    gpus: s.gpus,
    ranksPerGpu: s.ranksPerGpu,
    links: s.links,
    deviceLocalCopy: s.deviceLocalCopy,
    transfer: s.profile.transfer,
  });
  const ranks = layout.rankGpus.length;
  const profile = s.hostOverheadMs === undefined ? s.profile : { ...s.profile, hostOverheadMs: s.hostOverheadMs };
  const result: ConfigurationResult = {
    name,
    description: `${ranks} simulated ranks on ${s.gpus} GPU${s.gpus === 1 ? "" : "s"}, policy ${setting.policy}, ` +
      `transfers ${wantsTransfer ? s.transferMode : "off"}`,
    status: "ok",
    repetitions: [],
    completeRepetitions: 0,
    intervals: {},
  };
  const runs: SimulatedRunSummary[] = [];
  for (const [index, seed] of s.seeds.entries()) {
    const { workload, arrival } = workloadFor(seed);
    const run = await simulateRun(workload, {
      arrival,
      ...(s.maxInFlight !== undefined ? { maxInFlight: s.maxInFlight } : {}),
      requestIdPrefix: `${name}-s${seed}-`,
      cluster: {
        rankGpus: layout.rankGpus,
        topology: layout.topology,
        routing: { policy: setting.policy },
        // What --transfer-options sets (a switch included) wins over the configuration's defaults.
        transfers: wantsTransfer ? { ...setting.transfer, mode: s.transferMode, ...options, ...tuning } : "off",
        numBlocks: s.numBlocks,
        blockSize: s.blockSize,
        kvBlockBytes: s.profile.model.kvBytesPerToken * s.blockSize,
        scheduler: s.scheduler,
        stepTime: (rank) => stepTimer(profile, s.perturbation, seed * 1_000_003 + rank),
        payloadCost: layout.payloadCost,
        messageMs: s.messageMs,
        sharedGpuPenalty: s.sharedGpuPenalty,
      },
    });
    const metrics = aggregateRun(run);
    s.onRun?.(name, seed, run.records);
    const complete = metrics.failed === 0 && run.audit.length === 0;
    result.repetitions.push({
      index,
      complete,
      metrics,
      ...(complete ? {} : { error: [...run.audit, ...metrics.errors].join("; ") }),
    });
    runs.push({
      workload: workload.name,
      configuration: name,
      seed,
      simulatedS: run.simulatedS,
      wallS: run.wallS,
      speed: run.wallS > 0 ? run.simulatedS / run.wallS : Infinity,
      events: run.events,
      audit: run.audit,
      gpuUtilisation: run.gpuUtilisation,
    });
    s.log(
      `  ${name} seed ${seed}: ${metrics.outputThroughput.toFixed(1)} out tok/s, TTFT ${
        metrics.ttftMs.mean.toFixed(1)
      } ms, reuse ${(metrics.tokenReuse * 100).toFixed(1)}%, ${run.simulatedS.toFixed(1)} sim s in ${
        run.wallS.toFixed(1)
      } s${complete ? "" : `, INCOMPLETE: ${result.repetitions.at(-1)?.error}`}`,
    );
  }
  return { result: summarizeRepetitions(result), runs };
}
