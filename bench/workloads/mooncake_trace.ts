/**
 * The Mooncake trace format (FAST'25, kvcache-ai/Mooncake): one JSON object a line with `timestamp`
 * (ms from the start of the trace), `input_length`, `output_length` and `hash_ids`, the prompt as a
 * chain of 512-token blocks whose last one is cut to `input_length`. This file parses it, picks the
 * window a replay takes (time range, skips, first N), and measures the prefix reuse the hash ids
 * promise, which a replay's token ids must reproduce.
 * @module
 */
import { jsonlObjects } from "./jsonl.ts";

/** Tokens each hash id stands for. */
export const MOONCAKE_BLOCK_TOKENS = 512;

/** One request of a Mooncake trace. */
export interface MooncakeRecord {
  /** 0-based position in the trace, kept through windowing so a request keeps its id. */
  index: number;
  timestampMs: number;
  inputLength: number;
  outputLength: number;
  hashIds: number[];
}

const FIELDS = new Set(["timestamp", "input_length", "output_length", "hash_ids"]);

function parseRecord(obj: unknown, index: number, fail: (problem: string) => never): MooncakeRecord {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    fail(`expected a JSON object, got ${JSON.stringify(obj)?.slice(0, 60)}`);
  }
  const o = obj as Record<string, unknown>;
  // A field this reader does not know would be dropped unseen: refuse it instead.
  const unknown = Object.keys(o).filter((k) => !FIELDS.has(k));
  if (unknown.length > 0) {
    fail(`unknown field ${JSON.stringify(unknown[0])}; a Mooncake trace line has ${[...FIELDS].join(", ")}`);
  }
  const { timestamp, input_length: input, output_length: output, hash_ids: ids } = o;
  if (typeof timestamp !== "number" || !Number.isFinite(timestamp) || timestamp < 0) {
    fail(`"timestamp" must be a number of ms >= 0, got ${JSON.stringify(timestamp)}`);
  }
  if (!Number.isSafeInteger(input) || (input as number) < 1) {
    fail(`"input_length" must be an integer >= 1, got ${JSON.stringify(input)}`);
  }
  if (!Number.isSafeInteger(output) || (output as number) < 1) {
    fail(`"output_length" must be an integer >= 1, got ${JSON.stringify(output)}`);
  }
  if (!Array.isArray(ids)) fail(`"hash_ids" must be an array of integers, got ${JSON.stringify(ids)?.slice(0, 60)}`);
  const bad = ids.findIndex((h) => !Number.isSafeInteger(h) || (h as number) < 0);
  if (bad >= 0) fail(`"hash_ids"[${bad}] must be an integer >= 0, got ${JSON.stringify(ids[bad])}`);
  const blocks = Math.ceil((input as number) / MOONCAKE_BLOCK_TOKENS);
  if (ids.length !== blocks) {
    fail(
      `"hash_ids" must have one id per ${MOONCAKE_BLOCK_TOKENS} tokens of "input_length" ${input} (${blocks}), got ${ids.length}`,
    );
  }
  return {
    index,
    timestampMs: timestamp as number,
    inputLength: input as number,
    outputLength: output as number,
    hashIds: ids as number[],
  };
}

/** Parses Mooncake-format JSONL; `source` names the text in errors. Timestamps must not decrease. */
export function parseMooncakeTrace(text: string, source: string): MooncakeRecord[] {
  const records: MooncakeRecord[] = [];
  for (const { obj, fail } of jsonlObjects(text, source)) {
    const rec = parseRecord(obj, records.length, fail);
    const prev = records[records.length - 1];
    // Windows by time and trace-paced arrivals both read the trace in timestamp order.
    if (prev && rec.timestampMs < prev.timestampMs) {
      fail(`"timestamp" ${rec.timestampMs} is earlier than the previous request's ${prev.timestampMs}`);
    }
    records.push(rec);
  }
  return records;
}

/** Which requests of a trace a replay takes. Unset fields do not limit. */
export interface MooncakeWindow {
  /** Trace seconds: requests before this time are left out (not counted as skipped). */
  startS?: number;
  /** Trace seconds after `startS` (or the trace's start): later requests are left out. */
  durationS?: number;
  /** Keep at most this many requests (counted after skips). */
  first?: number;
  /** Skip requests with more input tokens. */
  maxInput?: number;
  /** Cap each request's output tokens. */
  maxOutput?: number;
  /** The model's context: skip requests whose input plus (capped) output exceed it. */
  maxModelLen?: number;
}

/** The requests a window keeps, with what it skipped on the way. */
export interface WindowSelection {
  records: MooncakeRecord[];
  /** Output tokens of each kept request after the cap, in order. */
  outputTokens: number[];
  /** Requests inside the time range that were looked at (kept or skipped). */
  scanned: number;
  skippedOverMaxInput: number;
  skippedOverContext: number;
}

/**
 * Applies `w` to `records` in trace order. A request over both limits counts once, under
 * `maxInput` (the user's own filter); the context skip counts the ones that fit it but not the model.
 */
export function selectWindow(records: readonly MooncakeRecord[], w: MooncakeWindow): WindowSelection {
  const startMs = (w.startS ?? 0) * 1000;
  const endMs = w.durationS === undefined ? Infinity : startMs + w.durationS * 1000;
  const out: WindowSelection = {
    records: [],
    outputTokens: [],
    scanned: 0,
    skippedOverMaxInput: 0,
    skippedOverContext: 0,
  };
  for (const r of records) {
    if (w.first !== undefined && out.records.length >= w.first) break;
    if (r.timestampMs < startMs) continue;
    if (r.timestampMs >= endMs) break;
    out.scanned++;
    const output = Math.min(r.outputLength, w.maxOutput ?? Infinity);
    if (w.maxInput !== undefined && r.inputLength > w.maxInput) {
      out.skippedOverMaxInput++;
    } else if (w.maxModelLen !== undefined && r.inputLength + output > w.maxModelLen) {
      out.skippedOverContext++;
    } else {
      out.records.push(r);
      out.outputTokens.push(output);
    }
  }
  return out;
}

/**
 * The token reuse the hash ids promise at `blockSize`, with an unlimited cache and every request
 * in order: for each request, its longest prefix of blocks whose id chain appeared in an earlier
 * request covers some tokens, of which the complete `blockSize` blocks count; the share is their sum
 * over all prompt tokens. It reads ids only, so it checks a replay's token ids independently.
 */
export function hashIdTokenShare(records: readonly MooncakeRecord[], blockSize: number): number {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) {
    throw new RangeError(`blockSize must be a positive integer, got ${String(blockSize)}`);
  }
  // A chain node is (parent node, hash id): equal ids under different prefixes are different KV.
  const nodes = new Map<string, number>();
  let promptTokens = 0;
  let shareable = 0;
  for (const r of records) {
    let parent = -1;
    let covered = 0;
    let matching = true;
    r.hashIds.forEach((h, i) => {
      const key = `${parent}:${h}`;
      let node = nodes.get(key);
      if (node === undefined) {
        matching = false;
        node = nodes.size;
        nodes.set(key, node);
      } else if (matching) {
        covered += Math.min(MOONCAKE_BLOCK_TOKENS, r.inputLength - i * MOONCAKE_BLOCK_TOKENS);
      }
      parent = node;
    });
    promptTokens += r.inputLength;
    shareable += Math.floor(covered / blockSize) * blockSize;
  }
  return promptTokens ? shareable / promptTokens : 0;
}
