// KV events from a real server: LLMEngine with two CPU ranks (processes, tiny model, NVLink pair
// 0-1, transfers forced, round-robin routing so followers land where their prefix is not) behind the
// OpenAI HTTP server, a KV cache small enough to evict, in both granularities. Both consumers
// subscribe: the TypeScript one in this process and the strict Python one (strict_consumer.py with
// Debian's python3-zmq and python3-msgpack). The Python consumer stops halfway and restarts from its
// saved state, catching up through the replay socket without a gap; a second TypeScript consumer
// joins late and replays from 0. After the workload drains, every consumer's block sets equal the
// global page table (the union of the ranks' blocks for the node stream, each rank's for per-rank
// streams) and every announced block's tokens equal those of the request that made it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { ZmqContext } from "../../../ffi/zmq/zmq_socket.ts";
import { prefixBlockHashes } from "../../../lib/core/block_hash.ts";
import { LLMEngine } from "../../../lib/engine/llm_engine.ts";
import { wireHash } from "../../../lib/kv_events/event_hash.ts";
import { type KvEventsGranularity, parseKvEventsConfig } from "../../../lib/kv_events/kv_events_config.ts";
import { type RunningServer, serve } from "../../../lib/server/serve.ts";
import { libzmqMissing, pythonWithZmq, unavailableSuite } from "../../helpers/system_libraries.ts";
import { engineTestModelDir, randomTokens, rng } from "../llm_fixtures.ts";
import { type ConsumerExpectations, PythonConsumer, type StreamSpec, TsConsumer } from "./consumers.ts";
import { freePortRun } from "./free_ports.ts";

const BLOCK = 16;
const MODEL = "tiny-events";
const POD = "10.0.0.7:8000";

/** One request as sent, and the tokens it produced. */
interface Sent {
  prompt: number[];
  salt?: string;
  output: number[];
}

/** A completion over HTTP; its output token ids come back through return_tokens_as_token_ids. */
async function complete(url: string, prompt: number[], stream: boolean, salt?: string): Promise<Sent> {
  const body = {
    model: MODEL,
    prompt,
    max_tokens: 20,
    temperature: 0,
    logprobs: 0,
    return_tokens_as_token_ids: true,
    stream,
    ...(salt ? { cache_salt: salt } : {}),
  };
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`completion failed: ${res.status} ${await res.text()}`);
  const ids = (tokens: string[]) => tokens.map((t) => Number(t.slice("token_id:".length)));
  if (!stream) {
    const j = await res.json() as { choices: { logprobs: { tokens: string[] } }[] };
    return { prompt, salt, output: ids(j.choices[0]!.logprobs.tokens) };
  }
  const output: number[] = [];
  for (const line of (await res.text()).split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: { logprobs?: { tokens: string[] } }[] };
    for (const c of chunk.choices) if (c.logprobs) output.push(...ids(c.logprobs.tokens));
  }
  return { prompt, salt, output };
}

/**
 * Shared-prefix groups, salted tenants, streaming and not: more blocks than two ranks of 48 hold.
 * Each group's first request runs before its followers, and the page table settles in between, so
 * round-robin sends followers to the rank without the prefix and the forced transfers copy it.
 */
async function phase(engine: LLMEngine, url: string, seed: number, sent: Sent[]): Promise<void> {
  const next = rng(seed);
  const prefixes = Array.from({ length: 3 }, () => randomTokens(next, 5 * BLOCK));
  sent.push(
    ...(await Promise.all(prefixes.map((p, g) => complete(url, [...p, ...randomTokens(next, 5)], g % 2 === 0)))),
  );
  await engine.processes.checkPageTable();
  for (let round = 0; round < 2; round++) {
    const jobs = prefixes.flatMap((p, g) => [
      complete(url, [...p, ...randomTokens(next, 7 + g)], (round + g) % 2 === 0),
      complete(
        url,
        [...p, ...randomTokens(next, 9 + g)],
        (round + g) % 2 === 1,
        g === 0 ? `tenant-${round}` : undefined,
      ),
    ]);
    sent.push(...(await Promise.all(jobs)));
  }
}

