/**
 * Entry point of the control-plane process: `bun run lib/processes/control_main.ts '<json>'`, where
 * the JSON is a {@link ControlMainConfig}. Started and supervised by LLMEngine; exits when the
 * launcher's connection ends (so a killed launcher leaves no orphan), when no launcher connects in
 * time, on shutdown, or on SIGTERM/SIGINT.
 * @module
 */
import { realClock } from "../core/clock.ts";
import { codecWarmupRounds, warmTransferCodec } from "../transfer/codec_warmup.ts";
import { pid } from "../runtime/env.ts";
import { exitProcess, onParentExit, onTerminationSignal, processArgs } from "../runtime/subprocess.ts";
import { ControlPlane } from "./control_plane.ts";
import type { RoutingConfigInput } from "../global/routing_config.ts";
import type { TransferConfig, TransferConfigInput } from "../transfer/control/transfer_config.ts";
import { NvlinkTopology, type RankPair } from "../global/topology.ts";

/** What the launcher passes to a control-plane process. */
export interface ControlMainConfig {
  socketPath: string;
  epoch: number;
  worldSize: number;
  /** Direct NVLink pairs (logical ranks). */
  pairs: RankPair[];
  routing?: RoutingConfigInput;
  /** KV transfer options and constants, resolved by the launcher (default off). */
  transfers?: TransferConfigInput | TransferConfig;
  heartbeat?: { intervalMs: number; missLimit: number };
  /** Exit when no launcher has connected within this many ms (default 60000). */
  launcherTimeoutMs?: number;
}

/** Runs the control plane until its launcher goes away. */
export async function runControlPlane(config: ControlMainConfig): Promise<void> {
  const log = (line: string) => console.error(line);
  // deno-lint-ignore prefer-const -- assigned once, after the callbacks that read it are made
  let plane: ControlPlane | undefined;
  let stopping = false;
  const stop = async (code: number, why: string) => {
    if (stopping) return;
    stopping = true;
    log(`[control] exiting: ${why}`);
    await plane?.close();
    exitProcess(code);
  };
  onTerminationSignal((sig) => void stop(0, sig));
  onParentExit(() => void stop(1, "the launcher is gone"));
  // The process root picks the real clock; routing and transfers below take it injected.
  const clock = realClock;
  const noLauncher = clock.setTimeout(() => void stop(1, "no launcher connected"), config.launcherTimeoutMs ?? 60_000);
  plane = await ControlPlane.listen({
    socketPath: config.socketPath,
    epoch: config.epoch,
    pid: pid(),
    routing: config.routing,
    transfers: config.transfers,
    topology: new NvlinkTopology(config.worldSize, config.pairs),
    heartbeat: config.heartbeat,
    clock,
    log,
    onLauncherConnected: () => clock.clearTimeout(noLauncher),
    onLauncherGone: (reason) => void stop(0, `launcher connection ended (${reason})`),
    onShutdown: () => void stop(0, "shutdown requested"),
  });
  // Transfer messages are rare: their codec paths are warmed now, not on the first plans.
  if (plane.transfers.enabled) warmTransferCodec(codecWarmupRounds());
}

if (import.meta.main) {
  const arg = processArgs()[0];
  if (!arg) {
    console.error("usage: control_main.ts '<json ControlMainConfig>'");
    exitProcess(2);
  }
  await runControlPlane(JSON.parse(arg) as ControlMainConfig);
}
