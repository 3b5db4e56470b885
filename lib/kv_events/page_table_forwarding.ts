/**
 * The control plane's half of KV events: an applied page-table change, as the message a
 * subscribed launcher gets (hashes and parents only; reference counts and recency stay behind).
 * @module
 */
import type { PageTableChange } from "../global/global_block_manager.ts";
import type { Outgoing } from "../protocol/connection.ts";
import "./page_table_messages.ts";

/** The page_table_change messages that tell a launcher of `change`. */
export function pageTableChangeMessages(change: PageTableChange): (Outgoing & { type: "page_table_change" })[] {
  switch (change.kind) {
    case "snapshot": {
      const s = change.snapshot;
      return [{
        type: "page_table_change",
        rank: s.rank,
        epoch: s.epoch,
        full: true,
        hashes: s.entries.map((e) => e.hash),
        parents: s.entries.map((e) => e.parent),
        removed: [],
      }];
    }
    case "delta": {
      const d = change.delta;
      // Reference counts and recency (touched) change nothing a consumer sees.
      if (d.added.length === 0 && d.removed.length === 0) return [];
      return [{
        type: "page_table_change",
        rank: d.rank,
        epoch: d.epoch,
        full: false,
        hashes: d.added.map((e) => e.hash),
        parents: d.added.map((e) => e.parent),
        removed: d.removed.map((r) => r.hash),
      }];
    }
    case "drop":
      return [{
        type: "page_table_change",
        rank: change.rank,
        epoch: change.epoch,
        full: true,
        dropped: true,
        hashes: [],
        parents: [],
        removed: [],
      }];
  }
}
