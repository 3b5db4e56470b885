/**
 * Starting the control-plane and worker processes with the current runtime, and a scratch
 * directory for their Unix sockets.
 * @module
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import type { ControlMainConfig } from "../processes/control_main.ts";
import type { WorkerMainConfig } from "../processes/worker_main.ts";
import { allEnv, pid } from "../runtime/env.ts";
import { type ChildProcessHandle, scriptCommand, spawnChild } from "../runtime/subprocess.ts";

const CONTROL_MAIN = fileURLToPath(new URL("../processes/control_main.ts", import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL("../processes/worker_main.ts", import.meta.url));

const RUN_DIR_PREFIX = "lmpool-";
/** The file in a run directory that names the launcher owning it. */
const OWNER_FILE = "owner.pid";

/**
 * A private directory for one engine's sockets (short path: socket paths are limited), with the
 * launcher's pid in it, so a later start can tell it was left behind.
 */
export function makeRunDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(`${tmpdir()}/${RUN_DIR_PREFIX}`);
  writeFileSync(`${dir}/${OWNER_FILE}`, `${pid()}\n`);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Removes run directories whose owning launcher no longer runs (it was SIGKILLed before it could
 * clean up). Only directories with an owner file are touched; returns the ones removed.
 */
export function removeStaleRunDirs(root = tmpdir()): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(root).filter((n) => n.startsWith(RUN_DIR_PREFIX));
  } catch {
    return removed;
  }
  for (const name of names) {
    const dir = `${root}/${name}`;
    let owner: number;
    try {
      owner = Number.parseInt(readFileSync(`${dir}/${OWNER_FILE}`, "utf8"), 10);
    } catch {
      continue; // not ours, or being created
    }
    if (!Number.isInteger(owner) || owner <= 0 || owner === pid() || processRuns(owner)) continue;
    rmSync(dir, { recursive: true, force: true });
    removed.push(dir);
  }
  return removed;
}

/** Whether a process with this pid exists (Linux /proc; elsewhere assumed running). */
function processRuns(p: number): boolean {
  if (!existsSync("/proc/self")) return true;
  return existsSync(`/proc/${p}`);
}

/** Starts a control-plane process. */
export function spawnControlPlane(config: ControlMainConfig, env?: Record<string, string>): ChildProcessHandle {
  return spawnChild({
    cmd: scriptCommand(CONTROL_MAIN, [JSON.stringify(config)]),
    env: { ...allEnv(), ...env },
    stdout: "inherit",
    stderr: "inherit",
  });
}

/** Starts a worker process; `main` replaces the worker entry module (tests inject faults so). */
export function spawnWorker(
  config: WorkerMainConfig,
  env?: Record<string, string>,
  main: string = WORKER_MAIN,
): ChildProcessHandle {
  return spawnChild({
    cmd: scriptCommand(main, [JSON.stringify(config)]),
    env: { ...allEnv(), ...env },
    stdout: "inherit",
    stderr: "inherit",
  });
}
