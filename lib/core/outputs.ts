/**
 * What a request returns: the final output, streamed deltas, and per-request metrics.
 * @module
 */

/** Why a request stopped. */
export type FinishReason = "stop" | "length" | "abort" | "error";

/** Timing and cache facts of one request (times in ms since the epoch, performance-clock based). */
export interface RequestMetrics {
  arrivalTime: number;
  /** When a step first scheduled it (its queue time ends there; vLLM's scheduled timestamp). */
  firstScheduledTime?: number;
  firstTokenTime?: number;
  finishTime?: number;
  /** Prompt tokens served from the prefix cache. */
  numCachedTokens: number;
  /** Worker rank that ran it (0 for a single-GPU LLM). */
  rank: number;
}

/** One alternative at an output position: token id and its logprob. */
export type TopLogprob = [tokenId: number, logprob: number];

/** The final result of one request. */
export interface RequestOutput {
  requestId: string;
  promptTokenIds: number[];
  tokenIds: number[];
  text: string;
  finishReason: FinishReason;
  /** Chosen-token logprobs, when requested. */
  logprobs?: number[];
  /** The most likely alternatives per output token (most likely first), when top logprobs were requested. */
  topLogprobs?: TopLogprob[][];
  metrics: RequestMetrics;
}

/** One streamed increment of a request. */
export interface StreamDelta {
  requestId: string;
  /** New token ids since the previous delta. */
  tokenIds: number[];
  /** New text since the previous delta (held back while it may still form a stop string). */
  text: string;
  logprobs?: number[];
  /** Alternatives per new token, when top logprobs were requested. */
  topLogprobs?: TopLogprob[][];
  finished: boolean;
  finishReason?: FinishReason;
  /** Present on the last delta. */
  output?: RequestOutput;
  /** Set when finishReason is "error": the typed error's name and a message naming the value at fault. */
  error?: { name: string; message: string };
}

/** A prompt as text or as token ids. */
export type PromptInput = string | { prompt: string } | { promptTokenIds: number[] };

/** Per-request options besides sampling. */
export interface RequestOptions {
  requestId?: string;
  /** Session id for session-affinity routing. */
  sessionId?: string;
  /** Isolates this request's prefix-cache blocks from other tenants'. */
  cacheSalt?: string;
  signal?: AbortSignal;
}
