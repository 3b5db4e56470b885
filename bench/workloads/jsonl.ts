/**
 * Custom workloads from JSONL, so any external trace can be replayed. One JSON object per line:
 *   {"prompt": "text"} or {"prompt_token_ids": [1, 2, 3]}   (exactly one of them)
 *   "max_tokens": N                                          (required, integer >= 1)
 *   "arrival_time": seconds since the start of the trace     (optional, >= 0)
 *   "session_id": "s1"                                      (optional: turns of a session run in order)
 *   "temperature": 0.6, "ignore_eos": true, "id": "r1", "phase": "warmup"   (optional)
 * Blank lines are skipped; other fields are ignored. Every error names the source and line.
 * @module
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import type { Workload, WorkloadRequest } from "./types.ts";

/** A JSONL line that is not a valid request; `line` is 1-based. */
export class JsonlFormatError extends Error {
  override readonly name = "JsonlFormatError";
  constructor(
    readonly source: string,
    readonly line: number,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(`${source}:${line}: ${problem}`, options);
  }
}

function parseLine(obj: unknown, fail: (problem: string) => never, fallbackId: string): WorkloadRequest {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    fail(`expected a JSON object, got ${JSON.stringify(obj)}`);
  }
  const o = obj as Record<string, unknown>;
  const hasText = o.prompt !== undefined;
  const hasIds = o.prompt_token_ids !== undefined;
  if (!hasText && !hasIds && o.hash_ids !== undefined) {
    fail(`a Mooncake-format line ("hash_ids", no prompt): replay such a trace with --workload mooncake`);
  }
  if (hasText === hasIds) {
    fail(`exactly one of "prompt" and "prompt_token_ids" is required, got ${hasText ? "both" : "neither"}`);
  }
  const req: WorkloadRequest = { id: fallbackId, maxTokens: 0 };
  if (hasText) {
    if (typeof o.prompt !== "string" || o.prompt.length === 0) {
      fail(`"prompt" must be a non-empty string, got ${JSON.stringify(o.prompt)}`);
    }
    req.prompt = o.prompt;
  } else {
    const ids = o.prompt_token_ids;
    if (!Array.isArray(ids) || ids.length === 0) {
      fail(`"prompt_token_ids" must be a non-empty array of token ids, got ${JSON.stringify(ids)?.slice(0, 60)}`);
    }
    const bad = ids.findIndex((t) => !Number.isSafeInteger(t) || (t as number) < 0);
    if (bad >= 0) fail(`"prompt_token_ids"[${bad}] must be a non-negative integer, got ${JSON.stringify(ids[bad])}`);
    req.promptTokenIds = ids as number[];
  }
  if (!Number.isSafeInteger(o.max_tokens) || (o.max_tokens as number) < 1) {
    fail(`"max_tokens" must be an integer >= 1, got ${JSON.stringify(o.max_tokens)}`);
  }
  req.maxTokens = o.max_tokens as number;
  if (o.arrival_time !== undefined) {
    if (typeof o.arrival_time !== "number" || !Number.isFinite(o.arrival_time) || o.arrival_time < 0) {
      fail(`"arrival_time" must be a number of seconds >= 0, got ${JSON.stringify(o.arrival_time)}`);
    }
    req.arrivalTime = o.arrival_time;
  }
  if (o.session_id !== undefined) {
    if (typeof o.session_id !== "string" && typeof o.session_id !== "number") {
      fail(`"session_id" must be a string, got ${JSON.stringify(o.session_id)}`);
    }
    req.sessionId = String(o.session_id);
  }
  if (o.temperature !== undefined) {
    if (typeof o.temperature !== "number" || !(o.temperature >= 0) || !Number.isFinite(o.temperature)) {
      fail(`"temperature" must be a number >= 0, got ${JSON.stringify(o.temperature)}`);
    }
    req.temperature = o.temperature;
  }
  if (o.ignore_eos !== undefined) {
    if (typeof o.ignore_eos !== "boolean") {
      fail(`"ignore_eos" must be true or false, got ${JSON.stringify(o.ignore_eos)}`);
    }
    req.ignoreEos = o.ignore_eos;
  }
  if (o.id !== undefined) req.id = String(o.id);
  if (o.phase !== undefined) req.phase = String(o.phase);
  return req;
}

/** A line's problem, as an error naming the source and the line. */
export type LineFailure = (problem: string, cause?: unknown) => never;

/**
 * Each non-blank line of JSONL `text` parsed as JSON, with the function that fails naming that line;
 * a line that is not JSON fails at once. Throws when the text holds no line at all.
 */
export function* jsonlObjects(text: string, source: string): Generator<{ obj: unknown; fail: LineFailure }> {
  const lines = text.split("\n");
  let count = 0;
  for (let i = 0; i < lines.length; i++) {
    const raw = (lines[i] as string).trim();
    if (raw === "") continue;
    const fail: LineFailure = (problem, cause) => {
      throw new JsonlFormatError(source, i + 1, problem, cause === undefined ? undefined : { cause });
    };
    let obj: unknown;
    try {
      obj = JSON.parse(raw);
    } catch (e) {
      fail(`not valid JSON (${(e as Error).message})`, e);
    }
    count++;
    yield { obj, fail };
  }
  if (count === 0) throw new JsonlFormatError(source, lines.length, "no requests in the file");
}

/** Parses JSONL text into a workload; `source` names the text in errors (a path or "<stdin>"). */
export function parseJsonlWorkload(text: string, options: { name?: string; source?: string } = {}): Workload {
  const source = options.source ?? "<jsonl>";
  const name = options.name ?? "jsonl";
  const requests: WorkloadRequest[] = [];
  for (const { obj, fail } of jsonlObjects(text, source)) {
    requests.push(parseLine(obj, fail, `${name}-${String(requests.length).padStart(4, "0")}`));
  }
  const seen = new Set<string>();
  for (const r of requests) {
    if (seen.has(r.id)) throw new RangeError(`${source}: request id ${JSON.stringify(r.id)} appears more than once`);
    seen.add(r.id);
  }
  return { name, description: `trace replayed from ${source}`, seed: null, params: { source }, settings: {}, requests };
}

/** Reads a JSONL workload file. */
export function readJsonlWorkload(path: string, options: { name?: string } = {}): Workload {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new RangeError(`cannot read JSONL workload ${path}: ${(e as Error).message}`, { cause: e });
  }
  return parseJsonlWorkload(text, { name: options.name ?? basename(path).replace(/\.jsonl$/, ""), source: path });
}
