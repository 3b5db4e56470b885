/**
 * Start-up of the NCCL pair of a direct NVLink pair of workers, relayed by the control plane, and
 * the pair's health afterwards. Only the 128-byte NCCL unique id travels here; K/V payloads never
 * pass through the control plane.
 *
 * Rendezvous: each worker of the pair sends nccl_id_offer (a request) on a short-lived connection
 * of its own; the lower rank's offer carries the unique id. Once both offers are in, the control
 * plane answers both with nccl_id (the id, or why the pair cannot come up), so both join the pair
 * at about the same time. Afterwards each worker reports nccl_pair_status on its regular
 * connection; a pair one side lost is dropped on the other side too (nccl_pair_down).
 * @module
 */
import { z } from "zod";
import { Count, envelope } from "../../../protocol/envelope.ts";
import { registerMessages } from "../../../protocol/messages.ts";

/** Bytes of an NCCL unique id (ncclUniqueId). */
const NCCL_UNIQUE_ID_BYTES = 128;

/** An NCCL unique id: 128 opaque bytes (msgpack bin). */
const NcclUniqueId = z.custom<Uint8Array>((v) => v instanceof Uint8Array && v.length === NCCL_UNIQUE_ID_BYTES, {
  message: `expected an NCCL unique id (${NCCL_UNIQUE_ID_BYTES} bytes)`,
});

/**
 * Worker -> control plane (request; reply nccl_id): this rank is ready to join its pair with
 * peerRank. The lower rank sends the unique id; `unavailable` says why this side cannot join (the
 * partner is told instead of waiting).
 */
const NcclIdOfferMessage = z.object({
  type: z.literal("nccl_id_offer"),
  ...envelope,
  rank: Count,
  epoch: Count,
  peerRank: Count,
  uniqueId: NcclUniqueId.optional(),
  unavailable: z.string().optional(),
});

/** Control plane -> worker (reply to nccl_id_offer): the pair's unique id, or why there is none. */
const NcclIdMessage = z.object({
  type: z.literal("nccl_id"),
  ...envelope,
  peerRank: Count,
  uniqueId: NcclUniqueId.optional(),
  error: z.string().optional(),
});

/**
 * Worker -> control plane: whether this rank's direct pair with peerRank (NCCL, or CUDA IPC: see
 * ipc_messages.ts) is up (after start-up, on every reconnect, and when it breaks).
 */
const NcclPairStatusMessage = z.object({
  type: z.literal("nccl_pair_status"),
  ...envelope,
  rank: Count,
  peerRank: Count,
  ok: z.boolean(),
  error: z.string().optional(),
});

/** Control plane -> worker: the partner has no working direct pair; use the host path for peerRank. */
const NcclPairDownMessage = z.object({
  type: z.literal("nccl_pair_down"),
  ...envelope,
  peerRank: Count,
  reason: z.string(),
});

/** The NCCL pair messages by type, as the protocol's registry holds them. */
const NCCL_SCHEMAS = {
  nccl_id_offer: NcclIdOfferMessage,
  nccl_id: NcclIdMessage,
  nccl_pair_status: NcclPairStatusMessage,
  nccl_pair_down: NcclPairDownMessage,
} as const;
type NcclSchemas = typeof NCCL_SCHEMAS;

declare module "../../../protocol/messages.ts" {
  /** The NCCL pair messages (registered by lib/transfer/paths/nccl/nccl_messages.ts). */
  interface MessageSchemas extends NcclSchemas {}
}

registerMessages(NCCL_SCHEMAS);
