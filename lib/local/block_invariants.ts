/**
 * The block manager's invariants, checked from scratch (tests call this after every workload and,
 * in property tests, after every step). Each violation throws an Error that names it.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import { type BlockPool, BlockState, blockStateName } from "./block_pool.ts";

/** The block manager state the checker reads. */
export interface BlockManagerState {
  pool: BlockPool;
  cached: ReadonlyMap<BlockHash, number>;
  hashOf: readonly (BlockHash | null)[];
  parentOf: readonly BlockHash[];
  children: ReadonlyMap<BlockHash, number>;
  numReclaimable: number;
  numReserved: number;
}

/** Extra expectations of the caller. */
export interface InvariantOptions {
  /** Block tables of every live sequence: each block's refCount must equal its occurrences. */
  liveBlockTables?: Iterable<readonly number[]>;
  /** The workload has drained: no references, pins or reservations; free + reclaimable == total. */
  drained?: boolean;
}

/** Throws naming the first violated invariant. */
export function checkBlockInvariants(s: BlockManagerState, o: InvariantOptions = {}): void {
  const { pool } = s;
  const n = pool.numBlocks;
  const fail = (what: string): never => {
    throw new Error(`block manager invariant violated: ${what}`);
  };
  const onFreeList = new Uint8Array(n);
  for (const b of pool.freeIds()) {
    if (onFreeList[b]) fail(`block ${b} is on the free list twice`);
    onFreeList[b] = 1;
  }
  let reclaimable = 0;
  let reserved = 0;
  const children = new Map<BlockHash, number>();
  for (let b = 0; b < n; b++) {
    const st = pool.state[b]!;
    const ref = pool.refCount[b]!;
    const pin = pool.pinCount[b]!;
    const hash = s.hashOf[b] ?? null;
    const name = `block ${b} (${blockStateName(st)}, refCount=${ref}, pinCount=${pin})`;
    if (ref < 0 || pin < 0) fail(`${name} has a negative count`);
    if ((st === BlockState.Free) !== (onFreeList[b] === 1)) {
      fail(`${name} ${onFreeList[b] ? "is" : "is not"} on the free list`);
    }
    if (st === BlockState.Free || st === BlockState.Reserved) {
      if (ref !== 0 || pin !== 0 || hash !== null) fail(`${name} is referenced, pinned or hashed`);
      if (st === BlockState.Reserved) reserved++;
    } else if (st === BlockState.Writing) {
      if (ref === 0) fail(`${name} is being written by nobody`);
      if (pin !== 0 || hash !== null) fail(`${name} is pinned or published before its K/V is complete`);
    } else if (st === BlockState.Ready) {
      if (hash === null && (ref === 0 || pin !== 0)) fail(`${name} is unpublished yet kept or pinned`);
    } else {
      fail(`${name} has an unknown state`);
    }
    if (hash !== null) {
      if (s.cached.get(hash) !== b) fail(`${name} has hash ${hash} but the cache maps it to ${s.cached.get(hash)}`);
      if (ref === 0 && pin === 0) reclaimable++;
      const parent = s.parentOf[b]!;
      children.set(parent, (children.get(parent) ?? 0) + 1);
    }
  }
  for (const [hash, b] of s.cached) {
    if (s.hashOf[b] !== hash) fail(`cache maps ${hash} to block ${b}, which carries ${s.hashOf[b]}`);
  }
  if (children.size !== s.children.size) {
    fail(`child counts cover ${s.children.size} parents, expected ${children.size}`);
  }
  for (const [parent, count] of children) {
    if (s.children.get(parent) !== count) {
      fail(`parent ${parent || "(root)"} has ${s.children.get(parent)} counted children, expected ${count}`);
    }
  }
  if (reclaimable !== s.numReclaimable) fail(`numReclaimable is ${s.numReclaimable}, counted ${reclaimable}`);
  if (reserved !== s.numReserved) fail(`numReserved is ${s.numReserved}, counted ${reserved}`);
  if (o.liveBlockTables) {
    const refs = new Int32Array(n);
    for (const table of o.liveBlockTables) for (const b of table) refs[b]!++;
    for (let b = 0; b < n; b++) {
      if (refs[b] !== pool.refCount[b]) {
        fail(`block ${b} has refCount=${pool.refCount[b]} but ${refs[b]} live block-table entries`);
      }
    }
  }
  if (o.drained) {
    for (let b = 0; b < n; b++) {
      if (pool.refCount[b] !== 0 || pool.pinCount[b] !== 0) {
        fail(`after draining, block ${b} still has refCount=${pool.refCount[b]} pinCount=${pool.pinCount[b]}`);
      }
    }
    if (reserved !== 0) fail(`after draining, ${reserved} blocks are still reserved`);
    if (pool.numFree + reclaimable !== n) {
      fail(`after draining, free (${pool.numFree}) + reclaimable (${reclaimable}) != total (${n})`);
    }
  }
}
