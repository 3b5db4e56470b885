// Liveness apart from work, with real processes (launcher + control plane + 2 CPU workers): a
// step longer than the heartbeat limit is announced and is not a death (a stall of the monitor's
// own event loop is discounted: test/unit/protocol/heartbeat_monitor.test.ts); stale run
// directories of dead launchers are removed at the next start.
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { LLMEngine, type LLMEngineOptions } from "../../lib/engine/llm_engine.ts";
import { removeStaleRunDirs } from "../../lib/engine/process_launch.ts";
import { spawnChild } from "../../lib/runtime/subprocess.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

const base = {
  numBlocks: 320,
  maxModelLen: 4096,
  maxNumBatchedTokens: 4096,
  topology: "none",
  log: null,
  backend: "cpu",
} satisfies Partial<LLMEngineOptions>;
/** Silence limit 0.2 s: below the steps of a 4,000-token prefill on the CPU (each near the 0.5 s step target). */
const heartbeat = { intervalMs: 50, missLimit: 4 };

test("a step far longer than the heartbeat limit is announced, not taken for a death", async () => {
  await using engine = await LLMEngine.create({ model: engineTestModelDir(), worldSize: 2, ...base, heartbeat });
  const next = rng(4);
  const t0 = Date.now();
  const [out] = await engine.generate({ promptTokenIds: randomTokens(next, 4000) }, { maxTokens: 2, temperature: 0 });
  const ttftMs = out!.metrics.firstTokenTime !== undefined
    ? out!.metrics.firstTokenTime - out!.metrics.arrivalTime
    : Date.now() - t0;
  // The prefill steps held the worker's thread several heartbeat limits long...
  expect(ttftMs).toBeGreaterThan(3 * heartbeat.intervalMs * heartbeat.missLimit);
  // ...and every rank still serves, never restarted.
  expect(engine.stats().health.ranks.map((r) => [r.up, r.restarts])).toEqual([
    [true, 0],
    [true, 0],
  ]);
});

test("run directories of launchers that no longer run are removed; others are kept", async () => {
  const root = mkdtempSync(`${tmpdir()}/lmpool-stale-test-`);
  const dead = spawnChild({ cmd: ["true"], stdout: "ignore", stderr: "ignore" });
  await dead.exited;
  const mk = (name: string, owner?: number) => {
    mkdirSync(`${root}/${name}`);
    if (owner !== undefined) writeFileSync(`${root}/${name}/owner.pid`, `${owner}\n`);
    return `${root}/${name}`;
  };
  const stale = mk("lmpool-stale", dead.pid);
  const live = mk("lmpool-live", process.pid);
  const foreign = mk("lmpool-foreign");
  const other = mk("other-dir", dead.pid);
  expect(removeStaleRunDirs(root)).toEqual([stale]);
  expect([existsSync(stale), existsSync(live), existsSync(foreign), existsSync(other)]).toEqual([
    false,
    true,
    true,
    true,
  ]);
});
