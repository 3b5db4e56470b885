/**
 * Random lengths: the offline throughput workload compact engines report (nano-vllm style):
 * 256 requests of random token ids in 0..10000, prompt lengths uniform in 100..1024, max_tokens
 * uniform in 100..1024, ignore_eos, temperature 0.6. Drawn with a CPython-compatible Mersenne
 * Twister in Python's order (all prompts, then all output lengths), so seed 0 reproduces
 * bench/workloads/data/random-256.jsonl exactly; readRandom256() reads that file itself.
 * @module
 */
import { workloadDataPath } from "./data_files.ts";
import { readJsonlWorkload } from "./jsonl.ts";
import { PythonRandom } from "./python_random.ts";
import { positiveInt, requestId, type Workload, type WorkloadRequest } from "./types.ts";

/** Parameters of the random-lengths workload. */
export interface RandomLengthsOptions {
  seed?: number;
  numRequests?: number;
  inputTokens?: [number, number];
  outputTokens?: [number, number];
  maxTokenId?: number;
  temperature?: number;
}

/** Builds the random-lengths workload. */
export function randomLengthsWorkload(options: RandomLengthsOptions = {}): Workload {
  const seed = options.seed ?? 0;
  const numRequests = positiveInt("numRequests", options.numRequests ?? 256);
  const [inMin, inMax] = options.inputTokens ?? [100, 1024];
  const [outMin, outMax] = options.outputTokens ?? [100, 1024];
  const maxTokenId = options.maxTokenId ?? 10000;
  const temperature = options.temperature ?? 0.6;
  const rng = new PythonRandom(seed);
  const prompts: number[][] = [];
  for (let i = 0; i < numRequests; i++) {
    const n = rng.randint(inMin, inMax); // Python evaluates range(randint(...)) before the tokens
    const ids = new Array<number>(n);
    for (let j = 0; j < n; j++) ids[j] = rng.randint(0, maxTokenId);
    prompts.push(ids);
  }
  const requests: WorkloadRequest[] = prompts.map((ids, i) => ({
    id: requestId("random", i),
    promptTokenIds: ids,
    maxTokens: rng.randint(outMin, outMax),
    ignoreEos: true,
    temperature,
  }));
  return {
    name: "random",
    description:
      `${numRequests} random-token prompts, lengths ${inMin}..${inMax}, outputs ${outMin}..${outMax}, ignore_eos`,
    seed,
    params: {
      numRequests,
      inputTokens: [inMin, inMax],
      outputTokens: [outMin, outMax],
      maxTokenId,
      temperature,
      prng: "cpython-mt19937",
    },
    settings: {},
    requests,
  };
}

/** Reads the published random-256.jsonl (numbers on it compare with other engines' figures). */
export function readRandom256(): Workload {
  const w = readJsonlWorkload(workloadDataPath("random-256.jsonl"), { name: "random-256" });
  return { ...w, description: "the published random-256.jsonl (256 requests, 142,827 prompt / 133,966 output tokens)" };
}
