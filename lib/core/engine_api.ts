/**
 * The surface that both the single-GPU LLM and the multi-GPU LLMEngine offer, and that the HTTP
 * server and the benchmarks program against.
 * @module
 */
import type { PromptInput, RequestOptions, RequestOutput, StreamDelta } from "./outputs.ts";
import type { SamplingParams } from "./sampling_params.ts";

/** Text <-> token ids and the chat template of the served model. */
export interface TextTokenizer {
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** Token ids that end generation unless ignoreEos. */
  readonly eosTokenIds: readonly number[];
  /** Renders chat messages with the model's template. */
  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatRenderOptions): string;
}

/** How chat messages are rendered (the template variables a chat request may set). */
export interface ChatRenderOptions {
  /** Append the assistant turn's opening. */
  addGenerationPrompt?: boolean;
  /** Leave the last message open for the model to continue (not with addGenerationPrompt). */
  continueFinalMessage?: boolean;
  /** OpenAI tool definitions, rendered by tool-aware templates. */
  tools?: readonly unknown[];
  /** Further template variables (a request's chat_template_kwargs, e.g. enable_thinking). */
  variables?: Record<string, unknown>;
}

/** A tool call of an assistant message, as OpenAI sends it (arguments parsed to an object). */
export interface ChatToolCall {
  id?: string;
  type: "function";
  function: { name: string; arguments: unknown };
}

/** One chat message. */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** An assistant message's tool calls. */
  tool_calls?: ChatToolCall[];
  /** A tool message's call id. */
  tool_call_id?: string;
}

/** Load and cache facts of one worker rank. */
export interface RankStats {
  rank: number;
  numRunning: number;
  numWaiting: number;
  numBlocks: number;
  blockSize: number;
  numFreeBlocks: number;
  numReclaimableBlocks: number;
  /** Fraction of blocks held by live requests, 0..1. */
  kvUsage: number;
  /** Cumulative prompt tokens looked up in the prefix cache, and those found. */
  prefixQueryTokens: number;
  prefixHitTokens: number;
  /** Cumulative finished requests and generated tokens. */
  numFinished: number;
  numGeneratedTokens: number;
  /** Cumulative preemptions (a sequence's K/V dropped to be recomputed), vLLM's num_preemptions. */
  numPreemptions?: number;
  /**
   * Blocks found still referenced, pinned or reserved when the rank last held no request and no
   * transfer (a leak: should be 0); only an idle rank can be judged.
   */
  leakedBlocks?: number;
}

/** Whether one configured rank serves now, and how often its worker was restarted. */
export interface RankHealth {
  rank: number;
  up: boolean;
  restarts: number;
}

/** Engine-wide stats: one entry per rank plus routing and transfer counters. */
export interface EngineStats {
  ranks: RankStats[];
  routing: Record<string, number>;
  transfers: { count: number; blocks: number; bytes: number };
  /** Every configured rank, serving or not (an in-process engine has one, always up). */
  health: { ranks: RankHealth[] };
}

/** Facts about the served model. */
export interface ServedModelInfo {
  name: string;
  maxModelLen: number;
  vocabSize: number;
  blockSize: number;
  backend: "cpu" | "cuda";
  numRanks: number;
}

/** What generate() takes: one prompt or several, the sampling parameters, the request options. */
export type GenerateArgs = [
  inputs: PromptInput | PromptInput[],
  params?: Partial<SamplingParams>,
  options?: RequestOptions,
];

/** What LLM and LLMEngine both implement. */
export interface GenerationEngine {
  readonly model: ServedModelInfo;
  readonly tokenizer: TextTokenizer;
  /** Streams one request; aborting `options.signal` aborts it and frees its blocks. */
  stream(input: PromptInput, params?: Partial<SamplingParams>, options?: RequestOptions): AsyncIterable<StreamDelta>;
  /** Runs requests to completion; outputs in input order. */
  generate(...args: GenerateArgs): Promise<RequestOutput[]>;
  abort(requestId: string): void;
  stats(): EngineStats;
  /**
   * Stats with every counter read now (LLMEngine polls its control plane's routing and transfer
   * counters only once a second; stats() may lag by that much). Absent: stats() is current.
   */
  currentStats?(): Promise<EngineStats>;
  /** True while the engine accepts requests (false once dead or draining). */
  readonly healthy: boolean;
  shutdown(): Promise<void>;
}
