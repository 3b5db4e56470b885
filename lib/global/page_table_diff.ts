/**
 * Compares the global page table with the union of worker snapshots (after a control-plane
 * restart the rebuilt table must equal it). Lists every difference, naming rank and hash.
 * @module
 */
import type { BlockEntry, BlockSnapshot } from "../core/block_snapshot.ts";
import type { GlobalBlockManager } from "./global_block_manager.ts";

/** The differences found; `equal` when there are none. */
export interface PageTableDiff {
  equal: boolean;
  differences: string[];
}

/**
 * Diffs `table` against `snapshots` (one per live rank). Compares placement (hash, parent, block,
 * generation, refCount) and epochs; `strict` adds versions, recency/frequency, capacity and load.
 */
export function diffPageTable(
  table: GlobalBlockManager,
  snapshots: readonly BlockSnapshot[],
  options: { strict?: boolean; maxDifferences?: number } = {},
): PageTableDiff {
  const max = options.maxDifferences ?? 50;
  const out: string[] = [];
  const add = (s: string) => {
    if (out.length < max) out.push(s);
  };
  const snapRanks = new Set(snapshots.map((s) => s.rank));
  for (const r of table.healthyRanks()) if (!snapRanks.has(r)) add(`rank ${r} is in the table but has no snapshot`);
  for (const s of snapshots) {
    const t = table.table(s.rank);
    if (!t) {
      add(`rank ${s.rank} has a snapshot but is not in the table`);
      continue;
    }
    if (t.epoch !== s.epoch) add(`rank ${s.rank}: table epoch ${t.epoch}, snapshot epoch ${s.epoch}`);
    if (options.strict) {
      if (t.version !== s.version) add(`rank ${s.rank}: table version ${t.version}, snapshot version ${s.version}`);
      if (JSON.stringify(t.capacity) !== JSON.stringify(s.capacity)) {
        add(`rank ${s.rank}: capacity ${JSON.stringify(t.capacity)} != ${JSON.stringify(s.capacity)}`);
      }
      if (JSON.stringify(t.load) !== JSON.stringify(s.load)) {
        add(`rank ${s.rank}: load ${JSON.stringify(t.load)} != ${JSON.stringify(s.load)}`);
      }
    }
    const seen = new Set<string>();
    for (const e of s.entries) {
      seen.add(e.hash);
      const g = t.entries.get(e.hash);
      if (!g) {
        add(`rank ${s.rank}: block ${e.hash} (id ${e.block}) is in the snapshot but not the table`);
        continue;
      }
      const d = entryDifference(g, e, options.strict ?? false);
      if (d) add(`rank ${s.rank}: block ${e.hash}: ${d}`);
    }
    for (const h of t.entries.keys()) {
      if (!seen.has(h)) add(`rank ${s.rank}: block ${h} is in the table but not the snapshot`);
    }
  }
  return { equal: out.length === 0, differences: out };
}

function entryDifference(table: BlockEntry, snap: BlockEntry, strict: boolean): string | undefined {
  const keys: (keyof BlockEntry)[] = ["parent", "block", "generation", "refCount"];
  if (strict) keys.push("lastAccess", "accessCount");
  for (const k of keys) {
    if (table[k] !== snap[k]) return `${k} is ${String(table[k])} in the table, ${String(snap[k])} in the snapshot`;
  }
  return undefined;
}
