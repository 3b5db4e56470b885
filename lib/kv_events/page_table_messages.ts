/**
 * The page table's changes, from the control plane to a launcher that publishes KV events: the
 * launcher subscribes (again after every control-plane restart) and gets each rank's full state,
 * then every applied snapshot, delta and dropped rank. Hashes and parents only: the events' other
 * contents come from the launcher's own BlockBook.
 * @module
 */
import { z } from "zod";
import { Count, envelope } from "../protocol/envelope.ts";
import { registerMessages } from "../protocol/messages.ts";

/** Launcher -> control plane: send me the page table's state now and its changes from now on. */
const KvEventsSubscribeMessage = z.object({ type: z.literal("kv_events_subscribe"), ...envelope });

/**
 * Control plane -> launcher: rank `rank` (worker epoch `epoch`) now holds exactly `hashes` (`full`),
 * or lost `removed` then gained `hashes` (a delta), or was dropped whole (`dropped`). `parents[i]`
 * is the parent of `hashes[i]`.
 */
const PageTableChangeMessage = z.object({
  type: z.literal("page_table_change"),
  ...envelope,
  rank: Count,
  epoch: Count,
  full: z.boolean(),
  dropped: z.boolean().optional(),
  hashes: z.array(z.string()),
  parents: z.array(z.string()),
  removed: z.array(z.string()),
}).refine((m) => m.hashes.length === m.parents.length, { message: "hashes and parents differ in length" });

const KV_EVENT_SCHEMAS = {
  kv_events_subscribe: KvEventsSubscribeMessage,
  page_table_change: PageTableChangeMessage,
} as const;
type KvEventSchemas = typeof KV_EVENT_SCHEMAS;

declare module "../protocol/messages.ts" {
  /** The page-table change messages (registered by lib/kv_events/page_table_messages.ts). */
  interface MessageSchemas extends KvEventSchemas {}
}

registerMessages(KV_EVENT_SCHEMAS);
