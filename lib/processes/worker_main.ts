/**
 * Entry point of a data-plane worker process: `bun run lib/processes/worker_main.ts '<json>'`, where
 * the JSON is a {@link WorkerMainConfig}. Loads the model on its device, connects to the launcher
 * (hello, loaded, ready) and to the control plane, then serves until the launcher goes away or says
 * shutdown. Started and supervised by LLMEngine.
 * @module
 */
import { native } from "../../ffi/native.ts";
import { buildLocalEngine, type BuiltEngine, type EngineBuildOptions } from "../local/engine_builder.ts";
import { codecWarmupRounds, warmTransferCodec } from "../transfer/codec_warmup.ts";
import { Connection } from "../protocol/connection.ts";
import { pid } from "../runtime/env.ts";
import { exitProcess, onParentExit, onTerminationSignal, processArgs } from "../runtime/subprocess.ts";
import { connectUnix } from "../runtime/unix_socket.ts";
import { idleSpinMs } from "../local/idle_spin.ts";
import type { PerPeerDataPath } from "../transfer/worker/per_peer_data_path.ts";
import { TransferExecutor, type TransferFaultHook } from "../transfer/worker/transfer_executor.ts";
import { openWorkerDataPath, type WorkerDataPathConfig } from "../transfer/worker/worker_data_path.ts";
import { WorkerHost } from "./worker_host.ts";

/** What the launcher passes to a worker process. */
export interface WorkerMainConfig {
  rank: number;
  epoch: number;
  launcherSocketPath: string;
  controlSocketPath: string;
  /** Device index for the CUDA backend (the CPU backend has device 0 only). */
  gpu: number;
  /** Engine options (model directory, KV sizing...), as LLM.create takes them. */
  engine: Omit<EngineBuildOptions, "onProgress" | "device">;
  heartbeat?: { intervalMs: number; missLimit: number };
  /** Directory of the workers' KV peer sockets (`kv-<rank>.sock`); unset: no transfers. */
  peerSocketDir?: string;
  /** Data path choice and NVLink partners (NCCL pairs); unset: host path only. */
  dataPath?: WorkerDataPathConfig;
}

/**
 * What a test entry (test/helpers/faulty_worker_main.ts) adds to a worker; the production entry
 * adds nothing.
 */
export interface WorkerTestHooks {
  /** Faults the worker's transfer executor injects into every plan. */
  transferFaults?: TransferFaultHook;
}

/**
 * The worker's transfer data path: host copies over the workers' own sockets, plus NCCL pairs with
 * its NVLink partners on the cuda backend (lib/transfer/worker/worker_data_path.ts).
 */
async function openDataPath(
  config: WorkerMainConfig,
  built: BuiltEngine,
  log: (line: string) => void,
): Promise<PerPeerDataPath | undefined> {
  if (!config.peerSocketDir) return undefined;
  return await openWorkerDataPath({
    rank: config.rank,
    epoch: config.epoch,
    gpu: config.gpu,
    backend: built.config.backend,
    kv: built.engine.kv,
    peerSocketDir: config.peerSocketDir,
    controlSocketPath: config.controlSocketPath,
    config: config.dataPath,
    heartbeat: config.heartbeat,
    log,
  });
}

/** Loads the engine and serves until told to stop. */
export async function runWorker(config: WorkerMainConfig, hooks: WorkerTestHooks = {}): Promise<void> {
  const tag = `[worker ${config.rank}]`;
  const log = (line: string) => console.error(line);
  // From the start: a launcher killed while this worker loads must not leave it behind.
  onParentExit(() => {
    log(`${tag} the launcher is gone; exiting`);
    exitProcess(1);
  });
  // Load before connecting: loading can block the event loop longer than heartbeats allow.
  const t0 = performance.now();
  // Which backend loads (CUDA when a GPU is visible) says whether `gpu` applies; the build reuses this handle.
  const backend = native(config.engine.backend).backend;
  const built = await buildLocalEngine({
    ...config.engine,
    rank: config.rank,
    epoch: config.epoch,
    ...(backend === "cuda" ? { device: config.gpu } : {}),
  }, native);
  // Connected once the KV cache is allocated: the launcher starts the next rank of this device on
  // `loaded`, and a device-local data path needs that partner to be up before it can open.
  let stream;
  try {
    stream = await connectUnix(config.launcherSocketPath, { timeoutMs: 5000 });
  } catch (e) {
    log(`${tag} cannot reach the launcher, exiting: ${(e as Error).message}`);
    built.dispose();
    exitProcess(1);
  }
  const launcher = new Connection(stream, { name: `worker${config.rank}->launcher`, heartbeat: config.heartbeat, log });
  launcher.send({ type: "hello", role: "worker", rank: config.rank, epoch: config.epoch, pid: pid() });
  launcher.send({ type: "loaded", rank: config.rank, epoch: config.epoch });
  // Creating NCCL pairs blocks the event loop (each bounded by its timeout).
  if (config.dataPath) launcher.announceBusy(config.dataPath.ncclTimeoutMs);
  let dataPath: PerPeerDataPath | undefined;
  try {
    dataPath = await openDataPath(config, built, log);
  } catch (e) {
    log(`${tag} cannot open the KV data path, exiting: ${(e as Error).message}`);
    launcher.close("no KV data path");
    built.dispose();
    exitProcess(1);
  }
  // Transfer messages are rare: their codec paths are warmed now, not on the first plans.
  if (dataPath) warmTransferCodec(codecWarmupRounds());
  const transfers = dataPath
    ? new TransferExecutor({
      rank: config.rank,
      epoch: config.epoch,
      blocks: built.engine.blocks,
      dataPath,
      faults: hooks.transferFaults,
    })
    : undefined;
  let exiting = false;
  const exit = async (code: number, why: string) => {
    if (exiting) return;
    exiting = true;
    log(`${tag} exiting: ${why}`);
    await transfers?.close();
    await dataPath?.close();
    built.dispose();
    exitProcess(code);
  };
  onTerminationSignal((sig) => void exit(0, sig));
  new WorkerHost({
    rank: config.rank,
    epoch: config.epoch,
    pid: pid(),
    engine: built.engine,
    launcher,
    controlSocketPath: config.controlSocketPath,
    transfers,
    dataPath,
    heartbeat: config.heartbeat,
    idleSpinMs: idleSpinMs(backend),
    log,
    onExit: (code, why) => void exit(code, why),
  });
  launcher.send({
    type: "ready",
    role: "worker",
    rank: config.rank,
    epoch: config.epoch,
    pid: pid(),
    numBlocks: built.config.numBlocks,
    blockSize: built.config.blockSize,
    backend: built.config.backend,
    maxModelLen: built.config.maxModelLen,
  });
  log(
    `${tag} ready in ${
      ((performance.now() - t0) / 1000).toFixed(1)
    } s: ${built.config.backend}, ${built.config.numBlocks} blocks of ${built.config.blockSize} tokens`,
  );
}

/** The worker process: reads its config from the command line and runs until told to stop. */
export async function workerProcessMain(hooks: WorkerTestHooks = {}): Promise<void> {
  const arg = processArgs()[0];
  if (!arg) {
    console.error("usage: worker_main.ts '<json WorkerMainConfig>'");
    exitProcess(2);
  }
  const config = JSON.parse(arg) as WorkerMainConfig;
  try {
    await runWorker(config, hooks);
  } catch (e) {
    // One line: the launcher's log names the rank and the exit; the user needs the reason, not a stack.
    console.error(`[worker ${config.rank}] start-up failed: ${(e as Error).message}`);
    exitProcess(1);
  }
}

if (import.meta.main) await workerProcessMain();
