// LMPool runtime with real processes (launcher + control plane + 2 workers, CPU backend, tiny
// model): KV-aware routing realizes the trace's prefix reuse, outputs equal the single-GPU
// engine's, a killed control plane is rebuilt from worker snapshots, a killed or hung worker is
// restarted and rejoins empty while its requests fail or run elsewhere, and a killed launcher
// leaves no orphans.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { WorkerDiedError } from "../../lib/core/errors.ts";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { LLMEngine, type LLMEngineOptions } from "../../lib/engine/llm_engine.ts";
import { spawnChild } from "../../lib/runtime/subprocess.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

let model: string;
const base = { numBlocks: 256, maxModelLen: 1024, topology: "none", log: null, backend: "cpu" } satisfies Partial<
  LLMEngineOptions
>;
const greedy = { maxTokens: 12, temperature: 0 };

beforeAll(() => {
  model = engineTestModelDir();
});

/** Groups of prompts sharing a long prefix (a system prompt or document) and short own suffixes. */
function sharedPrefixTrace(groups: number, perGroup: number, seed: number, prefixTokens = 480): number[][][] {
  const next = rng(seed);
  return Array.from({ length: groups }, () => {
    const prefix = randomTokens(next, prefixTokens);
    return Array.from({ length: perGroup }, () => [...prefix, ...randomTokens(next, 5 + Math.floor(next() * 20))]);
  });
}

/** Prompt tokens coverable by complete blocks seen earlier (ordered replay, unlimited cache). */
function potentialCachedTokens(order: number[][], blockSize: number): number {
  const seen = new Set<string>();
  let total = 0;
  for (const p of order) {
    let hit = true;
    for (let b = 0; b + blockSize <= p.length; b += blockSize) {
      const key = p.slice(0, b + blockSize).join(",");
      if (hit && seen.has(key)) total += blockSize;
      else hit = false;
      seen.add(key);
    }
  }
  return total;
}

test("shared-prefix workload: prefix hits reach >= 90% of the trace's potential, outputs equal the single-GPU engine", async () => {
  const trace = sharedPrefixTrace(6, 5, 3);
  await using engine = await LLMEngine.create({ model, worldSize: 2, ...base });
  const outs: RequestOutput[] = [];
  const order: number[][] = [];
  // Warm-ups first, then every follower at once.
  outs.push(...(await engine.generate(trace.map((g) => ({ promptTokenIds: g[0]! })), greedy)));
  order.push(...trace.map((g) => g[0]!));
  const followers = trace.flatMap((g) => g.slice(1));
  outs.push(...(await engine.generate(followers.map((p) => ({ promptTokenIds: p })), greedy)));
  order.push(...followers);
  const realized = outs.reduce((n, o) => n + o.metrics.numCachedTokens, 0);
  const potential = potentialCachedTokens(order, engine.model.blockSize);
  expect(potential).toBe(6 * 4 * 480);
  console.log(
    `realized prefix reuse ${realized}/${potential} tokens (${
      ((100 * realized) / potential).toFixed(1)
    }% of the potential)`,
  );
  expect(realized).toBeGreaterThanOrEqual(0.9 * potential);
  expect(new Set(outs.map((o) => o.metrics.rank)).size).toBe(2); // both ranks served
  await using llm = await LLM.create({ model, backend: "cpu", numBlocks: 256, maxModelLen: 1024 });
  const single = await llm.generate(order.map((p) => ({ promptTokenIds: p })), greedy);
  expect(outs.map((o) => o.tokenIds)).toEqual(single.map((o) => o.tokenIds));
  expect(engine.stats().ranks.length).toBe(2);
});

test("kill -9 of the control plane mid-run: every request completes and the rebuilt page table equals the workers' snapshots", async () => {
  await using engine = await LLMEngine.create({ model, worldSize: 2, ...base });
  const trace = sharedPrefixTrace(4, 6, 9, 96).flat();
  const long = { maxTokens: 40, temperature: 0 };
  const first = engine.generate(trace.slice(0, 12).map((p) => ({ promptTokenIds: p })), long);
  let streamed = 0;
  for await (const _ of engine.stream({ promptTokenIds: trace[12]! }, long)) if (++streamed === 2) break;
  const oldPid = engine.processes.controlPid!;
  engine.processes.killControl("SIGKILL");
  // Submitted while the control plane is down or restarting: routed locally.
  const during = engine.generate(trace.slice(13).map((p) => ({ promptTokenIds: p })), long);
  const outs = [...(await first), ...(await during)];
  expect(outs.length).toBe(trace.length - 1);
  for (const o of outs) expect(["length", "stop"]).toContain(o.finishReason);
  await engine.processes.waitForControl();
  expect(engine.processes.controlPid).not.toBe(oldPid);
  expect(engine.processes.controlRestarts).toBe(1);
  const diff = await engine.processes.checkPageTable();
  expect(diff.differences).toEqual([]);
  expect(diff.equal).toBe(true);
  // Routing is KV-aware again: a repeated prompt hits its prefix.
  const [again] = await engine.generate({ promptTokenIds: trace[0]! }, greedy);
  expect(again!.metrics.numCachedTokens).toBeGreaterThanOrEqual(96);
});

