/**
 * Starting the control-plane and worker processes with the current runtime, and a scratch
 * directory for their Unix sockets.
 * @module
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import type { ControlMainConfig } from "../global/control_main.ts";
import type { WorkerMainConfig } from "../local/worker_main.ts";
import { allEnv } from "../runtime/env.ts";
import { scriptCommand, spawnChild, type ChildProcessHandle } from "../runtime/subprocess.ts";

const CONTROL_MAIN = fileURLToPath(new URL("../global/control_main.ts", import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL("../local/worker_main.ts", import.meta.url));

/** A private directory for one engine's sockets (short path: socket paths are limited). */
export function makeRunDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(`${tmpdir()}/lmpool-`);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Starts a control-plane process. */
export function spawnControlPlane(config: ControlMainConfig, env?: Record<string, string>): ChildProcessHandle {
  return spawnChild({ cmd: scriptCommand(CONTROL_MAIN, [JSON.stringify(config)]), env: { ...allEnv(), ...env }, stdout: "inherit", stderr: "inherit" });
}

/** Starts a worker process. */
export function spawnWorker(config: WorkerMainConfig, env?: Record<string, string>): ChildProcessHandle {
  return spawnChild({ cmd: scriptCommand(WORKER_MAIN, [JSON.stringify(config)]), env: { ...allEnv(), ...env }, stdout: "inherit", stderr: "inherit" });
}
