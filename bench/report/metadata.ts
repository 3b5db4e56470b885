/**
 * Facts recorded next to every result: when, which code (git revision), which machine (GPUs and
 * their topology as nvidia-smi reports them), which runtime, which model and seeds. Every probe
 * is best-effort: a missing git or nvidia-smi gives null, never an error.
 * @module
 */
import { execFileSync } from "node:child_process";
import { cpus, hostname, platform, release, totalmem } from "node:os";
import { stripVTControlCharacters } from "node:util";

/** One GPU as nvidia-smi lists it. */
export interface GpuInfo {
  index: number;
  name: string;
  memoryMiB: number;
}

/** Metadata of one benchmark run. */
export interface RunMetadata {
  createdAt: string;
  command: string[];
  gitRevision: string | null;
  gitDirty: boolean | null;
  runtime: { name: string; version: string };
  host: { hostname: string; platform: string; release: string; cpus: number; cpuModel: string; memoryGiB: number };
  gpus: GpuInfo[];
  topology: string | null;
  model: Record<string, unknown> | null;
  seeds: Record<string, number>;
  [extra: string]: unknown;
}

function run(cmd: string, args: string[]): string | null {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
}

/** `git rev-parse HEAD` of the working directory, or null. */
export function gitRevision(): string | null {
  const rev = run("git", ["rev-parse", "HEAD"]);
  return rev && /^[0-9a-f]{40}$/.test(rev) ? rev : null;
}

/** GPUs from `nvidia-smi --query-gpu`, or [] where there is none. */
export function listGpus(): GpuInfo[] {
  const out = run("nvidia-smi", ["--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"]);
  if (!out) return [];
  return out.split("\n").flatMap((line) => {
    const [index, name, mem] = line.split(",").map((s) => s.trim());
    return index !== undefined && name ? [{ index: Number(index), name, memoryMiB: Number(mem) }] : [];
  });
}

function runtimeInfo(): { name: string; version: string } {
  const g = globalThis as {
    Bun?: { version: string };
    Deno?: { version: { deno: string } };
    process?: { version: string };
  };
  if (g.Bun) return { name: "bun", version: g.Bun.version };
  if (g.Deno) return { name: "deno", version: g.Deno.version.deno };
  return { name: "node", version: g.process?.version ?? "unknown" };
}

/** Collects run metadata; `extra` fields are merged in as given. */
export function collectMetadata(
  options: {
    command: string[];
    model?: Record<string, unknown> | null;
    seeds?: Record<string, number>;
    extra?: Record<string, unknown>;
  },
): RunMetadata {
  const c = cpus();
  const status = run("git", ["status", "--porcelain", "--untracked-files=no"]);
  const topology = run("nvidia-smi", ["topo", "-m"]);
  return {
    createdAt: new Date().toISOString(),
    command: options.command,
    gitRevision: gitRevision(),
    gitDirty: status === null ? null : status.length > 0,
    runtime: runtimeInfo(),
    host: {
      hostname: hostname(),
      platform: platform(),
      release: release(),
      cpus: c.length,
      cpuModel: c[0]?.model ?? "unknown",
      memoryGiB: Math.round(totalmem() / 2 ** 30),
    },
    gpus: listGpus(),
    // nvidia-smi underlines headers with ANSI escapes even into a pipe.
    topology: topology === null ? null : stripVTControlCharacters(topology),
    model: options.model ?? null,
    seeds: options.seeds ?? {},
    ...(options.extra ?? {}),
  };
}
