/**
 * A KV-event consumer's decoder, written from the format as llm-d decodes it (llm-d/llm-d-router at
 * commit ebab687, pkg/kvevents/engineadapter/vllm_adapter.go and common.go), not from LMPool's
 * encoder: the payload is a msgpack array of exactly three fields `[ts, events,
 * data_parallel_rank]`; an event is an array tagged by its first element or a map tagged `type`
 * (normalized to the array's field order); BlockStored needs at least five fields, BlockRemoved two;
 * a hash is an unsigned or signed 64-bit integer or bytes (the last eight, big-endian); optional
 * fields may be absent or nil, and present ones must have their type. Anything else is a
 * KvEventFormatError naming the field, where llm-d would drop the whole message.
 * @module
 */
import { Unpackr } from "msgpackr";

/** A payload that llm-d's decoder would refuse. */
export class KvEventFormatError extends Error {
  override readonly name = "KvEventFormatError";
  constructor(message: string) {
    super(message);
  }
}

/** A decoded BlockStored. */
export interface DecodedBlockStored {
  type: "BlockStored";
  blockHashes: bigint[];
  /** null when nil (llm-d: no parent). */
  parentBlockHash: bigint | null;
  tokenIds: number[];
  blockSize: number;
  loraId: number | null;
  medium: string | null;
  loraName: string | null;
  extraKeys: (unknown[] | null)[] | null;
  groupIdx: number | null;
}

/** A decoded BlockRemoved. */
export interface DecodedBlockRemoved {
  type: "BlockRemoved";
  blockHashes: bigint[];
  medium: string | null;
  groupIdx: number | null;
}

/** One decoded event. */
export type DecodedEvent = DecodedBlockStored | DecodedBlockRemoved | { type: "AllBlocksCleared" };

/** A decoded batch. */
export interface DecodedBatch {
  ts: number;
  events: DecodedEvent[];
  /** null when nil (llm-d's field is an optional int). */
  dataParallelRank: number | null;
}

const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: "bigint" });

const STORED_FIELDS = [
  "block_hashes",
  "parent_block_hash",
  "token_ids",
  "block_size",
  "lora_id",
  "medium",
  "lora_name",
  "extra_keys",
  "group_idx",
  "kv_cache_spec_kind",
  "kv_cache_spec_sliding_window",
];
const REMOVED_FIELDS = ["block_hashes", "medium", "group_idx"];
const U64 = (1n << 64n) - 1n;

/** llm-d's topic split: `kv@<pod>@<model>` gives pod and model; any other topic is the pod, model "". */
export function parseTopic(topic: string): { pod: string; model: string } {
  const parts = topic.split("@");
  return parts.length === 3 ? { pod: parts[1]!, model: parts[2]! } : { pod: topic, model: "" };
}

/** Decodes one payload as llm-d does; throws KvEventFormatError where llm-d would refuse it. */
export function decodeEventBatch(payload: Uint8Array): DecodedBatch {
  let raw: unknown;
  try {
    raw = unpackr.unpack(payload);
  } catch (e) {
    throw new KvEventFormatError(`payload is not msgpack: ${(e as Error).message}`);
  }
  if (!Array.isArray(raw) || raw.length !== 3) {
    throw new KvEventFormatError(`the batch must be an array of 3 fields, got ${describe(raw)}`);
  }
  const [ts, events, rank] = raw as unknown[];
  if (typeof ts !== "number" && typeof ts !== "bigint") throw new KvEventFormatError(`ts is ${describe(ts)}`);
  if (!Array.isArray(events)) throw new KvEventFormatError(`events is ${describe(events)}`);
  return {
    ts: Number(ts),
    events: events.map((e, i) => decodeEvent(e, i)),
    dataParallelRank: rank === null || rank === undefined ? null : int(rank, "data_parallel_rank"),
  };
}

