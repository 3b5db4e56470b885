/**
 * `--kv-events-config`, as vLLM takes it: a JSON object with vLLM's KVEventsConfig fields
 * (vllm/config/kv_events.py, commit 0181ea3 in the code index) and their defaults, plus one field of
 * LMPool's own, `granularity`. Unknown fields are refused by name, as vLLM's config classes refuse
 * them.
 *
 * | field | default | meaning |
 * | --- | --- | --- |
 * | `enable_kv_cache_events` | false | publish KV events at all |
 * | `publisher` | "zmq" when enabled, else "null" | "null" publishes nothing |
 * | `endpoint` | "tcp://*:5557" | PUB socket: binds when it has `*` or `::` (or is ipc/inproc), else connects |
 * | `replay_endpoint` | none | ROUTER socket that answers replay requests from the buffer |
 * | `buffer_steps` | 10000 | batches kept for replay (the buffer's bound) |
 * | `hwm` | 100000 | ZeroMQ send high-water mark of the PUB socket |
 * | `max_queue_size` | 100000 | accepted for compatibility; LMPool has no queue (it publishes on its event loop) |
 * | `topic` | "" | first frame of every message; llm-d parses `kv@<pod>@<model>` |
 * | `granularity` (LMPool's) | "node" | "node": one stream for the whole node; "rank": one per rank, vLLM's data-parallel way |
 * @module
 */

/** One stream per node (pod semantics, for llm-d), or one per rank (vLLM's data parallelism). */
export type KvEventsGranularity = "node" | "rank";

/** The resolved configuration. */
export interface KvEventsConfig {
  enableKvCacheEvents: boolean;
  publisher: "null" | "zmq";
  endpoint: string;
  replayEndpoint: string | null;
  bufferSteps: number;
  hwm: number;
  maxQueueSize: number;
  topic: string;
  granularity: KvEventsGranularity;
}

/** vLLM's defaults (publisher follows enable_kv_cache_events when unset). */
export const KV_EVENTS_DEFAULTS = {
  endpoint: "tcp://*:5557",
  bufferSteps: 10_000,
  hwm: 100_000,
  maxQueueSize: 100_000,
  topic: "",
  granularity: "node",
} as const;

const FIELDS = [
  "enable_kv_cache_events",
  "publisher",
  "endpoint",
  "replay_endpoint",
  "buffer_steps",
  "hwm",
  "max_queue_size",
  "topic",
  "granularity",
] as const;

/** True when the configuration publishes events (enabled, publisher "zmq"). */
export function kvEventsEnabled(c: KvEventsConfig | undefined): c is KvEventsConfig {
  return c !== undefined && c.enableKvCacheEvents && c.publisher === "zmq";
}

/**
 * Parses `--kv-events-config` (a JSON text or an already parsed object). Bad JSON, an unknown
 * field or a bad value is a RangeError (TypeError for a wrong type) naming the field and the value.
 */
export function parseKvEventsConfig(input: string | Record<string, unknown>): KvEventsConfig {
  let raw: unknown = input;
  if (typeof input === "string") {
    try {
      raw = JSON.parse(input);
    } catch (e) {
      throw new RangeError(`--kv-events-config must be a JSON object, got ${JSON.stringify(input)}`, { cause: e });
    }
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new TypeError(`--kv-events-config must be a JSON object, got ${JSON.stringify(raw)}`);
  }
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!(FIELDS as readonly string[]).includes(k)) {
      throw new RangeError(
        `--kv-events-config has an unknown field ${JSON.stringify(k)}; the fields are ${FIELDS.join(", ")}`,
      );
    }
  }
  const enable = optional(o, "enable_kv_cache_events", "boolean") ?? false;
  const publisher = optional(o, "publisher", "string") ?? (enable ? "zmq" : "null");
  if (publisher !== "zmq" && publisher !== "null") {
    throw new RangeError(`--kv-events-config publisher must be "zmq" or "null", got ${JSON.stringify(publisher)}`);
  }
  const granularity = optional(o, "granularity", "string") ?? KV_EVENTS_DEFAULTS.granularity;
  if (granularity !== "node" && granularity !== "rank") {
    throw new RangeError(`--kv-events-config granularity must be "node" or "rank", got ${JSON.stringify(granularity)}`);
  }
  const endpoint = optional(o, "endpoint", "string") ?? KV_EVENTS_DEFAULTS.endpoint;
  checkEndpoint("endpoint", endpoint);
  const replay = o.replay_endpoint === null ? null : optional(o, "replay_endpoint", "string") ?? null;
  if (replay !== null) checkEndpoint("replay_endpoint", replay);
  return {
    enableKvCacheEvents: enable,
    publisher,
    endpoint,
    replayEndpoint: replay,
    bufferSteps: positiveInteger(o, "buffer_steps", KV_EVENTS_DEFAULTS.bufferSteps, MAX_ARRAY_LENGTH),
    hwm: nonNegativeInteger(o, "hwm", KV_EVENTS_DEFAULTS.hwm, MAX_INT32),
    maxQueueSize: positiveInteger(o, "max_queue_size", KV_EVENTS_DEFAULTS.maxQueueSize),
    topic: optional(o, "topic", "string") ?? KV_EVENTS_DEFAULTS.topic,
    granularity,
  };
}

function optional<T extends "string" | "boolean" | "number">(
  o: Record<string, unknown>,
  key: string,
  type: T,
): (T extends "string" ? string : T extends "boolean" ? boolean : number) | undefined {
  const v = o[key];
  if (v === undefined) return undefined;
  const actual: string = typeof v;
  if (actual !== type) throw new TypeError(`--kv-events-config ${key} must be a ${type}, got ${JSON.stringify(v)}`);
  return v as never;
}

/** libzmq's socket options are C ints; the replay buffer is an array. */
const MAX_INT32 = 2 ** 31 - 1;
const MAX_ARRAY_LENGTH = 2 ** 32 - 1;

function positiveInteger(
  o: Record<string, unknown>,
  key: string,
  fallback: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const v = optional(o, key, "number") ?? fallback;
  if (!Number.isSafeInteger(v) || v < 1) {
    throw new RangeError(`--kv-events-config ${key} must be an integer >= 1, got ${v}`);
  }
  if (v > max) throw new RangeError(`--kv-events-config ${key} must be at most ${max}, got ${v}`);
  return v;
}

function nonNegativeInteger(o: Record<string, unknown>, key: string, fallback: number, max: number): number {
  const v = optional(o, key, "number") ?? fallback;
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new RangeError(`--kv-events-config ${key} must be an integer >= 0, got ${v}`);
  }
  if (v > max) throw new RangeError(`--kv-events-config ${key} must be at most ${max}, got ${v}`);
  return v;
}

function checkEndpoint(key: string, endpoint: string): void {
  if (!/^(tcp|ipc|inproc):\/\/.+/.test(endpoint)) {
    throw new RangeError(
      `--kv-events-config ${key} must be a ZeroMQ endpoint such as tcp://*:5557, tcp://host:5557, ipc:///path or inproc://name, got ${
        JSON.stringify(endpoint)
      }`,
    );
  }
}
