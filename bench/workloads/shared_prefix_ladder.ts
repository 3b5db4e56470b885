/**
 * llm-d's shared-prefix ladder: `groups` system prompts of `systemTokens` tokens, each shared by
 * `users` users who append their own question of `questionTokens` tokens, sent as Poisson arrivals
 * on a ladder of rising rates until the engine saturates; each request carries its rung as its
 * phase label, so the report gives one row per rung.
 *
 * Source: llm-d's precise-prefix-cache-aware guide (llm-d/llm-d,
 * guides/precise-prefix-cache-aware/benchmark-templates/guide.yaml, and the same profile in
 * llm-d/llm-d-benchmark, workload/profiles/inference-perf/guide_precise-prefix-cache-routing_1.yaml.in):
 * inference-perf's `shared_prefix` data (150 groups x 5 prompts per group, 6,000-token system
 * prompt, 1,200-token question, 1,000 output tokens, ignore_eos) under a `poisson` load of stages
 * 3 -> 60 QPS on 16 GPUs (Qwen3-32B, 8 replicas of TP 2), after a warm-up stage of one request per
 * user that seats the prefixes. How inference-perf (kubernetes-sigs/inference-perf) runs that,
 * and what this generator copies:
 * - The G x U prompts are generated once and shuffled with a seeded permutation
 *   (datagen/synthetic/shared_prefix_datagen.py); every stage walks that shuffled list from its
 *   start, cycling when a stage has more requests than users (loadgen/load_generator.py,
 *   run_stage: a fresh `get_data()` per stage). A stage sends rate x duration requests.
 * - A stage waits until every one of its requests finished before the next one starts
 *   (run_stage's wait on the finished counter, then `interval` seconds of pause): the rungs drain,
 *   so this workload sets a phase barrier between them. The idle pause is left out: an idle engine
 *   keeps its cache as it was, so the pause changes nothing that is measured.
 * - Its Poisson timer draws a count per second and spreads it over that second; the driver's
 *   ladder arrival draws exponential gaps at each rung's rate (bench/driver/arrival.ts), the same
 *   process without the one-second grid.
 *
 * Scaled to Qwen3-0.6B on two ranks of one H200. Lengths: the guide's divided by 4 (1,500 + 300
 * tokens, 250 out), which keeps its shape (a prefix five times the question, outputs near the
 * question's length) and cuts a request's prefill, decode and KV footprint by 4 or more. Groups:
 * 40 x 5 users, five users a prefix as in the guide. Rates: per GPU the guide offers 3/16 -> 60/16
 * req/s of its requests to a 32B model; requests a quarter as long, on a model that needs about a
 * fiftieth of the compute per token, put one H200's saturation in the range of the guide's whole
 * cluster, so the default ladder runs 2 -> 60 req/s in rungs of 8 s (rate x 8 requests, as the
 * guide's stages are rate x duration), after a warm-up pass over every user at a quarter of the
 * top rate (the guide's 15 of 60 QPS). The first GPU run is what confirms the top rungs saturate;
 * `rates` and `secondsPerRung` (or `--arrival 2,4,8`) move the ladder. Open loop as the guide's
 * harness (no in-flight limit unless `maxInFlight`); the KV budget holds every system prompt on
 * each rank, as in the guide's "no system cache pressure" workload.
 * @module
 */
import { SeededRandom } from "./prng.ts";
import { positiveInt, requestId, type Workload, type WorkloadOptions, type WorkloadRequest } from "./types.ts";

/** Options of the shared-prefix ladder. `requestsPerRung` and `secondsPerRung` exclude each other. */
export interface SharedPrefixLadderOptions extends WorkloadOptions {
  /** Distinct system prompts (llm-d: num_groups). */
  groups?: number;
  /** Users per group, each with its own question (llm-d: num_prompts_per_group). */
  users?: number;
  systemTokens?: number;
  questionTokens?: number;
  outputTokens?: number;
  /** Offered request rate of each rung, requests/s, rising. */
  rates?: number[];
  /** Requests in every rung. */
  requestsPerRung?: number;
  /** Rung length in seconds: rung k sends round(rates[k] x secondsPerRung) requests (at least 1). */
  secondsPerRung?: number;
  /** Requests of the warm-up phase before the first rung (0: none; default one per user). */
  warmupRequests?: number;
  /** Offered rate of the warm-up phase (default a quarter of the top rung's rate). */
  warmupRate?: number;
  maxInFlight?: number;
  kvBlocksPerGpu?: number;
}