function decodeEvent(raw: unknown, i: number): DecodedEvent {
  let f: unknown[];
  if (Array.isArray(raw)) f = raw;
  else if (raw !== null && typeof raw === "object") f = fromMap(raw as Record<string, unknown>, i);
  else throw new KvEventFormatError(`event ${i} is neither an array nor a map: ${describe(raw)}`);
  if (f.length < 1 || typeof f[0] !== "string") throw new KvEventFormatError(`event ${i} has no string tag`);
  const at = (k: number) => (k < f.length ? f[k] : null);
  const where = (field: string) => `event ${i} (${f[0]}) ${field}`;
  switch (f[0]) {
    case "BlockStored": {
      if (f.length < 5) throw new KvEventFormatError(`${where("")}needs at least 5 fields, got ${f.length}`);
      const extra = at(8);
      if (extra !== null && !Array.isArray(extra)) {
        throw new KvEventFormatError(`${where("extra_keys")} is ${describe(extra)}`);
      }
      const group = at(9) === null ? null : int(at(9), where("group_idx"));
      if (group !== null && group < 0) throw new KvEventFormatError(`${where("group_idx")} is negative`);
      optional(at(10), "string", where("kv_cache_spec_kind"));
      if (at(11) !== null) int(at(11), where("kv_cache_spec_sliding_window"));
      return {
        type: "BlockStored",
        blockHashes: hashes(f[1], where("block_hashes")),
        parentBlockHash: f[2] === null || f[2] === undefined ? null : hash(f[2], where("parent_block_hash")),
        tokenIds: ints(f[3], where("token_ids")),
        blockSize: int(f[4], where("block_size")),
        loraId: at(5) === null ? null : int(at(5), where("lora_id")),
        medium: optional(at(6), "string", where("medium")),
        loraName: optional(at(7), "string", where("lora_name")),
        extraKeys: extra === null ? null : (extra as unknown[]).map((k, j) => {
          if (k !== null && !Array.isArray(k)) {
            throw new KvEventFormatError(`${where(`extra_keys[${j}]`)} is ${describe(k)}`);
          }
          return k as unknown[] | null;
        }),
        groupIdx: group,
      };
    }
    case "BlockRemoved": {
      if (f.length < 2) throw new KvEventFormatError(`${where("")}needs at least 2 fields, got ${f.length}`);
      const group = at(3) === null ? null : int(at(3), where("group_idx"));
      if (group !== null && group < 0) throw new KvEventFormatError(`${where("group_idx")} is negative`);
      return {
        type: "BlockRemoved",
        blockHashes: hashes(f[1], where("block_hashes")),
        medium: optional(at(2), "string", where("medium")),
        groupIdx: group,
      };
    }
    case "AllBlocksCleared":
      return { type: "AllBlocksCleared" };
    default:
      throw new KvEventFormatError(`event ${i} has the unknown tag ${JSON.stringify(f[0])}`);
  }
}

/** A map-encoded event in the positional order llm-d normalizes it to. */
function fromMap(m: Record<string, unknown>, i: number): unknown[] {
  const tag = m.type;
  if (typeof tag !== "string") throw new KvEventFormatError(`map-encoded event ${i} has no string "type"`);
  const order = tag === "BlockStored" ? STORED_FIELDS : tag === "BlockRemoved" ? REMOVED_FIELDS : [];
  return [tag, ...order.map((k) => m[k] ?? null)];
}

function hash(v: unknown, where: string): bigint {
  if (typeof v === "bigint" || typeof v === "number") {
    if (typeof v === "number" && !Number.isInteger(v)) throw new KvEventFormatError(`${where}: ${v} is not an integer`);
    const b = BigInt(v);
    if (b > U64 || b < -(1n << 63n)) throw new KvEventFormatError(`${where}: ${b} does not fit 64 bits`);
    return b & U64; // an int64 is read as its uint64, as llm-d converts it
  }
  if (v instanceof Uint8Array) {
    if (v.length === 0) throw new KvEventFormatError(`${where}: an empty byte hash`);
    const last = v.subarray(Math.max(0, v.length - 8));
    let out = 0n;
    for (const byte of last) out = (out << 8n) | BigInt(byte);
    return out;
  }
  throw new KvEventFormatError(`${where}: a hash is an integer or bytes, got ${describe(v)}`);
}

function hashes(v: unknown, where: string): bigint[] {
  if (!Array.isArray(v)) throw new KvEventFormatError(`${where} is not an array: ${describe(v)}`);
  return v.map((h, j) => hash(h, `${where}[${j}]`));
}

function int(v: unknown, where: string): number {
  if (typeof v === "bigint") {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new KvEventFormatError(`${where}: ${v} is out of range`);
    }
    return Number(v);
  }
  if (typeof v === "number" && Number.isInteger(v)) return v;
  throw new KvEventFormatError(`${where} is not an integer: ${describe(v)}`);
}

function ints(v: unknown, where: string): number[] {
  if (!Array.isArray(v)) throw new KvEventFormatError(`${where} is not an array: ${describe(v)}`);
  return v.map((x, j) => int(x, `${where}[${j}]`));
}

function optional(v: unknown, type: "string", where: string): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== "string") throw new KvEventFormatError(`${where} is not a ${type}: ${describe(v)}`);
  return v;
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (v instanceof Uint8Array) return `${v.length} bytes`;
  return v === null ? "nil" : typeof v === "object" ? "a map" : `${typeof v} ${String(v)}`;
}
