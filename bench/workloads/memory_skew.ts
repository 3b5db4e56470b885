/**
 * Memory-skew workload, three phases with barriers between them:
 * 1. warm-up: 6 requests, one per session, each building a long session prefix (18,532 tokens);
 * 2. pressure: 30 requests, each an anchor (the first KV block of a session prefix, so cache-aware
 *    routing sends it to that session's owner) followed by a cold, never-reused tail (~4.7k tokens
 *    on average: one-shot KV that competes with the session prefixes for the owner's blocks);
 * 3. reuse: 36 requests, 6 per session, continuing each session prefix with a new question.
 * Sessions take 6 x 73 blocks and the pressure phase ~30 x 19 more, far beyond 2 x 384 blocks, so
 * a GPU must reclaim or move session blocks. Sizes are chosen so the trace profile matches the
 * reference: 66 of 72 requests share (91.67%) and 72.29% of prompt tokens.
 * @module
 */
import { SeededRandom } from "./prng.ts";
import { positiveInt, requestId, type RoutingWorkloadOptions, type Workload, type WorkloadRequest } from "./types.ts";

/** Parameters of the memory-skew workload. */
export interface MemorySkewOptions extends RoutingWorkloadOptions {
  sessions?: number;
  pressureRequests?: number;
  reuseRequests?: number;
  sessionPrefixTokens?: number;
  /** Anchor length in tokens (a whole number of blocks shared with a session prefix). */
  anchorTokens?: number;
  coldTokens?: [number, number];
  questionTokens?: [number, number];
}

/** Builds the memory-skew workload. */
export function memorySkewWorkload(options: MemorySkewOptions = {}): Workload {
  const seed = options.seed ?? 0;
  const sessions = positiveInt("sessions", options.sessions ?? 6);
  const pressureRequests = positiveInt("pressureRequests", options.pressureRequests ?? 30);
  const reuseRequests = positiveInt("reuseRequests", options.reuseRequests ?? 36);
  const sessionPrefixTokens = positiveInt("sessionPrefixTokens", options.sessionPrefixTokens ?? 18532);
  const anchorTokens = positiveInt("anchorTokens", options.anchorTokens ?? 256);
  if (anchorTokens >= sessionPrefixTokens) {
    throw new RangeError(
      `anchorTokens (${anchorTokens}) must be shorter than sessionPrefixTokens (${sessionPrefixTokens})`,
    );
  }
  const [coldMin, coldMax] = options.coldTokens ?? [4200, 5240];
  const [questionMin, questionMax] = options.questionTokens ?? [4, 16];
  const outputTokens = positiveInt("outputTokens", options.outputTokens ?? 8);
  const maxTokenId = options.maxTokenId ?? 10000;
  const rng = new SeededRandom(seed);
  const prefixes = Array.from({ length: sessions }, () => rng.tokens(sessionPrefixTokens, 0, maxTokenId));
  const question = () => rng.tokens(rng.int(questionMin, questionMax), 0, maxTokenId);
  const requests: WorkloadRequest[] = [];
  const push = (promptTokenIds: number[], phase: string, sessionId?: string) =>
    requests.push({
      id: requestId("memory-skew", requests.length),
      promptTokenIds,
      maxTokens: outputTokens,
      ignoreEos: true,
      phase,
      ...(sessionId ? { sessionId } : {}),
    });

  for (let s = 0; s < sessions; s++) push([...(prefixes[s] as number[]), ...question()], "warmup", `session-${s}`);
  for (let i = 0; i < pressureRequests; i++) {
    const anchor = (prefixes[i % sessions] as number[]).slice(0, anchorTokens);
    push([...anchor, ...rng.tokens(rng.int(coldMin, coldMax), 0, maxTokenId)], "pressure");
  }
  // Interleave sessions so no single owner serves the whole reuse phase back to back.
  const order = rng.shuffle(Array.from({ length: reuseRequests }, (_, i) => i % sessions));
  for (const s of order) push([...(prefixes[s] as number[]), ...question()], "reuse", `session-${s}`);
  return {
    name: "memory-skew",
    description:
      `${sessions} session warm-ups, ${pressureRequests} anchor/cold pressure requests, ${reuseRequests} session reuses`,
    seed,
    params: {
      sessions,
      pressureRequests,
      reuseRequests,
      sessionPrefixTokens,
      anchorTokens,
      coldTokens: [coldMin, coldMax],
      questionTokens: [questionMin, questionMax],
      outputTokens,
      maxTokenId,
    },
    settings: {
      maxInFlight: options.maxInFlight ?? 16,
      kvBlocksPerGpu: options.kvBlocksPerGpu ?? 384,
      blockSize: options.blockSize ?? 256,
      phaseBarrier: true,
    },
    requests,
    reference: { requestShare: 0.9167, tokenShare: 0.7229 },
  };
}
