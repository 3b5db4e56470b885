/**
 * Environment and process facts, the same under Bun and Deno, and the one table of settings
 * LMPool reads from the environment ({@link SETTINGS}: name, values, default, doc). Code reads a
 * setting only through {@link readSetting}, which parses and validates it: a bad value is a
 * RangeError naming the variable and the value, never a silent fallback. README's Settings
 * section is rendered from the table ({@link settingsMarkdown}); a unit test keeps the two equal.
 * @module
 */

import { availableParallelism } from "node:os";
import { parseRankPairs, type RankPair } from "../core/rank_pairs.ts";

interface DenoLike {
  env: { get(name: string): string | undefined; toObject(): Record<string, string> };
  pid: number;
  exit(code?: number): never;
  build: { os: string };
}

function deno(): DenoLike | undefined {
  return (globalThis as { Deno?: DenoLike }).Deno;
}

interface ProcessLike {
  env: Record<string, string | undefined>;
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

/** An environment variable, or undefined (settings go through {@link readSetting}). */
function getEnv(name: string): string | undefined {
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

/** This process's id. */
export function pid(): number {
  const d = deno();
  return d ? d.pid : (nodeProcess()?.pid ?? 0);
}

/** Logical CPUs this process may use. */
export function cpuCount(): number {
  return availableParallelism();
}

/** Who reads a setting: LMPool's TypeScript, or the native library (csrc/) when it loads. */
export type SettingReader = "lmpool" | "native";

/** One row of the settings table. */
export interface SettingSpec<T> {
  /** The values it takes, as people write them. */
  readonly type: string;
  /** What applies when it is unset or empty. */
  readonly default: string;
  /** What it does. */
  readonly doc: string;
  readonly readBy: SettingReader;
  /** What a valid value looks like, for the error a bad one raises ("a number >= 0"). */
  readonly expected: string;
  /** The value of a non-empty text, or undefined when the text is not one. */
  parse(text: string): T | undefined;
}

function setting<T>(spec: Omit<SettingSpec<T>, "readBy"> & { readBy?: SettingReader }): SettingSpec<T> {
  return { readBy: "lmpool", ...spec };
}

function oneOf<const V extends string>(...values: V[]): (text: string) => V | undefined {
  return (text) => ((values as string[]).includes(text) ? (text as V) : undefined);
}

function text(t: string): string {
  return t;
}

/** What LMPOOL_TRACE_TRANSFERS asks for: nothing, the control plane's log, or a file to append to. */
export type TransferTraceSetting = "off" | "log" | { file: string };

/** Every environment variable LMPool reads, by name. */
export const SETTINGS = {
  LMPOOL_BACKEND: setting({
    type: "`cpu` | `cuda`",
    default: "CUDA when it loads and sees a GPU, else CPU",
    doc: "Which native library to load (ignored when LMPOOL_LIB names one).",
    expected: `"cpu" or "cuda"`,
    parse: oneOf("cpu", "cuda"),
  }),
  LMPOOL_LIB: setting({
    type: "path",
    default: "search (LMPOOL_LIB_DIR, then build/)",
    doc: "The native library file to load; its backend is whatever it was built for.",
    expected: "a file path",
    parse: text,
  }),
  LMPOOL_LIB_DIR: setting({
    type: "directory",
    default: "only build/",
    doc: "A directory searched for `liblmpool_<backend>.so` before build/.",
    expected: "a directory",
    parse: (t) => t.replace(/\/$/, ""),
  }),
  LMPOOL_LIBZMQ: setting({
    type: "path",
    default: "`libzmq.so.5` from the loader's search path",
    doc: "The libzmq that KV events (`--kv-events-config`) publish through; Debian's `libzmq5` provides the default.",
    expected: "a file path",
    parse: text,
  }),
  LMPOOL_CACHE_DIR: setting({
    type: "directory",
    default: "`.cache/models` in the checkout",
    doc: "Where `ensureModel` writes and finds the generated demo models.",
    expected: "a directory",
    parse: text,
  }),
  LMPOOL_NVLINK_PAIRS: setting<"auto" | "none" | RankPair[]>({
    type: "`auto` | `none` | `0-1,2-3`",
    default: "`auto`",
    doc:
      "NVLink pairs of LLMEngine's ranks when its `topology` option is unset: `auto` reads `nvidia-smi topo -m` (NV# links only), `none` has none. Ranks sharing one CUDA device are direct partners (device-local copies) whatever this says; transfers mode `off` turns transfers off.",
    expected: `"auto", "none" or pairs such as "0-1,2-3"`,
    parse: (t) => (t === "auto" || t === "none" ? t : parseRankPairs(t, "LMPOOL_NVLINK_PAIRS")),
  }),
  LMPOOL_TRACE_TRANSFERS: setting<TransferTraceSetting>({
    type: "`0` | `1` | file",
    default: "`0`",
    doc:
      "Per-plan transfer phase trace of the control plane: `1` writes it to the control plane's log, a path appends it to that file.",
    expected: `"0", "1" or a file path`,
    parse: (t) => (t === "0" ? "off" : t === "1" ? "log" : { file: t }),
  }),
  LMPOOL_TRACE_STEPS: setting({
    type: "file",
    default: "unset",
    doc:
      "Per-step trace of every worker, one JSON line per step (rank, kind, the step's work, native and total ms, the gap since the previous step), appended to this file: what the simulator's calibration is checked against.",
    expected: "a file path",
    parse: text,
  }),
  LMPOOL_CODEC_WARMUP: setting({
    type: "integer >= 0",
    default: "1000",
    doc:
      "Rounds of the transfer messages through the codec at start-up (about 0.1 s), so the first plans do not run cold code; 0 turns it off.",
    expected: "a non-negative integer",
    parse: (t) => {
      const n = Number(t);
      return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
    },
  }),
  LMPOOL_IDLE_SPIN_MS: setting({
    type: "ms >= 0",
    default: "50 on CUDA workers, 0 on CPU workers",
    doc:
      "How long a worker keeps its event loop turning after its last step, so a message that follows is read without a wake-up; 0 turns it off.",
    expected: "a number >= 0",
    parse: (t) => {
      const n = Number(t);
      return Number.isFinite(n) && n >= 0 ? n : undefined;
    },
  }),
  LMPOOL_SOCKETS: setting({
    type: "`bun` | `node`",
    default: "`bun` under Bun (`node` under Deno, which has no other)",
    doc: "Unix socket implementation under Bun: Bun's own sockets, or node:net.",
    expected: `"bun" or "node"`,
    parse: oneOf("bun", "node"),
  }),
  LMPOOL_CUDA_GRAPHS: setting({
    type: "`0` | `1`",
    default: "`1`",
    doc: "CUDA graphs for decode steps; `0` runs them eagerly (debugging, eager timings).",
    readBy: "native",
    expected: `"0" or "1"`,
    parse: oneOf("0", "1"),
  }),
  LMPOOL_CUDA_PDL: setting({
    type: "`0` | `1`",
    default: "`1`",
    doc: "Programmatic dependent launch of the CUDA kernels; `0` turns it off.",
    readBy: "native",
    expected: `"0" or "1"`,
    parse: oneOf("0", "1"),
  }),
  CUDA_VISIBLE_DEVICES: setting({
    type: "device list",
    default: "every GPU",
    doc: "CUDA's own; LMPool maps `nvidia-smi` topology to logical devices through it.",
    expected: "a device list",
    parse: text,
  }),
  OMP_NUM_THREADS: setting({
    type: "integer >= 1",
    default: "each CPU-backend worker gets its share of the cores",
    doc: "OpenMP threads of the CPU backend; set, it is passed to every worker unchanged.",
    expected: "an integer >= 1",
    parse: (t) => {
      const n = Number(t);
      return Number.isSafeInteger(n) && n >= 1 ? n : undefined;
    },
  }),
  NCCL_HOME: setting({
    type: "directory",
    default: "the loader's search path only",
    doc: "Where the NCCL pair path looks for `lib/libnccl.so.2` when the loader's search path lacks it.",
    readBy: "native",
    expected: "a directory",
    parse: text,
  }),
  NCCL_NVLS_ENABLE: setting({
    type: "`0`",
    default: "`0` (set by the native library)",
    doc: "NVLink multicast stays off: any other value refuses to open NCCL pairs.",
    readBy: "native",
    expected: `"0"`,
    parse: oneOf("0"),
  }),
} as const;

/** The name of a setting. */
export type SettingName = keyof typeof SETTINGS;

/** The value a setting parses to. */
export type SettingValue<K extends SettingName> = Exclude<ReturnType<(typeof SETTINGS)[K]["parse"]>, undefined>;

/**
 * The value of `text` as setting `name`: undefined when unset or empty; a RangeError naming the
 * variable and the value when it is not one the setting takes.
 */
export function parseSetting<K extends SettingName>(name: K, text: string | undefined): SettingValue<K> | undefined {
  if (text === undefined || text === "") return undefined;
  const spec = SETTINGS[name] as SettingSpec<SettingValue<K>>;
  let value: SettingValue<K> | undefined;
  try {
    value = spec.parse(text);
  } catch (e) {
    throw new RangeError(`${name} must be ${spec.expected}, got ${JSON.stringify(text)}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (value === undefined) throw new RangeError(`${name} must be ${spec.expected}, got ${JSON.stringify(text)}`);
  return value;
}

/** Setting `name` from this process's environment (see {@link parseSetting}). */
export function readSetting<K extends SettingName>(name: K): SettingValue<K> | undefined {
  return parseSetting(name, getEnv(name));
}

/** Validates the settings the native library reads itself (C reads any text), before it loads. */
export function checkNativeSettings(): void {
  for (const [name, spec] of Object.entries(SETTINGS)) if (spec.readBy === "native") readSetting(name as SettingName);
}

/** The settings table as markdown, as README's Settings section holds it. */
export function settingsMarkdown(): string {
  const cell = (t: string) => t.replaceAll("|", "\\|");
  const rows = Object.entries(SETTINGS).map(([name, s]) =>
    `| \`${name}\` | ${cell(s.type)} | ${cell(s.default)} | ${s.readBy === "native" ? "(native library) " : ""}${
      cell(s.doc)
    } |`
  );
  return ["| Variable | Values | Default | What it does |", "| --- | --- | --- | --- |", ...rows].join("\n");
}
