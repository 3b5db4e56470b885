/**
 * `bun bench transfer_latency`: engine-level dispatch-to-publish of forced prefix copies between
 * two ranks (the target: a 1-block dispatch-to-publish, control messages included, within 1 ms on
 * 2 GPUs, Qwen3-0.6B shape, 256-token blocks). Unlike `bun bench transfer` (the data path alone, in one
 * process), this runs the whole system: LLMEngine with two workers and the control plane, which
 * times each plan from sending prepare to the destination's publish ack.
 *
 * Each round draws a fresh random prefix of B blocks: a warm-up lands it on one rank; once the page
 * table has it, a follower with the same prefix lands (round-robin) on the other rank and forces a
 * B-block copy. Odd rounds start with a one-token filler request, so copies alternate direction.
 * A round counts when exactly one B-block plan completed, the follower ran on the other rank and
 * reused the whole prefix; its time is the control plane's transfer_publish_last_ms.
 *
 *   bun bench transfer_latency [--blocks 1,8] [--reps 20]   Qwen3-0.6B preset, GPUs 0,1, block 256
 *   bun bench transfer_latency --quick                       CPU backend, tiny model, block 16
 * GPU run: source .gpu/env.sh && make native-cuda && bun run bench/main.ts transfer_latency
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { seededRandom } from "../lib/core/seeded_random.ts";
import { LLMEngine } from "../lib/engine/llm_engine.ts";
import type { DataPathSetting } from "../lib/transfer/control/transfer_config.ts";
import { intListOption, intOption } from "./cli_options.ts";
import type { BenchEntry } from "./entry.ts";
import { readModelConfig, resolveModelDir } from "./model_dir.ts";
import { collectMetadata } from "./report/metadata.ts";
import {
  formatLatencyReport,
  type LatencyPoint,
  latencyPoint,
  ONE_BLOCK_TARGET_MS,
  type Round,
} from "./transfer_latency_report.ts";

const USAGE = `usage: bun bench transfer_latency [options]
  --quick               CPU backend, tiny model, 16-token blocks, 2 CPU workers (seconds)
  --blocks 1,8          plan sizes in blocks (default 1,8)
  --reps N              measured rounds per size (default 20; --quick 4)
  --warmup N            unmeasured rounds per size first (default 2; --quick 1)
  --model NAME|DIR      preset or model directory (default qwen3-0.6b; --quick tiny)
  --block-size N        tokens per KV block (default 256; --quick 16)
  --backend cpu|cuda    native backend (default: the loader's choice; --quick cpu)
  --gpus a,b            devices of the two ranks (default 0,1)
  --topology PAIRS      NVLink pairs (default 0-1)
  --data-path MODE      auto | host | ipc | nccl (default auto)
  --seed N              prefix seed (default 0)
  --verbose             engine start-up and supervision log
  --out FILE            JSON results (default bench/results/transfer-latency.json; --quick: only when given)`;

type Counters = Record<string, number>;
const ONE = { maxTokens: 1, temperature: 0, ignoreEos: true };

/** Control-plane counters once the plans started so far ended (completed or aborted), or after 10 s. */
async function settledStats(engine: LLMEngine): Promise<Counters> {
  let c = await engine.processes.controlStats();
  for (const end = Date.now() + 10_000; (c.transfer_active ?? 0) > 0 && Date.now() < end;) {
    await new Promise((r) => setTimeout(r, 2));
    c = await engine.processes.controlStats();
  }
  return c;
}

/** One round of `blocks` blocks; `shift` sends the filler first (the copy goes the other way). */
async function round(
  engine: LLMEngine,
  blocks: number,
  blockSize: number,
  next: () => number,
  vocab: number,
  shift: boolean,
): Promise<Round> {
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(next() * vocab));
  const own = () => ids(1 + Math.floor(next() * Math.min(4, blockSize - 1)));
  if (shift) await engine.generate({ promptTokenIds: ids(1) }, ONE);
  const before = await settledStats(engine);
  const prefix = ids(blocks * blockSize);
  const warm = (await engine.generate({ promptTokenIds: [...prefix, ...own()] }, ONE))[0]!;
  // A finish reaches the launcher before the worker's block delta reaches the control plane.
  await engine.processes.checkPageTable();
  const follow = (await engine.generate({ promptTokenIds: [...prefix, ...own()] }, ONE))[0]!;
  const after = await settledStats(engine);
  const d = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  const direction = `${warm.metrics.rank}->${follow.metrics.rank}`;
  const problems = [
    d("transfer_completed") !== 1
      ? `${d("transfer_completed")} plans completed (${d("transfer_aborted")} aborted), expected 1`
      : "",
    d("transfer_blocks") !== blocks ? `${d("transfer_blocks")} blocks moved, expected ${blocks}` : "",
    follow.metrics.rank === warm.metrics.rank ? `the follower ran on the warm-up's rank ${warm.metrics.rank}` : "",
    follow.metrics.numCachedTokens < blocks * blockSize
      ? `the follower reused ${follow.metrics.numCachedTokens} of ${blocks * blockSize} prefix tokens`
      : "",
  ].filter(Boolean);
  if (problems.length) {
    return { blocks, direction, publishMs: null, bytes: d("transfer_bytes"), error: problems.join("; ") };
  }
  return { blocks, direction, publishMs: after.transfer_publish_last_ms!, bytes: d("transfer_bytes") };
}

