/**
 * The Mooncake workload: a replay of the Mooncake FAST'25 conversation trace (bench/workloads/data/
 * conversation_trace.jsonl), or of any trace in its format. Each hash id stands for 512 fixed token
 * ids drawn from the id (the same id, the same tokens, so equal id chains are equal KV prefixes) and
 * the last block is cut to `input_length`, as AIPerf and Dynamo replay it. A window picks the
 * requests (see mooncake_trace.ts); arrivals are the trace's timestamps divided by `speedup`, which
 * the driver uses with `--arrival trace` and otherwise leaves to its own arrival mode.
 * @module
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { workloadDataPath } from "./data_files.ts";
import {
  hashIdTokenShare,
  MOONCAKE_BLOCK_TOKENS,
  type MooncakeRecord,
  parseMooncakeTrace,
  selectWindow,
} from "./mooncake_trace.ts";
import { SeededRandom } from "./prng.ts";
import { positiveInt, requestId, type Workload, type WorkloadOptions, type WorkloadRequest } from "./types.ts";

/** The trace the repository ships (provenance in bench/workloads/data/README.md). */
export const MOONCAKE_TRACE_FILE = "conversation_trace.jsonl";

/** Options of the Mooncake workload; see MooncakeWindow for the window fields. */
export interface MooncakeOptions extends WorkloadOptions {
  /** A trace in the Mooncake format (default: the shipped conversation trace). */
  path?: string;
  first?: number;
  /** Trace seconds. */
  start?: number;
  /** Trace seconds. */
  duration?: number;
  maxInput?: number;
  maxOutput?: number;
  /** Trace time runs this many times faster in the replay's arrival times. */
  speedup?: number;
  /** The served model's context (prompt plus output): longer requests are skipped. */
  maxModelLen?: number;
  /** The served model's vocabulary size: token ids must stay below it. */
  vocabSize?: number;
  maxInFlight?: number;
  kvBlocksPerGpu?: number;
}

const OPTION_NAMES = [
  "seed",
  "blockSize",
  "maxTokenId",
  "path",
  "first",
  "start",
  "duration",
  "maxInput",
  "maxOutput",
  "speedup",
  "maxModelLen",
  "vocabSize",
  "maxInFlight",
  "kvBlocksPerGpu",
];

