/**
 * The message registry: every message type, its schema, and the TypeScript union of all messages.
 * @module
 */
import type { z } from "zod";
import { BlockDeltaMessage, BlockSnapshotMessage, SnapshotRequestMessage } from "./block_messages.ts";
import {
  AbortMessage,
  DispatchMessage,
  ErrorMessage,
  FinishMessage,
  HeartbeatMessage,
  HelloMessage,
  PageTableMessage,
  PageTableRequestMessage,
  RankDownMessage,
  ReadyMessage,
  RouteQueryMessage,
  RouteReleaseMessage,
  RouteResultMessage,
  ShutdownMessage,
  StatsMessage,
  StatsRequestMessage,
  TokenDeltaMessage,
} from "./runtime_messages.ts";
import { IpcAnswerMessage, IpcOfferMessage } from "./ipc_messages.ts";
import { NcclIdMessage, NcclIdOfferMessage, NcclPairDownMessage, NcclPairStatusMessage } from "./nccl_messages.ts";
import {
  TransferAbortMessage,
  TransferAckMessage,
  TransferExecuteMessage,
  TransferFinalizeMessage,
  TransferPrepareMessage,
  TransferPublishMessage,
} from "./transfer_messages.ts";

/** Schema of each message type, keyed by its `type`. */
export const MESSAGE_SCHEMAS = {
  hello: HelloMessage,
  ready: ReadyMessage,
  route_query: RouteQueryMessage,
  route_result: RouteResultMessage,
  route_release: RouteReleaseMessage,
  rank_down: RankDownMessage,
  dispatch: DispatchMessage,
  token_delta: TokenDeltaMessage,
  finish: FinishMessage,
  abort: AbortMessage,
  block_snapshot: BlockSnapshotMessage,
  block_delta: BlockDeltaMessage,
  snapshot_request: SnapshotRequestMessage,
  heartbeat: HeartbeatMessage,
  shutdown: ShutdownMessage,
  page_table_request: PageTableRequestMessage,
  page_table: PageTableMessage,
  stats_request: StatsRequestMessage,
  stats: StatsMessage,
  error: ErrorMessage,
  transfer_prepare: TransferPrepareMessage,
  transfer_execute: TransferExecuteMessage,
  transfer_publish: TransferPublishMessage,
  transfer_finalize: TransferFinalizeMessage,
  transfer_abort: TransferAbortMessage,
  transfer_ack: TransferAckMessage,
  nccl_id_offer: NcclIdOfferMessage,
  nccl_id: NcclIdMessage,
  nccl_pair_status: NcclPairStatusMessage,
  nccl_pair_down: NcclPairDownMessage,
  ipc_offer: IpcOfferMessage,
  ipc_answer: IpcAnswerMessage,
} as const;

/** Every message type name. */
export type MessageType = keyof typeof MESSAGE_SCHEMAS;

/** The message of one type. */
export type MessageOf<T extends MessageType> = z.infer<(typeof MESSAGE_SCHEMAS)[T]>;

/** Any protocol message. */
export type Message = { [T in MessageType]: MessageOf<T> }[MessageType];

/** True when `type` names a known message type. */
export function isMessageType(type: unknown): type is MessageType {
  return typeof type === "string" && Object.hasOwn(MESSAGE_SCHEMAS, type);
}