function runSuite(granularity: KvEventsGranularity, python: string): void {
  describe(`KV events, ${granularity} granularity, two CPU ranks`, () => {
    let engine: LLMEngine;
    let server: RunningServer;
    let ctx: ZmqContext;
    let specs: StreamSpec[];
    const stateDir = mkdtempSync(`${tmpdir()}/lmpool-kv-events-`);
    const expectations: ConsumerExpectations = { blockSize: BLOCK, pod: POD, model: MODEL, topicFilter: "kv@" };

    beforeAll(async () => {
      const ranks = granularity === "rank" ? 2 : 1;
      const pub = await freePortRun(ranks);
      const replay = await freePortRun(ranks);
      engine = await LLMEngine.create({
        model: engineTestModelDir(),
        worldSize: 2,
        numBlocks: 48,
        maxModelLen: 512,
        backend: "cpu",
        log: null,
        topology: "0-1",
        transfers: "force",
        routing: { policy: "round-robin" },
        kvEvents: parseKvEventsConfig({
          enable_kv_cache_events: true,
          publisher: "zmq",
          endpoint: `tcp://*:${pub}`,
          replay_endpoint: `tcp://*:${replay}`,
          topic: `kv@${POD}@${MODEL}`,
          granularity,
        }),
      });
      server = await serve({ engine, port: 0, servedModelName: MODEL });
      ctx = new ZmqContext();
      specs = Array.from({ length: ranks }, (_, r) => ({
        name: granularity === "rank" ? `rank${r}` : "node",
        endpoint: `tcp://127.0.0.1:${pub + r}`,
        replay: `tcp://127.0.0.1:${replay + r}`,
        rank: granularity === "rank" ? r : 0,
      }));
    }, 60_000);

    afterAll(async () => {
      await server?.close();
      ctx?.dispose();
      rmSync(stateDir, { recursive: true, force: true });
    }, 30_000);

    test("both consumers rebuild the page table; a restarted subscriber catches up by replay", async () => {
      const early = new TsConsumer(ctx, specs, expectations);
      const stateFile = `${stateDir}/python.json`;
      let py = await PythonConsumer.start(python, specs, expectations, stateFile);
      const sent: Sent[] = [];
      let late: TsConsumer | undefined;
      try {
        await phase(engine, server.url, 1, sent);
        await settled(engine);
        await py.report(lastSeqs(engine, specs));
        await py.save(); // the Python subscriber stops here ...
        await phase(engine, server.url, 2, sent); // ... misses this phase ...
        py = await PythonConsumer.start(python, specs, expectations, stateFile); // ... and resumes by replay
        late = new TsConsumer(ctx, specs, expectations); // joins late: replays from 0
        await phase(engine, server.url, 3, sent);
        const diff = await settled(engine);
        expect(diff).toEqual([]);

        const want = lastSeqs(engine, specs);
        const expected = await pageTableSets(engine, specs, granularity);
        const reports = [await early.report(want), await late.report(want), await py.report(want)];
        for (const r of reports) {
          for (const s of specs) {
            expect({ stream: s.name, blocks: r[s.name]!.blocks }).toEqual({
              stream: s.name,
              blocks: expected[s.name]!,
            });
            expect(r[s.name]!.lastSeq).toBe(want[s.name]!);
          }
        }
        // The resumed Python consumer and the late TS one needed replay; evictions happened.
        for (const s of specs) {
          expect(reports[2]![s.name]!.replays).toBeGreaterThanOrEqual(1);
          expect(reports[0]![s.name]!.counts.BlockRemoved).toBeGreaterThan(0);
        }
        expect((await engine.currentStats()).transfers.count).toBeGreaterThan(0);

        // Every announced block holds the tokens of the request that made it.
        const tokensOf = new Map<bigint, number[]>();
        for (const r of sent) {
          const all = [...r.prompt, ...r.output];
          prefixBlockHashes(all, BLOCK, r.salt).forEach((h, i) =>
            tokensOf.set(wireHash(h), all.slice(i * BLOCK, (i + 1) * BLOCK))
          );
        }
        for (const s of specs) {
          for (const [h, tokens] of early.tokens(s.name)) expect(tokens).toEqual(tokensOf.get(h)!);
        }
      } finally {
        early.dispose();
        late?.dispose();
        await py.stop();
      }
    }, 110_000);

    test(
      "a worker that restarts empty: its blocks leave (per rank: AllBlocksCleared), and the sets still match",
      async () => {
        const ts = new TsConsumer(ctx, specs, expectations); // joins late: replays everything from 0
        const py = await PythonConsumer.start(python, specs, expectations, `${stateDir}/fresh.json`);
        try {
          engine.processes.killWorker(1);
          const back = () => engine.processes.health()[1]!.restarts >= 1 && engine.processes.liveRanks().length === 2;
          for (const end = Date.now() + 30_000; !back();) {
            if (Date.now() > end) throw new Error("worker 1 did not come back");
            await Bun.sleep(50);
          }
          await phase(engine, server.url, 4, []);
          expect(await settled(engine)).toEqual([]);
          const want = lastSeqs(engine, specs);
          const expected = await pageTableSets(engine, specs, granularity);
          for (const r of [await ts.report(want), await py.report(want)]) {
            for (const s of specs) expect(r[s.name]!.blocks).toEqual(expected[s.name]!);
            if (granularity === "rank") expect(r.rank1!.counts.AllBlocksCleared).toBeGreaterThanOrEqual(1);
            else expect(r.node!.counts.AllBlocksCleared).toBe(0); // rank 0 still held blocks
          }
        } finally {
          ts.dispose();
          await py.stop();
        }
      },
      110_000,
    );

    test(
      "a control plane that restarts and is rebuilt from the workers' snapshots changes nothing in the streams",
      async () => {
        await settled(engine);
        const before = lastSeqs(engine, specs);
        engine.processes.killControl();
        for (
          const end = Date.now() + 30_000;
          engine.processes.controlConnected || engine.processes.controlRestarts < 1;
        ) {
          if (Date.now() > end) throw new Error("the control plane was not restarted");
          await Bun.sleep(20);
        }
        await engine.processes.waitForControl();
        expect(await settled(engine)).toEqual([]);
        await Bun.sleep(100);
        engine.kvEvents!.flush();
        expect(lastSeqs(engine, specs)).toEqual(before);
        // And the streams still follow the rebuilt page table.
        const ts = new TsConsumer(ctx, specs, expectations);
        try {
          await phase(engine, server.url, 5, []);
          expect(await settled(engine)).toEqual([]);
          const expected = await pageTableSets(engine, specs, granularity);
          const r = await ts.report(lastSeqs(engine, specs));
          for (const s of specs) expect(r[s.name]!.blocks).toEqual(expected[s.name]!);
        } finally {
          ts.dispose();
        }
      },
      110_000,
    );
  });
}

