/**
 * The message registry: every message type, its schema, and the TypeScript union of all messages.
 * The runtime's own messages (routing, dispatch, token streaming, blocks, liveness, stats) are
 * registered here. A higher layer adds a family of its own when its module loads: it calls
 * {@link registerMessages} and declares the family in {@link MessageSchemas} by module
 * augmentation, so the protocol never imports the layers that use it (the transfer layer's phase,
 * CUDA IPC and NCCL messages come in this way).
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
  LoadedMessage,
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
import { RUNTIME_FAST_CHECKS } from "./runtime_fast_checks.ts";
import type { FastCheck } from "./fast_check.ts";

/** The runtime's own messages, keyed by `type`. */
const RUNTIME_SCHEMAS = {
  hello: HelloMessage,
  loaded: LoadedMessage,
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
} as const;

type RuntimeSchemas = typeof RUNTIME_SCHEMAS;

/**
 * Schema of each message type, keyed by its `type`. A module that registers a family of messages
 * adds it here too: `declare module ".../protocol/messages.ts" { interface MessageSchemas { ... } }`.
 */
export interface MessageSchemas extends RuntimeSchemas {}

/** Every message type name. */
export type MessageType = keyof MessageSchemas;

/** The message of one type. */
export type MessageOf<T extends MessageType> = z.infer<MessageSchemas[T]>;

/** Any protocol message. */
export type Message = { [T in MessageType]: MessageOf<T> }[MessageType];

export type { FastCheck } from "./fast_check.ts";

const schemas = new Map<string, z.ZodType>(Object.entries(RUNTIME_SCHEMAS));
const fastChecks = new Map<string, FastCheck>(Object.entries(RUNTIME_FAST_CHECKS));

/**
 * Adds a family of message types (at module load of the layer that owns them), with optional fast
 * checks for its hot types. Registering the same schema again is a no-op; a type name taken by
 * another schema, or a fast check for a type outside the family, is an error naming the type.
 */
export function registerMessages<F extends Partial<MessageSchemas>>(
  family: F,
  checks: { readonly [T in keyof F]?: FastCheck } = {},
): void {
  const entries = Object.entries(family) as [string, z.ZodType][];
  for (const [type, schema] of entries) {
    const known = schemas.get(type);
    if (known !== undefined && known !== schema) {
      throw new Error(`message type ${JSON.stringify(type)} is already registered with another schema`);
    }
  }
  for (const type of Object.keys(checks)) {
    if (!Object.hasOwn(family, type)) {
      throw new RangeError(`fast check for ${JSON.stringify(type)}, which is not in the family registered with it`);
    }
  }
  for (const [type, schema] of entries) schemas.set(type, schema);
  for (const [type, check] of Object.entries(checks) as [string, FastCheck | undefined][]) {
    if (check) fastChecks.set(type, check);
  }
}

/** True when `type` names a registered message type. */
export function isMessageType(type: unknown): type is MessageType {
  return typeof type === "string" && schemas.has(type);
}

/** The schema of a registered message type. */
export function messageSchema(type: MessageType): z.ZodType {
  const schema = schemas.get(type);
  if (schema === undefined) throw new RangeError(`message type ${JSON.stringify(type)} is not registered`);
  return schema;
}

/** The fast check of a message type, if its family registered one. */
export function fastCheckOf(type: MessageType): FastCheck | undefined {
  return fastChecks.get(type);
}