test("kill -9 of a worker: requests that streamed fail with WorkerDiedError, the rest complete, the worker restarts empty, no blocks leak", async () => {
  await using engine = await LLMEngine.create({ model, worldSize: 2, ...base, restartPolicy: { initialDelayMs: 100 } });
  const next = rng(21);
  const prompts = Array.from({ length: 8 }, () => randomTokens(next, 40));
  let lastErrorAt = 0;
  const results = prompts.map((p) =>
    engine.generate({ promptTokenIds: p }, { maxTokens: 400, temperature: 0 }).then(
      (o) => o[0]!,
      (e: unknown) => ((lastErrorAt = Date.now()), e as Error),
    )
  );
  // Wait until both workers run something.
  const deadline = Date.now() + 10_000;
  while (engine.stats().ranks.filter((r) => r.numRunning > 0).length < 2 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
  }
  const killedAt = Date.now();
  engine.processes.killWorker(1, "SIGKILL");
  const settled = await Promise.all(results);
  const died = settled.filter((x): x is WorkerDiedError => x instanceof WorkerDiedError);
  const done = settled.filter((x): x is RequestOutput => !(x instanceof Error));
  expect(died.length).toBeGreaterThan(0);
  expect(done.length).toBeGreaterThan(0);
  expect(died.length + done.length).toBe(prompts.length);
  for (const e of died) expect(e.rank).toBe(1);
  if (died.length > 0) expect(lastErrorAt - killedAt).toBeLessThan(10_000);
  // The supervisor brings rank 1 back; it rejoins the page table empty and serves again.
  const back = Date.now() + 30_000;
  while (engine.processes.liveRanks().length < 2 && Date.now() < back) await new Promise((r) => setTimeout(r, 20));
  expect(engine.processes.liveRanks()).toEqual([0, 1]);
  expect(engine.stats().health.ranks).toEqual([
    { rank: 0, up: true, restarts: 0 },
    { rank: 1, up: true, restarts: 1 },
  ]);
  // Fresh prompts (the old ones are cached on rank 0 now, and KV-aware routing keeps them there).
  const again = await engine.generate(
    Array.from({ length: 8 }, () => ({ promptTokenIds: randomTokens(next, 40) })),
    greedy,
  );
  expect(new Set(again.map((o) => o.metrics.rank))).toEqual(new Set([0, 1]));
  await new Promise((r) => setTimeout(r, 100));
  for (const s of engine.stats().ranks) {
    expect(s.numFreeBlocks + s.numReclaimableBlocks).toBe(s.numBlocks);
    expect(s.leakedBlocks).toBe(0);
  }
  const diff = await engine.processes.checkPageTable();
  expect(diff.equal).toBe(true);
});

test("a stopped (hung) worker is declared dead within the heartbeat bound, restarted, and its queued requests run elsewhere", async () => {
  const heartbeat = { intervalMs: 200, missLimit: 5 };
  await using engine = await LLMEngine.create({
    model,
    worldSize: 2,
    ...base,
    heartbeat,
    restartPolicy: { initialDelayMs: 100 },
  });
  const next = rng(8);
  // Warm both ranks so their step times are known (the busy grace follows them).
  await engine.generate([0, 1, 2, 3].map(() => ({ promptTokenIds: randomTokens(next, 20) })), {
    maxTokens: 4,
    temperature: 0,
  });
  const pid = engine.processes.workerPid(1)!;
  process.kill(pid, "SIGSTOP");
  const stoppedAt = Date.now();
  try {
    const outs = await Promise.all(
      Array.from(
        { length: 4 },
        () => engine.generate({ promptTokenIds: randomTokens(next, 30) }, greedy).then((o) => o[0]!),
      ),
    );
    for (const o of outs) expect(o.tokenIds.length).toBe(greedy.maxTokens);
    while (
      engine.processes.liveRanks().includes(1) && engine.processes.workerPid(1) === pid &&
      Date.now() - stoppedAt < 20_000
    ) await new Promise((r) => setTimeout(r, 20));
    const detectMs = Date.now() - stoppedAt;
    // 1 s of silence plus at most 4 x a busy step's announced length (short steps: 250 ms floor).
    expect(detectMs).toBeLessThan(1000 + 4 * 500 + 1500);
  } finally {
    try {
      process.kill(pid, "SIGCONT");
    } catch {
      // already gone (SIGKILLed by the launcher)
    }
  }
  const back = Date.now() + 30_000;
  while (engine.processes.liveRanks().length < 2 && Date.now() < back) await new Promise((r) => setTimeout(r, 20));
  expect(engine.processes.liveRanks()).toEqual([0, 1]);
  expect(engine.processes.workerPid(1)).not.toBe(pid);
  expect(alive(pid)).toBe(false);
});

test("the dead worker's requests fail fast (time to the typed error)", async () => {
  await using engine = await LLMEngine.create({ model, worldSize: 2, ...base });
  const next = rng(5);
  const p = randomTokens(next, 30);
  const started = engine.stream({ promptTokenIds: p }, { maxTokens: 400, temperature: 0 });
  const first = await started.next();
  expect(first.done).toBe(false);
  const rank = engine.stats().ranks.find((r) => r.numRunning > 0)?.rank ?? 0;
  const t0 = Date.now();
  engine.processes.killWorker(rank, "SIGKILL");
  let err: unknown;
  try {
    for (;;) if ((await started.next()).done) break;
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(WorkerDiedError);
  expect(Date.now() - t0).toBeLessThan(10_000);
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8")); // a zombie has exited
  } catch {
    return false;
  }
}

test("a killed launcher leaves no orphan processes", async () => {
  const child = spawnChild({
    cmd: [process.execPath, "run", new URL("./lmpool_launcher_fixture.ts", import.meta.url).pathname, model],
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = child.stdout!.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const pids = JSON.parse(text.split("\n")[0]!) as { control: number; workers: number[] };
  const all = [pids.control, ...pids.workers];
  expect(all.every(alive)).toBe(true);
  child.kill("SIGKILL");
  await child.exited;
  const deadline = Date.now() + 10_000;
  while (all.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  expect(all.filter(alive)).toEqual([]);
});

afterAll(() => {});
