/**
 * Trace profile: how much prefix reuse a workload offers at best, before any system runs it.
 * Replaying the requests in order against an unlimited cache with perfect placement:
 * - request share = fraction of requests whose first complete KV block (at least) was seen in
 *   an earlier request;
 * - token share = fraction of all prompt tokens covered by each request's longest prefix of
 *   complete blocks that were all seen earlier (partial tail blocks never count).
 * It describes the trace, not a policy; compare runtime hit rate and token reuse against it.
 * @module
 */
import { prefixBlockHashes } from "../lib/core/block_hash.ts";
import type { WorkloadRequest } from "./workloads/types.ts";

/** The profile of one ordered trace. */
export interface TraceProfile {
  blockSize: number;
  requests: number;
  promptTokens: number;
  completeBlocks: number;
  uniqueBlocks: number;
  shareableRequests: number;
  shareableBlocks: number;
  shareableTokens: number;
  requestShare: number;
  tokenShare: number;
}

/** Profiles prompts given as token ids, in replay order. */
export function profilePrompts(prompts: readonly (readonly number[])[], blockSize: number): TraceProfile {
  const seen = new Set<string>();
  let promptTokens = 0;
  let completeBlocks = 0;
  let shareableRequests = 0;
  let shareableBlocks = 0;
  for (const ids of prompts) {
    const hashes = prefixBlockHashes(ids, blockSize);
    let matched = 0;
    while (matched < hashes.length && seen.has(hashes[matched] as string)) matched++;
    if (matched > 0) shareableRequests++;
    shareableBlocks += matched;
    promptTokens += ids.length;
    completeBlocks += hashes.length;
    for (const h of hashes) seen.add(h);
  }
  const shareableTokens = shareableBlocks * blockSize;
  return {
    blockSize,
    requests: prompts.length,
    promptTokens,
    completeBlocks,
    uniqueBlocks: seen.size,
    shareableRequests,
    shareableBlocks,
    shareableTokens,
    requestShare: prompts.length ? shareableRequests / prompts.length : 0,
    tokenShare: promptTokens ? shareableTokens / promptTokens : 0,
  };
}

/** Profiles workload requests; text prompts need `encode` (the served model's tokenizer). */
export function profileTrace(
  requests: readonly WorkloadRequest[],
  blockSize: number,
  encode?: (text: string) => number[],
): TraceProfile {
  const prompts = requests.map((r) => {
    if (r.promptTokenIds) return r.promptTokenIds;
    if (r.prompt === undefined) throw new TypeError(`request ${r.id} has neither promptTokenIds nor prompt`);
    if (!encode) throw new TypeError(`request ${r.id} has a text prompt; profiling it needs a tokenizer`);
    return encode(r.prompt);
  });
  return profilePrompts(prompts, blockSize);
}