function nonNegative(name: string, value: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a number >= 0, got ${String(value)}`);
  }
  return value;
}

function positive(name: string, value: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new RangeError(`${name} must be a number > 0, got ${String(value)}`);
  }
  return value;
}

/**
 * The 512 token ids hash id `hashId` stands for, in [0, maxTokenId]: a pure function of the id and
 * the workload seed. The id seeds the generator by itself (distinct ids, distinct streams); the
 * seed shifts every position by its own offset, so another seed gives other tokens of the same shape.
 */
export function hashIdTokens(hashId: number, maxTokenId: number, seed = 0): number[] {
  const ids = new SeededRandom(hashId).tokens(MOONCAKE_BLOCK_TOKENS, 0, maxTokenId);
  if (seed === 0) return ids;
  const offsets = new SeededRandom(seed).tokens(MOONCAKE_BLOCK_TOKENS, 0, maxTokenId);
  return ids.map((t, i) => (t + (offsets[i] as number)) % (maxTokenId + 1));
}

/** The prompt of `r`: its hash ids' blocks, the last one cut to the input length. */
function promptOf(r: MooncakeRecord, blockOf: (hashId: number) => number[]): number[] {
  const out = new Array<number>(r.inputLength);
  r.hashIds.forEach((h, b) => {
    const block = blockOf(h);
    const base = b * MOONCAKE_BLOCK_TOKENS;
    const n = Math.min(MOONCAKE_BLOCK_TOKENS, r.inputLength - base);
    for (let i = 0; i < n; i++) out[base + i] = block[i] as number;
  });
  return out;
}

function readTrace(path: string): MooncakeRecord[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new RangeError(`cannot read Mooncake trace ${path}: ${(e as Error).message}`, { cause: e });
  }
  return parseMooncakeTrace(text, path);
}

/** Builds the Mooncake replay; every option is checked and recorded in `params`. */
export function mooncakeWorkload(options: MooncakeOptions = {}): Workload {
  const unknown = Object.keys(options).filter((k) => !OPTION_NAMES.includes(k));
  if (unknown.length > 0) {
    throw new RangeError(`unknown mooncake workload option ${unknown[0]}; known: ${OPTION_NAMES.join(", ")}`);
  }
  const o = options;
  const seed = o.seed ?? 0;
  if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be an integer, got ${String(seed)}`);
  const maxTokenId = positiveInt("maxTokenId", o.maxTokenId ?? 10000);
  if (o.vocabSize !== undefined && maxTokenId >= positiveInt("vocabSize", o.vocabSize)) {
    throw new RangeError(`maxTokenId (${maxTokenId}) must be below the model's vocabulary size (${o.vocabSize})`);
  }
  const window = {
    ...(o.start !== undefined ? { startS: nonNegative("start", o.start) } : {}),
    ...(o.duration !== undefined ? { durationS: positive("duration", o.duration) } : {}),
    ...(o.first !== undefined ? { first: positiveInt("first", o.first) } : {}),
    ...(o.maxInput !== undefined ? { maxInput: positiveInt("maxInput", o.maxInput) } : {}),
    ...(o.maxOutput !== undefined ? { maxOutput: positiveInt("maxOutput", o.maxOutput) } : {}),
    ...(o.maxModelLen !== undefined ? { maxModelLen: positiveInt("maxModelLen", o.maxModelLen) } : {}),
  };
  const speedup = positive("speedup", o.speedup ?? 1);
  const blockSize = positiveInt("blockSize", o.blockSize ?? 256);
  const path = o.path ?? workloadDataPath(MOONCAKE_TRACE_FILE);
  const name = o.path === undefined ? "mooncake" : `mooncake-${basename(o.path).replace(/\.jsonl$/, "")}`;

  const picked = selectWindow(readTrace(path), window);
  if (picked.records.length === 0) {
    throw new RangeError(
      `the mooncake window ${
        JSON.stringify(window)
      } of ${path} keeps no request (${picked.scanned} in range, ${picked.skippedOverMaxInput} over maxInput, ${picked.skippedOverContext} over the context)`,
    );
  }
  const blocks = new Map<number, number[]>();
  const blockOf = (h: number): number[] => {
    let b = blocks.get(h);
    if (!b) blocks.set(h, b = hashIdTokens(h, maxTokenId, seed));
    return b;
  };
  const t0 = (picked.records[0] as MooncakeRecord).timestampMs;
  const requests: WorkloadRequest[] = picked.records.map((r, i) => ({
    id: requestId("mooncake", r.index),
    promptTokenIds: promptOf(r, blockOf),
    maxTokens: picked.outputTokens[i] as number,
    // The trace's output lengths are the workload: an early end of sequence would shorten it.
    ignoreEos: true,
    arrivalTime: (r.timestampMs - t0) / 1000 / speedup,
  }));
  const skips = `${picked.skippedOverMaxInput} skipped over maxInput, ${picked.skippedOverContext} over the context`;
  return {
    name,
    description: `${requests.length} requests of ${basename(path)} (${picked.scanned} in the window, ${skips})`,
    seed,
    params: {
      // The shipped trace by its repository path, so results from different checkouts compare.
      source: o.path ?? `bench/workloads/data/${MOONCAKE_TRACE_FILE}`,
      ...window,
      speedup,
      maxTokenId,
      scanned: picked.scanned,
      skippedOverMaxInput: picked.skippedOverMaxInput,
      skippedOverContext: picked.skippedOverContext,
      hashIdTokenShare: hashIdTokenShare(picked.records, blockSize),
    },
    settings: {
      maxInFlight: positiveInt("maxInFlight", o.maxInFlight ?? 32),
      kvBlocksPerGpu: positiveInt("kvBlocksPerGpu", o.kvBlocksPerGpu ?? 1600),
      blockSize,
    },
    requests,
  };
}
