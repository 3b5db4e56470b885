/**
 * `bun bench serving`: a serving benchmark client for the OpenAI-compatible HTTP server. Sends a
 * workload as streaming /v1/completions requests (token-id or text prompts) at a Poisson request
 * rate or all at once, optionally under a max concurrency, and prints TTFT/TPOT/ITL/E2E and
 * throughput in vLLM's benchmark_serving layout. Plain fetch and SSE parsing, no client package.
 * `--quick` without --base-url starts an in-process server (tiny model, CPU) and sends 8 requests.
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { aggregateRun } from "./driver/aggregate.ts";
import type { ArrivalMode } from "./driver/arrival.ts";
import { type CompletionExtra, sendCompletion } from "./driver/http_completions.ts";
import { EXTRA_KINDS, parseExtraKind, pickExtras, requestExtra } from "./driver/request_extras.ts";
import { runSchedule } from "./driver/schedule.ts";
import type { BenchEntry } from "./entry.ts";
import { collectMetadata } from "./report/metadata.ts";
import { type ExtrasOutcome, formatExtrasReport } from "./report/extras_report.ts";
import {
  formatMaskTimes,
  type MaskTimeSummary,
  maskTimeSummary,
  scrapeMaskHistograms,
} from "./report/mask_time_report.ts";
import { formatServingResult } from "./report/serving_report.ts";
import { toJson } from "./report/write_artifacts.ts";
import { buildWorkload, WORKLOAD_NAMES } from "./workloads/registry.ts";

const HELP = `usage: bun bench serving [options]
  --base-url URL          server to benchmark (default http://127.0.0.1:8000; --quick starts its own)
  --model NAME            model name to send (default: the first of GET /v1/models)
  --workload NAME         ${Object.keys(WORKLOAD_NAMES).join(" | ")} (default random)
  --workload-file PATH    JSONL trace of --workload jsonl (the default workload when a file is given)
  --num-prompts N         send only the first N requests of the workload
  --request-rate R|inf    Poisson arrival rate in requests/s (default inf: all at once)
  --max-concurrency N     at most N requests in flight
  --seed N                workload and arrival seed (default 0)
  --temperature T         temperature of requests that do not set one (default 0)
  --api-key KEY           bearer token
  --extras KIND           ${EXTRA_KINDS.join(" | ")}: a share of the requests also ask for top logprobs (5), a short
                          JSON object of enums and small integers, or an array of 100-120 enum words (max_tokens 800);
                          the report splits TPOT and TTFT by group and checks every structured output; with
                          structured outputs it adds the server's per-step mask time (mean, p99) and the share
                          of it the forward pass hid, from /metrics before and after the run
  --extras-share X        the share of requests with the extra (default 0.25), drawn from --seed
  --out DIR               also write serving.json there
  --quick                 in-process tiny-model server on the CPU backend, 8 short requests (of a generated workload)`;

/** The phase of the requests without the extra, in a run with one. */
const PLAIN_PHASE = "plain";

async function modelName(baseUrl: string, apiKey?: string): Promise<string> {
  const res = await fetch(`${baseUrl.replace(/\/$/, "")}/v1/models`, {
    headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
  });
  if (!res.ok) throw new Error(`GET ${baseUrl}/v1/models answered HTTP ${res.status}`);
  const id = ((await res.json()) as { data?: { id?: string }[] }).data?.[0]?.id;
  if (!id) throw new Error(`GET ${baseUrl}/v1/models listed no model`);
  return id;
}

async function startQuickServer(): Promise<{ url: string; close(): Promise<void> }> {
  const { ensureModel } = (await import("../lib/model/demo_model.ts")) as { ensureModel(p: string): Promise<string> };
  const { LLM } = await import("../lib/engine/llm.ts");
  const { serve } = await import("../lib/server/serve.ts");
  const engine = await LLM.create({ model: await ensureModel("tiny"), backend: "cpu" });
  return serve({ engine, port: 0 });
}

