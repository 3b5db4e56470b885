/**
 * Locality workload (the reference's routing sweep): 192 requests over 16 recurring prefix groups,
 * 12 per group, in a seeded shuffled order so group ids never line up with round-robin ranks.
 * A group's prefix is a group-specific header (24..39 tokens, inside the first KV block so
 * groups never share a block) followed by one shared instruction block of 1,872 tokens repeated
 * `scale` times; every request then adds its own short question. The longest prefixes are thus
 * 1,911 / 5,655 / 9,399 tokens at 1x / 3x / 5x, as in the reference. 8 output tokens, at most 16
 * requests in flight, 384 KV blocks of 256 tokens per GPU.
 * @module
 */
import { SeededRandom } from "./prng.ts";
import { positiveInt, requestId, type RoutingWorkloadOptions, type Workload, type WorkloadRequest } from "./types.ts";

/** Parameters of the locality workload (defaults are the reference's). */
export interface LocalityOptions extends RoutingWorkloadOptions {
  /** Prefix length multiplier: 1, 3 or 5 in the reference sweep. */
  scale?: number;
  numRequests?: number;
  groups?: number;
  /** Tokens of the repeated instruction block. */
  unitTokens?: number;
  /** Smallest and largest group header; headers spread evenly across groups. */
  headerTokens?: [number, number];
  /** Smallest and largest per-request question. */
  questionTokens?: [number, number];
}

/** Builds the locality workload. */
export function localityWorkload(options: LocalityOptions = {}): Workload {
  const scale = positiveInt("scale", options.scale ?? 1);
  const seed = options.seed ?? 0;
  const numRequests = positiveInt("numRequests", options.numRequests ?? 192);
  const groups = positiveInt("groups", options.groups ?? 16);
  if (groups > numRequests) throw new RangeError(`groups (${groups}) must not exceed numRequests (${numRequests})`);
  const unitTokens = positiveInt("unitTokens", options.unitTokens ?? 1872);
  const [headerMin, headerMax] = options.headerTokens ?? [24, 39];
  const [questionMin, questionMax] = options.questionTokens ?? [4, 16];
  const maxTokenId = options.maxTokenId ?? 10000;
  const outputTokens = positiveInt("outputTokens", options.outputTokens ?? 8);
  const rng = new SeededRandom(seed);

  const unit = rng.tokens(unitTokens, 0, maxTokenId);
  const body: number[] = [];
  for (let r = 0; r < scale; r++) body.push(...unit);
  const prefixes: number[][] = [];
  for (let g = 0; g < groups; g++) {
    const headerLen = groups === 1 ? headerMax : headerMin + Math.round((g * (headerMax - headerMin)) / (groups - 1));
    prefixes.push([...rng.tokens(headerLen, 0, maxTokenId), ...body]);
  }
  // Balanced groups, shuffled: request i belongs to group order[i].
  const order = rng.shuffle(Array.from({ length: numRequests }, (_, i) => i % groups));
  const requests: WorkloadRequest[] = order.map((g, i) => ({
    id: requestId("locality", i),
    promptTokenIds: [...(prefixes[g] as number[]), ...rng.tokens(rng.int(questionMin, questionMax), 0, maxTokenId)],
    maxTokens: outputTokens,
    ignoreEos: true,
  }));
  return {
    name: `locality-${scale}x`,
    description: `${numRequests} requests, ${groups} recurring prefix groups, prefixes up to ${
      headerMax + scale * unitTokens
    } tokens (${scale}x)`,
    seed,
    params: {
      scale,
      numRequests,
      groups,
      unitTokens,
      headerTokens: [headerMin, headerMax],
      questionTokens: [questionMin, questionMax],
      outputTokens,
      maxTokenId,
    },
    settings: {
      maxInFlight: options.maxInFlight ?? 16,
      kvBlocksPerGpu: options.kvBlocksPerGpu ?? 384,
      blockSize: options.blockSize ?? 256,
    },
    requests,
    reference: { requestShare: 0.9167, tokenShare: [0.862, 0.9138] },
  };
}
