/**
 * Messages of the serving path and process lifecycle: hello/loaded/ready, route query/result, dispatch,
 * token deltas, finish, abort, heartbeat, shutdown, stats and typed errors.
 * @module
 */
import { z } from "zod";
import { GRAMMAR_KINDS, type GrammarKind, MAX_GRAMMAR_TEXT } from "../core/grammar_spec.ts";
import type { SamplingParams } from "../core/sampling_params.ts";
import { BlockSnapshotSchema } from "./block_messages.ts";
import { AnyNumber, Count, CountList, envelope } from "./envelope.ts";

const Rank = Count;

/** Which process speaks. */
const ProcessRole = z.enum(["launcher", "control", "worker"]);

/** First message on a new connection: who the sender is. */
export const HelloMessage = z.object({
  type: z.literal("hello"),
  ...envelope,
  role: ProcessRole,
  rank: Rank.optional(),
  epoch: Count,
  pid: Count,
});

/**
 * A worker's model and KV cache are in device memory; it opens its KV data path next, which may
 * wait for peers, so the launcher starts the next rank of the same device now rather than at ready.
 */
export const LoadedMessage = z.object({
  type: z.literal("loaded"),
  ...envelope,
  rank: Rank,
  epoch: Count,
});

/** A worker finished loading and accepts work (or the control plane is up). */
export const ReadyMessage = z.object({
  type: z.literal("ready"),
  ...envelope,
  role: ProcessRole,
  rank: Rank.optional(),
  epoch: Count,
  pid: Count,
  /** Worker facts the launcher needs (KV blocks, block size, backend, context length). */
  numBlocks: Count.optional(),
  blockSize: z.number().int().positive().optional(),
  backend: z.enum(["cpu", "cuda"]).optional(),
  maxModelLen: Count.optional(),
});

/** Launcher -> control plane: where should this request run? */
export const RouteQueryMessage = z.object({
  type: z.literal("route_query"),
  ...envelope,
  requestId: z.string().min(1),
  /** Chained hashes of the prompt's complete blocks (lib/core/block_hash.ts). */
  blockHashes: z.array(z.string()),
  promptTokens: Count,
  maxTokens: Count,
  ingressRank: Rank.optional(),
  sessionId: z.string().optional(),
});

/** Control plane -> launcher: the chosen rank (reply to route_query). */
export const RouteResultMessage = z.object({
  type: z.literal("route_result"),
  ...envelope,
  requestId: z.string(),
  rank: Rank,
  /** Why this rank (policy-specific, e.g. "prefix", "cost", "spill", "balance"). */
  reason: z.string(),
  matchedBlocks: Count,
  /** False when no candidate had room net of reservations (the worker will queue it). */
  feasible: z.boolean(),
});

/** Launcher -> control plane: a routed request ended or was never dispatched; drop its reservation. */
export const RouteReleaseMessage = z.object({ type: z.literal("route_release"), ...envelope, requestId: z.string() });

/** Launcher -> control plane: a worker died; its blocks leave the page table. */
export const RankDownMessage = z.object({
  type: z.literal("rank_down"),
  ...envelope,
  rank: Rank,
  epoch: Count,
  reason: z.string(),
});

/** Schema of sampling parameters as lib/core/sampling_params.ts defines them. */
const SamplingParamsSchema: z.ZodType<SamplingParams> = z.object({
  maxTokens: z.number().int().positive(),
  temperature: z.number().nonnegative(),
  topP: z.number(),
  topK: z.number().int(),
  seed: z.number().int().optional(),
  stop: z.array(z.string()),
  stopTokenIds: CountList,
  ignoreEos: z.boolean(),
  minTokens: Count,
  logprobs: z.boolean(),
  topLogprobs: Count,
  promptLogprobs: Count.optional(),
  skipSpecialTokens: z.boolean(),
  minP: z.number(),
  presencePenalty: z.number(),
  frequencyPenalty: z.number(),
  repetitionPenalty: z.number(),
  logitBias: z.array(z.tuple([z.number(), z.number()])),
  allowedTokenIds: CountList.optional(),
  badWordsTokenIds: z.array(CountList),
  structuredOutput: z.object({
    kind: z.enum(GRAMMAR_KINDS as [GrammarKind, ...GrammarKind[]]),
    text: z.string().max(MAX_GRAMMAR_TEXT),
    disableAnyWhitespace: z.boolean().optional(),
  }).optional(),
});

/** Launcher -> worker: the full sequence to run. */
export const DispatchMessage = z.object({
  type: z.literal("dispatch"),
  ...envelope,
  requestId: z.string().min(1),
  promptTokenIds: CountList,
  sampling: SamplingParamsSchema,
  cacheSalt: z.string().optional(),
  arrivalTime: z.number(),
});

