/**
 * Generated shared prefix, with the parameters of SGLang's `generated-shared-prefix` dataset:
 * `groups` system prompts of `systemPromptTokens` random tokens, each followed by
 * `promptsPerGroup` different questions of `questionTokens` tokens, `outputTokens` to generate.
 * SGLang's defaults are 64 groups x 16 prompts, 2048-token system prompts, 128-token questions
 * and 256 output tokens; like SGLang, the requests are shuffled (seeded here).
 * @module
 */
import { SeededRandom } from "./prng.ts";
import { positiveInt, requestId, type Workload, type WorkloadOptions, type WorkloadRequest } from "./types.ts";

/** SGLang generated-shared-prefix parameters. */
export interface SharedPrefixOptions extends WorkloadOptions {
  groups?: number;
  promptsPerGroup?: number;
  systemPromptTokens?: number;
  questionTokens?: number;
  outputTokens?: number;
  shuffle?: boolean;
}

/** Builds the shared-prefix workload. */
export function sharedPrefixWorkload(options: SharedPrefixOptions = {}): Workload {
  const seed = options.seed ?? 0;
  const groups = positiveInt("groups", options.groups ?? 64);
  const promptsPerGroup = positiveInt("promptsPerGroup", options.promptsPerGroup ?? 16);
  const systemPromptTokens = positiveInt("systemPromptTokens", options.systemPromptTokens ?? 2048);
  const questionTokens = positiveInt("questionTokens", options.questionTokens ?? 128);
  const outputTokens = positiveInt("outputTokens", options.outputTokens ?? 256);
  const shuffle = options.shuffle ?? true;
  const maxTokenId = options.maxTokenId ?? 10000;
  const rng = new SeededRandom(seed);
  const prompts: { ids: number[]; group: number }[] = [];
  for (let g = 0; g < groups; g++) {
    const system = rng.tokens(systemPromptTokens, 0, maxTokenId);
    for (let q = 0; q < promptsPerGroup; q++) {
      prompts.push({ ids: [...system, ...rng.tokens(questionTokens, 0, maxTokenId)], group: g });
    }
  }
  if (shuffle) rng.shuffle(prompts);
  const requests: WorkloadRequest[] = prompts.map((p, i) => ({
    id: requestId("shared-prefix", i),
    promptTokenIds: p.ids,
    maxTokens: outputTokens,
    ignoreEos: true,
  }));
  return {
    name: "shared-prefix",
    description:
      `SGLang generated-shared-prefix: ${groups} groups x ${promptsPerGroup} prompts, system ${systemPromptTokens}, question ${questionTokens}, output ${outputTokens}`,
    seed,
    params: { groups, promptsPerGroup, systemPromptTokens, questionTokens, outputTokens, shuffle, maxTokenId },
    settings: { blockSize: options.blockSize ?? 256 },
    requests,
  };
}
