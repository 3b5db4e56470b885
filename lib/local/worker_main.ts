/**
 * Entry point of a data-plane worker process: `bun run lib/local/worker_main.ts '<json>'`, where
 * the JSON is a {@link WorkerMainConfig}. Loads the model on its device, connects to the launcher
 * (hello, ready) and to the control plane, then serves until the launcher goes away or says
 * shutdown. Started and supervised by LLMEngine.
 * @module
 */
import { Native } from "../../ffi/native.ts";
import { LLM, type LLMOptions } from "../engine/llm.ts";
import { Connection } from "../protocol/connection.ts";
import { getEnv, pid } from "../runtime/env.ts";
import { exitProcess, onTerminationSignal, processArgs } from "../runtime/subprocess.ts";
import { connectUnix } from "../runtime/unix_socket.ts";
import { HostCopyDataPath, type KvDataPath } from "./kv_data_path.ts";
import { KvPeerChannel } from "./kv_peer_channel.ts";
import { TransferExecutor } from "./transfer_executor.ts";
import { parseTransferFaults } from "./transfer_faults.ts";
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
  engine: Omit<LLMOptions, "onProgress" | "device">;
  heartbeat?: { intervalMs: number; missLimit: number };
  /** Directory of the workers' KV peer sockets (`kv-<rank>.sock`); unset: no transfers. */
  peerSocketDir?: string;
}

/** The KV peer socket of a rank. */
export function peerSocketPath(dir: string, rank: number): string {
  return `${dir}/kv-${rank}.sock`;
}

/**
 * The worker's transfer data path. Host copies over the workers' own sockets on every backend for
 * now; the CUDA build's NCCL/peer-copy path plugs in here (a KvDataPath over the pair
 * communicators) when the backend is cuda.
 */
async function openDataPath(config: WorkerMainConfig, llm: LLM): Promise<KvDataPath | undefined> {
  const dir = config.peerSocketDir;
  if (!dir) return undefined;
  const channel = await KvPeerChannel.listen({ rank: config.rank, socketPath: peerSocketPath(dir, config.rank), peerSocketPath: (r) => peerSocketPath(dir, r) });
  return new HostCopyDataPath(llm.engine.kv, channel);
}

/** Loads the engine and serves until told to stop. */
export async function runWorker(config: WorkerMainConfig): Promise<void> {
  const tag = `[worker ${config.rank}]`;
  const log = (line: string) => console.error(line);
  // Load before connecting: loading can block the event loop longer than heartbeats allow.
  const t0 = performance.now();
  // Probe which backend loads (CUDA when a GPU is visible) to know whether `gpu` applies.
  const backend = new Native({ backend: config.engine.backend }).backend;
  const llm = await LLM.create({ ...config.engine, backend, rank: config.rank, epoch: config.epoch, ...(backend === "cuda" ? { device: config.gpu } : {}) });
  let stream;
  try {
    stream = await connectUnix(config.launcherSocketPath, { timeoutMs: 5000 });
  } catch (e) {
    log(`${tag} cannot reach the launcher, exiting: ${(e as Error).message}`);
    await llm.shutdown();
    exitProcess(1);
  }
  const launcher = new Connection(stream, { name: `worker${config.rank}->launcher`, heartbeat: config.heartbeat, log });
  const dataPath = await openDataPath(config, llm);
  const transfers = dataPath
    ? new TransferExecutor({ rank: config.rank, epoch: config.epoch, blocks: llm.engine.blocks, dataPath, faults: parseTransferFaults(getEnv("LMPOOL_TRANSFER_FAULTS")) })
    : undefined;
  let exiting = false;
  const exit = async (code: number, why: string) => {
    if (exiting) return;
    exiting = true;
    log(`${tag} exiting: ${why}`);
    await transfers?.close();
    await dataPath?.close();
    await llm.shutdown();
    exitProcess(code);
  };
  onTerminationSignal((sig) => void exit(0, sig));
  new WorkerHost({ rank: config.rank, epoch: config.epoch, pid: pid(), engine: llm.engine, launcher, controlSocketPath: config.controlSocketPath, transfers, heartbeat: config.heartbeat, log, onExit: (code, why) => void exit(code, why) });
  launcher.send({ type: "hello", role: "worker", rank: config.rank, epoch: config.epoch, pid: pid() });
  launcher.send({
    type: "ready",
    role: "worker",
    rank: config.rank,
    epoch: config.epoch,
    pid: pid(),
    numBlocks: llm.config.numBlocks,
    blockSize: llm.config.blockSize,
    backend: llm.config.backend,
    maxModelLen: llm.config.maxModelLen,
  });
  log(`${tag} ready in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${llm.config.backend}, ${llm.config.numBlocks} blocks of ${llm.config.blockSize} tokens`);
}

if (import.meta.main) {
  const arg = processArgs()[0];
  if (!arg) {
    console.error("usage: worker_main.ts '<json WorkerMainConfig>'");
    exitProcess(2);
  }
  await runWorker(JSON.parse(arg) as WorkerMainConfig);
}