/** The defaults, scaled to Qwen3-0.6B on two ranks of one H200 (see the module doc). */
export const SHARED_PREFIX_LADDER_DEFAULTS = {
  groups: 40,
  users: 5,
  systemTokens: 1500,
  questionTokens: 300,
  outputTokens: 250,
  rates: [2, 5, 10, 20, 30, 40, 50, 60],
  secondsPerRung: 8,
  blockSize: 256,
  kvBlocksPerGpu: 1600,
  maxTokenId: 10000,
} as const;

/** Phase label of the warm-up that seats every user's prefix before the first rung. */
export const WARMUP_PHASE = "warmup";

/** Phase label of rung `k` (0-based) offered at `rate` requests/s: "rung 1 @ 2 req/s". */
export function rungPhase(k: number, rate: number): string {
  return `rung ${k + 1} @ ${rate} req/s`;
}

/** One phase of the ladder as generated: its label, offered rate and request count. */
export interface LadderPhase {
  phase: string;
  rate: number;
  requests: number;
  /** False for the warm-up, true for a measured rung. */
  rung: boolean;
}

function rateList(value: unknown): number[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new RangeError(`rates must be a non-empty list of request rates, got ${JSON.stringify(value)}`);
  }
  for (const r of value) {
    if (typeof r !== "number" || !Number.isFinite(r) || !(r > 0)) {
      throw new RangeError(`rates must be finite numbers of requests/s > 0, got ${JSON.stringify(value)}`);
    }
  }
  return [...value] as number[];
}

function positiveRate(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value) || !(value > 0)) {
    throw new RangeError(`${name} must be a finite number of requests/s > 0, got ${String(value)}`);
  }
  return value;
}

/** The ladder's phases (warm-up first when it has requests), from validated options. */
function ladderPhases(options: SharedPrefixLadderOptions, users: number): LadderPhase[] {
  const rates = rateList(options.rates ?? SHARED_PREFIX_LADDER_DEFAULTS.rates);
  if (options.requestsPerRung !== undefined && options.secondsPerRung !== undefined) {
    throw new RangeError(
      `requestsPerRung (${options.requestsPerRung}) and secondsPerRung (${options.secondsPerRung}) both size the rungs; give one of them`,
    );
  }
  let perRung: (rate: number) => number;
  if (options.requestsPerRung !== undefined) {
    const n = positiveInt("requestsPerRung", options.requestsPerRung);
    perRung = () => n;
  } else {
    const s = positiveRate("secondsPerRung", options.secondsPerRung ?? SHARED_PREFIX_LADDER_DEFAULTS.secondsPerRung);
    perRung = (rate) => Math.max(1, Math.round(rate * s));
  }
  const warmupRequests = options.warmupRequests ?? users;
  if (!Number.isSafeInteger(warmupRequests) || warmupRequests < 0) {
    throw new RangeError(`warmupRequests must be an integer >= 0, got ${String(warmupRequests)}`);
  }
  const phases: LadderPhase[] = [];
  if (warmupRequests > 0) {
    const rate = positiveRate("warmupRate", options.warmupRate ?? Math.max(...rates) / 4);
    phases.push({ phase: WARMUP_PHASE, rate, requests: warmupRequests, rung: false });
  } else if (options.warmupRate !== undefined) {
    throw new RangeError(`warmupRate (${options.warmupRate}) is set but warmupRequests is 0: there is no warm-up`);
  }
  rates.forEach((rate, k) => phases.push({ phase: rungPhase(k, rate), rate, requests: perRung(rate), rung: true }));
  return phases;
}

/** Every option the ladder reads; any other name is refused rather than ignored. */
const OPTION_NAMES: readonly string[] = [
  "seed",
  "blockSize",
  "maxTokenId",
  "groups",
  "users",
  "systemTokens",
  "questionTokens",
  "outputTokens",
  "rates",
  "requestsPerRung",
  "secondsPerRung",
  "warmupRequests",
  "warmupRate",
  "maxInFlight",
  "kvBlocksPerGpu",
];

