/**
 * Block hashes on the wire. LMPool's block hash is 128 bits (32 hex characters, lib/core/
 * block_hash.ts); vLLM's events and llm-d's index carry 64-bit integers. The wire hash is the
 * first 64 bits of LMPool's, read big-endian: deterministic, the same in every process, and as
 * collision-resistant as any 64-bit hash of the chain (it still covers the parent and the tokens).
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

/** The unsigned 64-bit integer that stands for `hash` in KV events. */
export function wireHash(hash: BlockHash): bigint {
  if (hash.length < 16) throw new RangeError(`a block hash has 32 hex characters, got ${JSON.stringify(hash)}`);
  return BigInt(`0x${hash.slice(0, 16)}`);
}