/** Runs the serving benchmark with command-line `argv`; returns the printed result block. */
export async function runServing(argv: string[], log: (line: string) => void = console.log): Promise<string> {
  const { values: a } = parseArgs({
    args: argv,
    options: {
      quick: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      "base-url": { type: "string" },
      model: { type: "string" },
      workload: { type: "string" },
      "workload-file": { type: "string" },
      "num-prompts": { type: "string" },
      "request-rate": { type: "string" },
      "max-concurrency": { type: "string" },
      seed: { type: "string" },
      temperature: { type: "string" },
      "api-key": { type: "string" },
      extras: { type: "string" },
      "extras-share": { type: "string" },
      out: { type: "string" },
    },
    strict: true,
  });
  if (a.help) {
    log(HELP);
    return "";
  }
  const seed = Number(a.seed ?? 0);
  if (!Number.isSafeInteger(seed)) throw new RangeError(`--seed must be an integer, got ${JSON.stringify(a.seed)}`);
  const rate = a["request-rate"] === undefined || a["request-rate"] === "inf" ? Infinity : Number(a["request-rate"]);
  if (!(rate > 0)) {
    throw new RangeError(`--request-rate must be a number > 0 or inf, got ${JSON.stringify(a["request-rate"])}`);
  }
  const maxConcurrency = a["max-concurrency"] === undefined ? undefined : Number(a["max-concurrency"]);
  if (maxConcurrency !== undefined && !(Number.isSafeInteger(maxConcurrency) && maxConcurrency >= 1)) {
    throw new RangeError(`--max-concurrency must be a positive integer, got ${JSON.stringify(a["max-concurrency"])}`);
  }
  const temperature = Number(a.temperature ?? 0);
  if (!(temperature >= 0)) {
    throw new RangeError(`--temperature must be a number >= 0, got ${JSON.stringify(a.temperature)}`);
  }

  const quickOverrides = { numRequests: 8, inputTokens: [16, 48], outputTokens: [4, 8] };
  // A trace file alone means the jsonl workload; with another workload named, the file would go unread.
  const workloadName = a.workload ?? (a["workload-file"] !== undefined ? "jsonl" : "random");
  if (a["workload-file"] !== undefined && workloadName !== "jsonl") {
    throw new RangeError(
      `--workload-file is read by --workload jsonl only, got --workload ${JSON.stringify(workloadName)}`,
    );
  }
  const fromFile = workloadName === "jsonl" || workloadName === "random-256";
  const workload = buildWorkload({
    name: workloadName,
    seed,
    ...(a["workload-file"] !== undefined ? { path: a["workload-file"] } : {}),
    ...(a.quick && !fromFile ? { overrides: quickOverrides } : {}),
  });
  if (a["num-prompts"] !== undefined) {
    const n = Number(a["num-prompts"]);
    if (!Number.isSafeInteger(n) || n < 1) {
      throw new RangeError(`--num-prompts must be a positive integer, got ${JSON.stringify(a["num-prompts"])}`);
    }
    workload.requests = workload.requests.slice(0, n);
  }
  if (a["extras-share"] !== undefined && a.extras === undefined) {
    throw new RangeError("--extras-share needs --extras");
  }
  const extra = a.extras === undefined ? undefined : requestExtra(parseExtraKind(a.extras));
  // The report groups requests by phase: a workload with phases of its own (a ladder) would lose them.
  if (extra && workload.requests.some((r) => r.phase !== undefined)) {
    throw new RangeError(`--extras groups requests by phase, and --workload ${workload.name} has phases of its own`);
  }
  const withExtra = extra
    ? new Set(
      pickExtras(workload.requests.length, Number(a["extras-share"] ?? 0.25), seed)
        .flatMap((on, i) => (on ? [workload.requests[i]!.id] : [])),
    )
    : new Set<string>();
  const outcome: ExtrasOutcome | undefined = extra
    ? { kind: extra.kind, finished: 0, lengthFinishes: 0, checked: extra.check !== undefined, invalid: 0 }
    : undefined;
  const extraFor = (id: string): CompletionExtra | undefined => {
    if (!extra || !outcome) return undefined;
    if (!withExtra.has(id)) return { body: {}, phase: PLAIN_PHASE };
    return {
      body: extra.body,
      phase: extra.kind,
      onText: (text, reason) => {
        outcome.finished++;
        if (reason === "length") outcome.lengthFinishes++;
        const problem = extra.check?.(text);
        if (problem !== undefined) {
          outcome.invalid++;
          outcome.firstProblem ??= problem;
        }
      },
    };
  };
  const server = a.quick && !a["base-url"] ? await startQuickServer() : undefined;
  try {
    const baseUrl = server?.url ?? a["base-url"] ?? "http://127.0.0.1:8000";
    const model = a.model ?? (await modelName(baseUrl, a["api-key"]));
    const arrival: ArrivalMode = rate === Infinity ? { kind: "burst" } : { kind: "poisson", rate, seed };
    log(
      `serving: ${workload.requests.length} requests of ${workload.name} to ${baseUrl} (model ${model}), rate ${rate}, max concurrency ${
        maxConcurrency ?? "unlimited"
      }`,
    );
    const target = { baseUrl, model, temperature, ...(a["api-key"] ? { apiKey: a["api-key"] } : {}) };
    // Structured outputs: the server's mask histograms before and after, for the run's share alone.
    const structured = extra !== undefined && extra.kind !== "logprobs";
    const masksBefore = structured ? await scrapeMaskHistograms(baseUrl) : null;
    const run = await runSchedule(
      workload,
      { arrival, maxInFlight: maxConcurrency ?? Infinity, phaseBarrier: false },
      (r, now, due) => sendCompletion(target, r, now, due, extraFor(r.id)),
    );
    const masksAfter = masksBefore ? await scrapeMaskHistograms(baseUrl) : null;
    const masks: MaskTimeSummary | null = masksBefore && masksAfter ? maskTimeSummary(masksBefore, masksAfter) : null;
    const metrics = aggregateRun({ ...run, statsBefore: null, statsAfter: null });
    let text = formatServingResult(metrics, {
      ...(maxConcurrency !== undefined ? { maxConcurrency } : {}),
      ...(rate !== Infinity ? { requestRate: rate } : {}),
    });
    if (outcome) {
      const masksLine = structured ? formatMaskTimes(masks) : undefined;
      text += `\n${formatExtrasReport(metrics, outcome, PLAIN_PHASE, masksLine)}\n`;
    }
    log(text);
    if (metrics.failed > 0) log(`first errors: ${metrics.errors.slice(0, 3).join(" | ")}`);
    if (a.out) {
      mkdirSync(a.out, { recursive: true });
      const metadata = collectMetadata({
        command: ["bun", "bench", "serving", ...argv],
        seeds: { workload: seed },
        extra: { baseUrl, servedModel: model },
      });
      writeFileSync(
        join(a.out, "serving.json"),
        toJson({
          schema: "lmpool-serving/1",
          metadata,
          workload: { name: workload.name, params: workload.params, requests: workload.requests.length },
          metrics,
          ...(outcome
            ? {
              extras: {
                ...outcome,
                share: Number(a["extras-share"] ?? 0.25),
                requests: withExtra.size,
                ...(masks ? { masks } : {}),
              },
            }
            : {}),
          records: run.records,
        }),
      );
    }
    return text;
  } finally {
    await server?.close();
  }
}

const entry: BenchEntry = {
  name: "serving",
  description:
    "HTTP serving client (OpenAI /v1/completions, streaming): TTFT/TPOT/ITL/E2E at a rate or concurrency, vLLM layout",
  async run(argv) {
    await runServing(argv);
  },
};
export default entry;