/** Builds the shared-prefix ladder; a RangeError names an unknown or invalid option and its value. */
export function sharedPrefixLadderWorkload(options: SharedPrefixLadderOptions = {}): Workload {
  const unknown = Object.keys(options).filter((k) => !OPTION_NAMES.includes(k));
  if (unknown.length > 0) {
    throw new RangeError(`unknown shared-prefix-ladder option ${unknown[0]}; known: ${OPTION_NAMES.join(", ")}`);
  }
  const d = SHARED_PREFIX_LADDER_DEFAULTS;
  const seed = options.seed ?? 0;
  const groups = positiveInt("groups", options.groups ?? d.groups);
  const users = positiveInt("users", options.users ?? d.users);
  const systemTokens = positiveInt("systemTokens", options.systemTokens ?? d.systemTokens);
  const questionTokens = positiveInt("questionTokens", options.questionTokens ?? d.questionTokens);
  const outputTokens = positiveInt("outputTokens", options.outputTokens ?? d.outputTokens);
  const maxTokenId = positiveInt("maxTokenId", options.maxTokenId ?? d.maxTokenId);
  const blockSize = positiveInt("blockSize", options.blockSize ?? d.blockSize);
  const kvBlocksPerGpu = positiveInt("kvBlocksPerGpu", options.kvBlocksPerGpu ?? d.kvBlocksPerGpu);
  const maxInFlight = options.maxInFlight === undefined ? undefined : positiveInt("maxInFlight", options.maxInFlight);
  const phases = ladderPhases(options, groups * users);

  const rng = new SeededRandom(seed);
  const prompts: { ids: number[] }[] = [];
  for (let g = 0; g < groups; g++) {
    const system = rng.tokens(systemTokens, 0, maxTokenId);
    for (let u = 0; u < users; u++) {
      prompts.push({ ids: [...system, ...rng.tokens(questionTokens, 0, maxTokenId)] });
    }
  }
  rng.shuffle(prompts);

  const requests: WorkloadRequest[] = [];
  for (const p of phases) {
    // Every phase walks the shuffled users from the start, as each inference-perf stage does.
    for (let i = 0; i < p.requests; i++) {
      const prompt = prompts[i % prompts.length] as (typeof prompts)[number];
      requests.push({
        id: requestId("shared-prefix-ladder", requests.length),
        promptTokenIds: prompt.ids,
        maxTokens: outputTokens,
        ignoreEos: true,
        phase: p.phase,
      });
    }
  }
  const rungRates = phases.filter((p) => p.rung).map((p) => p.rate);
  const warmup = phases.find((p) => !p.rung);
  return {
    name: "shared-prefix-ladder",
    description:
      `llm-d shared-prefix ladder: ${groups} groups x ${users} users, system ${systemTokens}, question ${questionTokens}, output ${outputTokens}; rungs ${
        rungRates.join(", ")
      } req/s${warmup ? ` after a warm-up of ${warmup.requests} at ${warmup.rate} req/s` : ""}`,
    seed,
    params: {
      groups,
      users,
      systemTokens,
      questionTokens,
      outputTokens,
      rates: rungRates,
      ...(options.requestsPerRung !== undefined
        ? { requestsPerRung: options.requestsPerRung }
        : { secondsPerRung: options.secondsPerRung ?? d.secondsPerRung }),
      warmupRequests: warmup?.requests ?? 0,
      ...(warmup ? { warmupRate: warmup.rate } : {}),
      phases: phases.map((p) => ({ ...p })),
      maxTokenId,
    },
    settings: { blockSize, kvBlocksPerGpu, phaseBarrier: true, ...(maxInFlight ? { maxInFlight } : {}) },
    requests,
  };
}

/** The ladder's phases in request order as recorded in its params (warm-up first when there is one). */
export function ladderPhasesOf(workload: Workload): LadderPhase[] {
  const phases = workload.params.phases;
  if (workload.name !== "shared-prefix-ladder" || !Array.isArray(phases)) {
    throw new TypeError(`workload ${JSON.stringify(workload.name)} is not a shared-prefix ladder`);
  }
  return phases as LadderPhase[];
}
