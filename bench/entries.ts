/**
 * The benchmark entries `bun bench` knows, as module paths relative to this file. Modules are
 * imported only when listed or run, so an entry whose file does not exist yet (or fails to load)
 * is shown as "not available" instead of breaking the others.
 * @module
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { BenchEntry } from "./entry.ts";

/** Where each entry lives. */
export const BENCH_ENTRY_MODULES: readonly { name: string; module: string }[] = [
  { name: "e2e", module: "./e2e.ts" },
  { name: "routing", module: "./routing.ts" },
  { name: "throughput", module: "./throughput.ts" },
  { name: "native_step", module: "./native_step.ts" },
  { name: "serving", module: "./serving.ts" },
  { name: "profile", module: "./profile.ts" },
  { name: "transfer", module: "./transfer.ts" },
  { name: "transfer_latency", module: "./transfer_latency.ts" },
  { name: "faults", module: "./faults.ts" },
  { name: "simulate", module: "./simulate.ts" },
  { name: "calibrate", module: "./calibrate.ts" },
  { name: "judge", module: "./judge.ts" },
];

/** An entry that loaded, or why it did not. */
export type LoadedEntry = { name: string; module: string; entry: BenchEntry } | {
  name: string;
  module: string;
  unavailable: string;
};

function isBenchEntry(x: unknown): x is BenchEntry {
  const e = x as BenchEntry | undefined;
  return !!e && typeof e.name === "string" && typeof e.description === "string" && typeof e.run === "function";
}

/** Imports one entry module; never throws. */
export async function loadEntry(ref: { name: string; module: string }): Promise<LoadedEntry> {
  const url = new URL(ref.module, import.meta.url);
  if (!existsSync(fileURLToPath(url))) {
    return { ...ref, unavailable: `not available: bench/${ref.module.replace("./", "")} not built yet` };
  }
  try {
    const mod = (await import(url.href)) as { default?: unknown };
    if (!isBenchEntry(mod.default)) {
      return { ...ref, unavailable: `not available: ${ref.module} has no default-exported BenchEntry` };
    }
    return { ...ref, entry: mod.default };
  } catch (e) {
    return {
      ...ref,
      unavailable: `not available: ${ref.module} failed to load (${
        e instanceof Error ? e.message.split("\n")[0] : String(e)
      })`,
    };
  }
}

/** Imports every entry, in list order. */
export function loadEntries(): Promise<LoadedEntry[]> {
  return Promise.all(BENCH_ENTRY_MODULES.map(loadEntry));
}
