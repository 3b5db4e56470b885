/**
 * Chained block hashes: a block's hash covers its parent's hash and its own token ids, so equal
 * hashes mean equal prefixes. SHA-256 truncated to 128 bits, as 32 hex chars. An optional cache
 * salt seeds the chain so tenants never share blocks. The launcher, control plane and workers all
 * call this one function.
 * @module
 */
import { createHash } from "node:crypto";

/** A block hash: 32 lowercase hex characters (128 bits). */
export type BlockHash = string;

/** Hash of the (virtual) parent of a sequence's first block. */
export function rootHash(cacheSalt?: string): BlockHash {
  return cacheSalt ? createHash("sha256").update("salt:").update(cacheSalt).digest("hex").slice(0, 32) : "";
}

/** Hash of one complete block given its parent's hash. */
export function blockHash(parent: BlockHash, tokenIds: ArrayLike<number>): BlockHash {
  const ids = tokenIds instanceof Int32Array ? tokenIds : Int32Array.from(tokenIds);
  return createHash("sha256")
    .update(parent)
    .update(new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength))
    .digest("hex")
    .slice(0, 32);
}

/** Hashes of every complete block of `tokenIds` (a trailing partial block has none). */
export function prefixBlockHashes(tokenIds: ArrayLike<number>, blockSize: number, cacheSalt?: string): BlockHash[] {
  if (!Number.isInteger(blockSize) || blockSize <= 0) {
    throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
  }
  const out: BlockHash[] = [];
  let parent = rootHash(cacheSalt);
  const full = Math.floor(tokenIds.length / blockSize);
  const ids = Int32Array.from(tokenIds);
  for (let b = 0; b < full; b++) {
    parent = blockHash(parent, ids.subarray(b * blockSize, (b + 1) * blockSize));
    out.push(parent);
  }
  return out;
}

/**
 * Leading blocks two hash chains share. A hash covers its whole prefix, so chains agree up to some
 * position and never again after it: a binary search for the last agreeing position finds it.
 */
export function sharedBlocks(a: readonly BlockHash[], b: readonly BlockHash[]): number {
  let lo = 0;
  let hi = Math.min(a.length, b.length);
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (a[mid - 1] === b[mid - 1]) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