/** Waits until the page table matches the workers and every stream sent all it has; returns the differences. */
async function settled(engine: LLMEngine): Promise<string[]> {
  const diff = await engine.processes.checkPageTable();
  const kv = engine.kvEvents!;
  for (const end = Date.now() + 5000; Date.now() < end;) {
    kv.flush();
    if (kv.stats().streams.every((s) => s.pending === 0)) break;
    await Bun.sleep(20);
  }
  expect(kv.stats().streams.map((s) => s.pending)).toEqual(kv.stats().streams.map(() => 0));
  return diff.differences;
}

function lastSeqs(engine: LLMEngine, specs: StreamSpec[]): Record<string, number> {
  const streams = engine.kvEvents!.stats().streams;
  return Object.fromEntries(specs.map((s, i) => [s.name, streams[i]!.lastSeq]));
}

/** The page table's blocks as each stream should hold them (wire hashes, 16 hex digits, sorted). */
async function pageTableSets(
  engine: LLMEngine,
  specs: StreamSpec[],
  granularity: KvEventsGranularity,
): Promise<Record<string, string[]>> {
  const snaps = await engine.processes.pageTable();
  const hex = (h: string) => wireHash(h).toString(16).padStart(16, "0");
  if (granularity === "node") {
    return { node: [...new Set(snaps.flatMap((s) => s.entries.map((e) => hex(e.hash))))].sort() };
  }
  return Object.fromEntries(specs.map((spec, r) => [
    spec.name,
    (snaps.find((s) => s.rank === r)?.entries ?? []).map((e) => hex(e.hash)).sort(),
  ]));
}

const missingZmq = libzmqMissing();
const py = pythonWithZmq();
if (missingZmq) unavailableSuite("KV events system suite", missingZmq);
else if ("missing" in py) unavailableSuite("KV events system suite", py.missing);
else {
  runSuite("node", py.path);
  runSuite("rank", py.path);
}
