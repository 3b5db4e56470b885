/**
 * Start-up of the CUDA IPC data path of a direct pair of workers (NVLink, or one device), relayed
 * by the control plane. Only each KV cache's 64-byte IPC handle (with its size) travels here; K/V
 * payloads never pass through the control plane: the source of a plan copies straight into the
 * peer's cache.
 *
 * Each worker of the pair sends ipc_offer (a request) on a short-lived connection of its own, once
 * per stage; when both offers of a stage are in, the control plane answers each side with the
 * partner's offer (ipc_answer):
 * - stage "handle": this rank's exported handle and its cache's numBlocks and blockBytes, or
 *   `error` (why this side cannot take part: no CUDA IPC on its backend, the export failed);
 * - stage "opened": whether this rank mapped the partner's cache (`error` when it did not). The pair
 *   is up only when both did, so both sides agree on the path of every plan between them.
 * Afterwards the pair's health goes through nccl_pair_status / nccl_pair_down
 * (lib/transfer/paths/nccl/nccl_messages.ts), which cover whichever direct path a pair uses.
 * @module
 */
import { z } from "zod";
import { Count, envelope } from "../../../protocol/envelope.ts";
import { registerMessages } from "../../../protocol/messages.ts";

/** Bytes of a CUDA IPC memory handle (cudaIpcMemHandle_t). */
const CUDA_IPC_HANDLE_BYTES = 64;

/** A CUDA IPC memory handle: 64 opaque bytes (msgpack bin). */
const CudaIpcHandle = z.custom<Uint8Array>((v) => v instanceof Uint8Array && v.length === CUDA_IPC_HANDLE_BYTES, {
  message: `expected a CUDA IPC handle (${CUDA_IPC_HANDLE_BYTES} bytes)`,
});

/** The two rounds of an IPC pair's start-up, in order. */
const IPC_STAGES = ["handle", "opened"] as const;

/** What one side offers at a stage; an answer carries the partner's (see the module doc). */
const offerFields = {
  stage: z.enum(IPC_STAGES),
  handle: CudaIpcHandle.optional(),
  numBlocks: Count.optional(),
  blockBytes: Count.optional(),
  error: z.string().optional(),
};

/** Worker -> control plane (request; reply ipc_answer): this rank's part of one stage with peerRank. */
const IpcOfferMessage = z.object({
  type: z.literal("ipc_offer"),
  ...envelope,
  rank: Count,
  epoch: Count,
  peerRank: Count,
  ...offerFields,
});

/**
 * Control plane -> worker (reply to ipc_offer): the partner's offer of the same stage, or in
 * `error` why there is none (the partner's reason, or the control plane's refusal).
 */
const IpcAnswerMessage = z.object({ type: z.literal("ipc_answer"), ...envelope, peerRank: Count, ...offerFields });

/** The CUDA IPC rendezvous messages by type, as the protocol's registry holds them. */
const IPC_SCHEMAS = { ipc_offer: IpcOfferMessage, ipc_answer: IpcAnswerMessage } as const;
type IpcSchemas = typeof IPC_SCHEMAS;

declare module "../../../protocol/messages.ts" {
  /** The CUDA IPC rendezvous messages (registered by lib/transfer/paths/ipc/ipc_messages.ts). */
  interface MessageSchemas extends IpcSchemas {}
}

registerMessages(IPC_SCHEMAS);
