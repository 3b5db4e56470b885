/**
 * The payload of one KV-event message: a msgpack array `[ts, events, data_parallel_rank]`, each
 * event an array tagged by its first element. Sources followed:
 *
 * - vLLM `vllm/distributed/kv_events.py` at commit 0181ea3173e53eea8cf04a86891488e3dc89bb34 (the
 *   code index's vllm-project/vllm): the event classes and their field order, `medium` "GPU",
 *   EventBatch's `data_parallel_rank`.
 * - llm-d's decoder, `llm-d/llm-d-router` at commit ebab687927f5331c1b39defcb579a07951bce56c:
 *   `pkg/kvevents/engineadapter/vllm_adapter.go` (batch, events, field positions),
 *   `pkg/kvevents/engineadapter/common.go` (hashes as uint64/int64/bytes, topic `kv@<pod>@<model>`),
 *   `pkg/kvevents/zmq_subscriber.go` (frames, replay), `pkg/kvevents/pool.go` (how BlockStored's
 *   tokens and parent become its index keys); and the older `llm-d/llm-d-kv-cache-manager` at
 *   a378f5b38f62c746388997cbba1da706a237ec42 (`pkg/kvcache/kvevents/events.go`).
 *
 * Where they disagree, this follows llm-d: vLLM at 0181ea3 encodes the batch and its events as
 * msgpack maps (msgspec structs without array_like, events tagged under "type"), but llm-d decodes
 * the batch as an array struct of exactly three fields (vmihailenco/msgpack refuses any other
 * length), so the batch is an array and the rank is always sent; events are arrays tagged by their
 * first element, which both llm-d decoders read (the router also reads maps). BlockStored is
 * `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
 * lora_name]`, plus `extra_keys` (one entry per block: `[cache_salt]` on a salted sequence's first
 * block, as vLLM's generate_block_hash_extra_keys puts it, else nil) only when a block has one;
 * `group_idx` is left out (one KV cache group: llm-d then indexes the block without a group).
 * BlockRemoved is `["BlockRemoved", block_hashes, medium]`, AllBlocksCleared `["AllBlocksCleared"]`.
 * The older kv-cache-manager decodes BlockStored as exactly six fields and would refuse
 * `lora_name`; the router, llm-d's current home of this code, reads it.
 * @module
 */
import { Packr } from "msgpackr";

/** vLLM's MEDIUM_GPU: where LMPool's blocks live. */
export const MEDIUM_GPU = "GPU";

/** A run of blocks stored: each block's parent is the one before it, the first's is `parentBlockHash`. */
export interface BlockStoredEvent {
  type: "BlockStored";
  blockHashes: bigint[];
  /** null for a sequence's first block. */
  parentBlockHash: bigint | null;
  /** Every block's tokens, in order: blockHashes.length * blockSize of them. */
  tokenIds: number[];
  blockSize: number;
  /** One per block (`[cache_salt]` or null), or undefined when no block has extra keys. */
  extraKeys?: (unknown[] | null)[];
}

/** Blocks no longer held. */
export interface BlockRemovedEvent {
  type: "BlockRemoved";
  blockHashes: bigint[];
}

/** The stream's whole cache emptied. */
export interface AllBlocksClearedEvent {
  type: "AllBlocksCleared";
}

/** One KV event. */
export type KvEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

// Plain msgpack: no records extension (structures), bigints as 64-bit integers.
const packr = new Packr({ useRecords: false, variableMapSize: true });

/** The wire array of one event. */
function eventArray(e: KvEvent): unknown[] {
  switch (e.type) {
    case "BlockStored": {
      // lora_id and lora_name are nil: LMPool serves no LoRA adapters.
      const fields: unknown[] = [
        "BlockStored",
        e.blockHashes,
        e.parentBlockHash,
        e.tokenIds,
        e.blockSize,
        null,
        MEDIUM_GPU,
        null,
      ];
      if (e.extraKeys) fields.push(e.extraKeys);
      return fields;
    }
    case "BlockRemoved":
      return ["BlockRemoved", e.blockHashes, MEDIUM_GPU];
    case "AllBlocksCleared":
      return ["AllBlocksCleared"];
  }
}

/** The msgpack payload `[ts, events, data_parallel_rank]`; `ts` in seconds since the epoch. */
export function encodeEventBatch(ts: number, events: readonly KvEvent[], dataParallelRank: number): Uint8Array {
  // A whole-number ts would pack as an integer; vLLM's is a float (time.time()).
  const t = Number.isInteger(ts) ? ts + 1e-6 : ts;
  // A copy: msgpackr returns a view of a buffer its next pack reuses, and the replay buffer keeps this.
  return new Uint8Array(packr.pack([t, events.map(eventArray), dataParallelRank]));
}
