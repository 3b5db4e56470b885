/**
 * Load-skew workload: 3 warm-up requests create one long prefix per hot group, then 189 requests
 * revisit those 3 groups (63 each, seeded order). Whoever holds a hot prefix attracts its
 * traffic, so cache-aware routing piles load on the owners unless it spills or copies blocks.
 * The hot prefix length (9,330 tokens: 36 complete blocks and a partial one) is chosen so the
 * trace profile matches the reference's 98.44% request / 97.15% token share. A phase barrier
 * separates warm-up from revisits; 8 output tokens, 16 in flight, 384 blocks of 256 per GPU.
 * @module
 */
import { SeededRandom } from "./prng.ts";
import { positiveInt, requestId, type RoutingWorkloadOptions, type Workload, type WorkloadRequest } from "./types.ts";

/** Parameters of the load-skew workload (defaults are the reference's counts). */
export interface LoadSkewOptions extends RoutingWorkloadOptions {
  hotGroups?: number;
  /** Requests after warm-up, spread evenly over the hot groups. */
  revisits?: number;
  prefixTokens?: number;
  questionTokens?: [number, number];
}

/** Builds the load-skew workload. */
export function loadSkewWorkload(options: LoadSkewOptions = {}): Workload {
  const seed = options.seed ?? 0;
  const hotGroups = positiveInt("hotGroups", options.hotGroups ?? 3);
  const revisits = positiveInt("revisits", options.revisits ?? 189);
  const prefixTokens = positiveInt("prefixTokens", options.prefixTokens ?? 9330);
  const [questionMin, questionMax] = options.questionTokens ?? [4, 16];
  const outputTokens = positiveInt("outputTokens", options.outputTokens ?? 8);
  const maxTokenId = options.maxTokenId ?? 10000;
  const rng = new SeededRandom(seed);
  const prefixes = Array.from({ length: hotGroups }, () => rng.tokens(prefixTokens, 0, maxTokenId));
  const question = () => rng.tokens(rng.int(questionMin, questionMax), 0, maxTokenId);

  const requests: WorkloadRequest[] = [];
  for (let g = 0; g < hotGroups; g++) {
    requests.push({
      id: requestId("load-skew", requests.length),
      promptTokenIds: [...(prefixes[g] as number[]), ...question()],
      maxTokens: outputTokens,
      ignoreEos: true,
      phase: "warmup",
    });
  }
  const order = rng.shuffle(Array.from({ length: revisits }, (_, i) => i % hotGroups));
  for (const g of order) {
    requests.push({
      id: requestId("load-skew", requests.length),
      promptTokenIds: [...(prefixes[g] as number[]), ...question()],
      maxTokens: outputTokens,
      ignoreEos: true,
      phase: "revisit",
    });
  }
  return {
    name: "load-skew",
    description:
      `${hotGroups} warm-ups create one ${prefixTokens}-token prefix per hot group; ${revisits} requests revisit them`,
    seed,
    params: { hotGroups, revisits, prefixTokens, questionTokens: [questionMin, questionMax], outputTokens, maxTokenId },
    settings: {
      maxInFlight: options.maxInFlight ?? 16,
      kvBlocksPerGpu: options.kvBlocksPerGpu ?? 384,
      blockSize: options.blockSize ?? 256,
      phaseBarrier: true,
    },
    requests,
    reference: { requestShare: 0.9844, tokenShare: 0.9715 },
  };
}
