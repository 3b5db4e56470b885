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

/**
 * A prompt token's logprob as vLLM's prompt_logprobs reports it: its log-softmax under the raw
 * logits of the position before it, its rank (1 + the tokens more likely than it, ties counted as
 * ahead: vLLM's `(logprobs >= token's).sum()`) and the most likely alternatives there.
 */
export interface PromptLogprob {
  logprob: number;
  rank: number;
  /** The requested number of most likely tokens (most likely first). */
  top: TopLogprob[];
}

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
  /** With prompt logprobs: one entry per prompt token, null for the first (nothing precedes it). */
  promptLogprobs?: (PromptLogprob | null)[];
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
  /** With prompt logprobs, on the first delta that carries a token: as {@link RequestOutput.promptLogprobs}. */
  promptLogprobs?: (PromptLogprob | null)[];
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