/** Payload bytes the workers sent per data path (their pushed counters, once they account for `bytes`). */
async function bytesByPath(engine: LLMEngine, bytes: number): Promise<Record<string, number>> {
  const read = () => {
    const ranks = engine.stats().ranks as unknown as Counters[];
    return Object.fromEntries(
      ["ipc", "device_local", "nccl", "host"].map((
        p,
      ) => [p, ranks.reduce((t, r) => t + (r[`data_path_${p}_sent_bytes`] ?? 0), 0)]),
    );
  };
  for (const end = Date.now() + 3000; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
    const b = read();
    if (Object.values(b).reduce((t, x) => t + x, 0) >= bytes) return b;
  }
  return read();
}

async function run(argv: string[]): Promise<void> {
  const { values: a } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      quick: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      blocks: { type: "string" },
      reps: { type: "string" },
      warmup: { type: "string" },
      model: { type: "string" },
      "block-size": { type: "string" },
      backend: { type: "string" },
      gpus: { type: "string" },
      topology: { type: "string" },
      "data-path": { type: "string" },
      seed: { type: "string" },
      verbose: { type: "boolean" },
      out: { type: "string" },
    },
  });
  if (a.help) return void console.log(USAGE);
  const quick = a.quick ?? false;
  const sizes = intListOption("blocks", a.blocks ?? "1,8");
  if (sizes.some((b) => b < 1)) throw new RangeError(`--blocks entries must be >= 1, got ${JSON.stringify(a.blocks)}`);
  const reps = intOption("reps", a.reps, quick ? 4 : 20);
  const warmup = intOption("warmup", a.warmup, quick ? 1 : 2, 0);
  const blockSize = intOption("block-size", a["block-size"], quick ? 16 : 256);
  const seed = intOption("seed", a.seed, 0, 0);
  const backend = a.backend ?? (quick ? "cpu" : undefined);
  if (backend !== undefined && backend !== "cpu" && backend !== "cuda") {
    throw new RangeError(`--backend must be cpu or cuda, got ${JSON.stringify(backend)}`);
  }
  const gpus = intListOption("gpus", a.gpus ?? "0,1");
  if (gpus.length !== 2) throw new RangeError(`--gpus needs two devices, got ${JSON.stringify(a.gpus)}`);
  const dataPath = (a["data-path"] ?? "auto") as DataPathSetting;
  const modelDir = await resolveModelDir(a.model ?? (quick ? "tiny" : "qwen3-0.6b"));
  const maxBlocks = Math.max(...sizes);

  const engine = await LLMEngine.create({
    model: modelDir,
    worldSize: 2,
    gpus,
    topology: a.topology ?? "0-1",
    blockSize,
    maxModelLen: (maxBlocks + 1) * blockSize,
    ...(backend ? { backend } : {}),
    // Rounds leave reclaimable prefix blocks behind; the quick form needs only room for one round.
    ...(quick ? { numBlocks: Math.max(256, 4 * (maxBlocks + 2)) } : {}),
    routing: { policy: "round-robin" },
    // The follower's route waits for its whole copy, so no prefill runs beside the measured plan.
    transfers: { mode: "force", dataPath, background: false, foregroundWaitMs: 2000 },
    log: a.verbose ? undefined : null,
  });
  try {
    const vocab = Math.min(engine.model.vocabSize, 150_000); // below the special tokens
    const next = seededRandom(seed);
    console.log(
      `transfer_latency: ${engine.model.backend} backend, model ${modelDir}, ${blockSize}-token blocks, ranks on devices ${
        gpus.join(",")
      }, data path ${dataPath}; ${warmup} warm-up + ${reps} measured rounds per size`,
    );
    await engine.generate({ promptTokenIds: [1, 2, 3, 4, 5, 6, 7, 8] }, { ...ONE, maxTokens: 2 });
    const points: LatencyPoint[] = [];
    const failures: string[] = [];
    for (const blocks of sizes) {
      const rounds: Round[] = [];
      for (let i = 0; i < warmup + reps; i++) {
        const r = await round(engine, blocks, blockSize, next, vocab, i % 2 === 1);
        if (r.error) failures.push(`${blocks} blocks, round ${i + 1} (${r.direction}): ${r.error}`);
        if (i >= warmup) rounds.push(r);
      }
      points.push(latencyPoint(blocks, rounds));
    }
    const control = await settledStats(engine);
    const paths = await bytesByPath(engine, control.transfer_bytes ?? 0);
    const window = Object.fromEntries(Object.entries(control).filter(([k]) => k.startsWith("transfer_")));
    console.log(formatLatencyReport(points, { quick, paths, control: window }));
    for (const f of failures) console.error(`round failed: ${f}`);
    const out = a.out ?? (quick ? undefined : "bench/results/transfer-latency.json");
    if (out) {
      const one = points.find((p) => p.blocks === 1);
      const json = {
        schema: "lmpool-transfer-latency/1",
        metadata: collectMetadata({
          command: ["bun", "bench", "transfer_latency", ...argv],
          model: readModelConfig(modelDir),
          seeds: { prefix: seed },
          extra: { backend: engine.model.backend, blockSize, gpus, dataPath, reps, warmup, quick },
        }),
        points,
        target: one
          ? { blocks: 1, limitMs: ONE_BLOCK_TARGET_MS, p50Ms: one.p50Ms, pass: one.p50Ms <= ONE_BLOCK_TARGET_MS }
          : null,
        bytesByPath: paths,
        controlPlane: window,
        failures,
      };
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(out, JSON.stringify(json, null, 2) + "\n");
      console.log(`\nwrote ${out}`);
    }
    if (failures.length) {
      throw new Error(
        `${failures.length} of ${sizes.length * (warmup + reps)} rounds did not verify (first: ${failures[0]})`,
      );
    }
  } finally {
    await engine.shutdown();
  }
}

const entry: BenchEntry = {
  name: "transfer_latency",
  description:
    "engine-level KV copy dispatch-to-publish on 2 ranks (control messages included) vs the 1-block <= 1 ms target",
  run,
};
export default entry;
