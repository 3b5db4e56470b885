/**
 * The server's process tree as /proc shows it (Linux): descendants of a pid, their command
 * lines, which of them are LMPool workers (with their rank) or the control plane, resident
 * memory, and signals by pid. Workers are recognised by `worker_main.ts` in their command line
 * and carry their rank in the JSON argument; the control plane by `control_main.ts`.
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";

/** One process of the tree. */
export interface ProcessInfo {
  pid: number;
  ppid: number;
  cmdline: string;
}

/** A worker process and the rank it serves. */
export interface WorkerProcess {
  pid: number;
  rank: number;
  /** Directory of the launcher's sockets, from the worker's JSON argument, when it names one. */
  socketDir: string | null;
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/** State letter and parent pid from /proc/<pid>/stat (the name may hold spaces and parens). */
function statOf(pid: number): { state: string; ppid: number } | null {
  const stat = readText(`/proc/${pid}/stat`);
  if (stat === null) return null;
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state: rest[0] ?? "?", ppid: Number(rest[1]) };
}

/** Every live (not zombie) process on the machine. */
export function listProcesses(): ProcessInfo[] {
  const out: ProcessInfo[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const st = statOf(pid);
    if (!st || st.state === "Z") continue;
    out.push({ pid, ppid: st.ppid, cmdline: (readText(`/proc/${pid}/cmdline`) ?? "").replace(/\0/g, " ").trim() });
  }
  return out;
}

/** Every descendant of `root` (children, their children, ...), not `root` itself. */
export function descendantsOf(root: number, processes: ProcessInfo[] = listProcesses()): ProcessInfo[] {
  const children = new Map<number, ProcessInfo[]>();
  for (const p of processes) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const out: ProcessInfo[] = [];
  const stack = [root];
  while (stack.length) {
    for (const c of children.get(stack.pop()!) ?? []) {
      out.push(c);
      stack.push(c.pid);
    }
  }
  return out;
}

/** The worker's rank and socket directory from its command line, or null when it is not a worker. */
export function parseWorkerCmdline(cmdline: string): { rank: number; socketDir: string | null } | null {
  if (!cmdline.includes("worker_main.ts")) return null;
  const rank = /"rank":(\d+)/.exec(cmdline);
  if (!rank) return null;
  const sock = /"launcherSocketPath":"([^"]+)"/.exec(cmdline);
  return { rank: Number(rank[1]), socketDir: sock ? dirname(sock[1]!) : null };
}

/** The worker processes below `serverPid`, by rank. */
export function findWorkers(serverPid: number): WorkerProcess[] {
  return descendantsOf(serverPid).flatMap((p) => {
    const w = parseWorkerCmdline(p.cmdline);
    return w ? [{ pid: p.pid, ...w }] : [];
  }).sort((a, b) => a.rank - b.rank || a.pid - b.pid);
}

/** The control-plane process below `serverPid`, or null. */
export function findControlPlane(serverPid: number): number | null {
  return descendantsOf(serverPid).find((p) => p.cmdline.includes("control_main.ts"))?.pid ?? null;
}

/** True while `pid` exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  const st = statOf(pid);
  return st !== null && st.state !== "Z";
}

/** Resident memory of `pid` in KiB (VmRSS), or null once it is gone. */
export function rssKiB(pid: number): number | null {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readText(`/proc/${pid}/status`) ?? "");
  return m ? Number(m[1]) : null;
}

/** Sends `signal` to `pid`; false when the process no longer exists. */
export function signalPid(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch (e) {
    if ((e as { code?: string }).code === "ESRCH") return false;
    throw e;
  }
}

/** Which of `processes` are still alive: the same pid, not a zombie, with the same command line (against pid reuse). */
export function survivors(processes: readonly ProcessInfo[]): ProcessInfo[] {
  return processes.filter((p) =>
    isAlive(p.pid) && (readText(`/proc/${p.pid}/cmdline`) ?? "").replace(/\0/g, " ").trim() === p.cmdline
  );
}
