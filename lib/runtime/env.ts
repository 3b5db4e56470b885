/**
 * Environment and process facts, the same under Bun and Deno.
 * @module
 */

import { availableParallelism } from "node:os";

interface DenoLike {
  env: { get(name: string): string | undefined; toObject(): Record<string, string> };
  cwd(): string;
  pid: number;
  exit(code?: number): never;
  build: { os: string };
}

function deno(): DenoLike | undefined {
  return (globalThis as { Deno?: DenoLike }).Deno;
}

interface ProcessLike {
  env: Record<string, string | undefined>;
  cwd(): string;
  pid: number;
}

function nodeProcess(): ProcessLike | undefined {
  return (globalThis as { process?: ProcessLike }).process;
}

/** Which runtime runs this code. */
export function runtimeName(): "bun" | "deno" | "node" {
  if (deno()) return "deno";
  if ((globalThis as { Bun?: unknown }).Bun) return "bun";
  return "node";
}

/** An environment variable, or undefined. */
export function getEnv(name: string): string | undefined {
  const d = deno();
  if (d) return d.env.get(name);
  return nodeProcess()?.env[name];
}

/** The whole environment (for passing to children). */
export function allEnv(): Record<string, string> {
  const d = deno();
  if (d) return d.env.toObject();
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(nodeProcess()?.env ?? {})) if (v !== undefined) out[k] = v;
  return out;
}

/** The current working directory. */
export function cwd(): string {
  const d = deno();
  return d ? d.cwd() : (nodeProcess()?.cwd() ?? ".");
}

/** This process's id. */
export function pid(): number {
  const d = deno();
  return d ? d.pid : (nodeProcess()?.pid ?? 0);
}

/** Logical CPUs this process may use. */
export function cpuCount(): number {
  return availableParallelism();
}