/** Top alternatives per token: [token id, logprob] pairs, most likely first. */
const TopLogprobsSchema = z.array(z.array(z.tuple([Count, AnyNumber])));

/** Prompt logprobs (lib/core/outputs.ts's PromptLogprob per prompt token, null for the first). */
const PromptLogprobsSchema = z.array(
  z.object({ logprob: AnyNumber, rank: Count, top: z.array(z.tuple([Count, AnyNumber])) }).nullable(),
);

/** New tokens (and detokenized text) of one request since its previous delta. */
export const TokenDeltaItem = z.object({
  requestId: z.string(),
  tokenIds: CountList,
  text: z.string(),
  logprobs: z.array(AnyNumber).optional(),
  topLogprobs: TopLogprobsSchema.optional(),
  promptLogprobs: PromptLogprobsSchema.optional(),
});

/** Worker -> launcher: the token deltas of one engine step (one message for the whole batch). */
export const TokenDeltaMessage = z.object({
  type: z.literal("token_delta"),
  ...envelope,
  items: z.array(TokenDeltaItem),
});

/** A finished request's full result, as lib/core/outputs.ts's RequestOutput less the prompt. */
const FinishedOutputSchema = z.object({
  tokenIds: CountList,
  text: z.string(),
  logprobs: z.array(AnyNumber).optional(),
  topLogprobs: TopLogprobsSchema.optional(),
  promptLogprobs: PromptLogprobsSchema.optional(),
  metrics: z.object({
    arrivalTime: z.number(),
    firstScheduledTime: z.number().optional(),
    firstTokenTime: z.number().optional(),
    finishTime: z.number().optional(),
    numCachedTokens: Count,
    rank: Count,
  }),
});

const FinishReason = z.enum(["stop", "length", "abort", "error"]);

/** Worker -> launcher: a request ended; carries its last delta and its full output. */
export const FinishMessage = z.object({
  type: z.literal("finish"),
  ...envelope,
  requestId: z.string(),
  reason: FinishReason,
  /** The last delta's tokens and text (the text withheld for stop strings is released here). */
  tokenIds: CountList,
  text: z.string(),
  logprobs: z.array(AnyNumber).optional(),
  topLogprobs: TopLogprobsSchema.optional(),
  promptLogprobs: PromptLogprobsSchema.optional(),
  output: FinishedOutputSchema.optional(),
  /** Set when reason is "error" (or the request was rejected): the typed error's name and message. */
  error: z.object({ name: z.string(), message: z.string() }).optional(),
});

/** Launcher -> worker: stop a request and free its blocks. */
export const AbortMessage = z.object({
  type: z.literal("abort"),
  ...envelope,
  requestId: z.string(),
  reason: z.string().optional(),
});

/**
 * Liveness, both ways. `busyMs`: the sender is about to block its event loop for about that long
 * (a step on its own thread); the receiver allows that much more silence (protocol/heartbeat_monitor.ts).
 */
export const HeartbeatMessage = z.object({
  type: z.literal("heartbeat"),
  ...envelope,
  seq: Count,
  sentAt: z.number(),
  busyMs: z.number().nonnegative().optional(),
});

/** Orderly stop of the receiving process. */
export const ShutdownMessage = z.object({ type: z.literal("shutdown"), ...envelope, reason: z.string().optional() });

/** Launcher -> control plane: dump the page table (reply: page_table), for consistency checks. */
export const PageTableRequestMessage = z.object({ type: z.literal("page_table_request"), ...envelope });

/** Control plane -> launcher: every rank's slice, as snapshots. */
export const PageTableMessage = z.object({
  type: z.literal("page_table"),
  ...envelope,
  snapshots: z.array(BlockSnapshotSchema),
});

/** Ask for stats (reply: stats). */
export const StatsRequestMessage = z.object({ type: z.literal("stats_request"), ...envelope });

/** Stats of a worker rank or of the control plane's routing. */
export const StatsMessage = z.object({
  type: z.literal("stats"),
  ...envelope,
  rank: Rank.optional(),
  counters: z.record(z.string(), z.number()),
});

/** A typed error, as a reply (replyTo set) or unsolicited (e.g. a rejected frame). */
export const ErrorMessage = z.object({
  type: z.literal("error"),
  ...envelope,
  /** e.g. schema, unknown_type, undecodable, bad_length, stale_snapshot, capacity, internal. */
  code: z.string(),
  message: z.string(),
  messageType: z.string().optional(),
  field: z.string().optional(),
});
