/**
 * Control-plane routing benchmark (CPU only): route decisions per second and p50/p99 latency of
 * the Global Scheduler with `--ranks N` ranks (default 8) of 12.5k published blocks each, laid out
 * as realistic prefix trees (shared system prompts/documents branching into conversations,
 * replicated on 1-3 ranks), every rank an NVLink partner of every other (an NVSwitch).
 * Targets for lmpool: up to 8 ranks >= 100k routes/s with p99 <= 50 us; beyond 8 ranks (sized for
 * 64 simulated GPUs) >= 20k routes/s with p99 <= 200 us. `--quick` runs fewer routes; `--policy
 * NAME` picks one policy (default: every policy, lmpool first).
 * Run: `bun bench routing [--ranks 64]` or `bun run bench/routing.ts [--quick]`.
 * @module
 */
import type { BenchEntry } from "./entry.ts";
import { type BlockHash, blockHash, rootHash } from "../lib/core/block_hash.ts";
import type { BlockEntry, BlockSnapshot } from "../lib/core/block_snapshot.ts";
import { GlobalScheduler } from "../lib/global/global_scheduler.ts";
import { POLICY_NAMES, type PolicyName } from "../lib/global/routing_config.ts";
import type { RouteQuery } from "../lib/global/routing_context.ts";
import { NvlinkTopology } from "../lib/global/topology.ts";
import { parseArgs } from "node:util";
import { seededRandom } from "../lib/core/seeded_random.ts";
import { MAX_INDEXED_RANKS } from "../lib/global/block_index.ts";
import { intOption } from "./cli_options.ts";
import { percentileOfSorted } from "./stats/percentile.ts";

const DEFAULT_RANKS = 8;
const BLOCK_SIZE = 16;
const BLOCKS_PER_RANK = 12_500;

/** What lmpool routing must reach at a number of ranks. */
export interface RoutingTarget {
  routesPerS: number;
  p99Us: number;
}

/** Up to 8 ranks the control plane of one host; beyond, a simulated cluster of up to 64 GPUs. */
export function targetFor(ranks: number): RoutingTarget {
  return ranks <= 8 ? { routesPerS: 100_000, p99Us: 50 } : { routesPerS: 20_000, p99Us: 200 };
}

/** One prefix tree: a shared trunk and branches (conversations) hanging off it. */
export interface PrefixTree {
  trunk: BlockHash[];
  branches: BlockHash[][];
}

function chain(parent: BlockHash, n: number, rand: () => number): BlockHash[] {
  const out: BlockHash[] = [];
  let p = parent;
  for (let i = 0; i < n; i++) {
    const toks = Array.from({ length: BLOCK_SIZE }, () => Math.floor(rand() * 150_000));
    p = blockHash(p, toks);
    out.push(p);
  }
  return out;
}

/** `ranks` snapshots of BLOCKS_PER_RANK published blocks each, laid out as prefix trees held by 1-3 ranks. */
export function buildWorld(ranks: number, rand: () => number): { trees: PrefixTree[]; snapshots: BlockSnapshot[] } {
  const perRank: BlockEntry[][] = Array.from({ length: ranks }, () => []);
  const present: Set<BlockHash>[] = Array.from({ length: ranks }, () => new Set());
  const trees: PrefixTree[] = [];
  let total = 0;
  let clock = 0;
  const publish = (rank: number, hashes: BlockHash[], parent: BlockHash) => {
    let p = parent;
    for (const h of hashes) {
      if (!present[rank]!.has(h)) {
        present[rank]!.add(h);
        perRank[rank]!.push({
          hash: h,
          parent: p,
          block: perRank[rank]!.length,
          generation: 1,
          refCount: rand() < 0.1 ? 1 : 0,
          lastAccess: clock++,
          accessCount: 1 + Math.floor(rand() * 20),
        });
        total++;
      }
      p = h;
    }
  };
  while (total < ranks * BLOCKS_PER_RANK) {
    // Trunk: a system prompt or document of 8..256 blocks (128..4096 tokens).
    const trunk = chain(rootHash(), 8 + Math.floor(rand() * 248), rand);
    const branches = Array.from(
      { length: 2 + Math.floor(rand() * 10) },
      () => chain(trunk[trunk.length - 1]!, 2 + Math.floor(rand() * 40), rand),
    );
    trees.push({ trunk, branches });
    const replicas = 1 + Math.floor(rand() * 3);
    const home = Math.floor(rand() * ranks);
    for (let k = 0; k < Math.min(replicas, ranks); k++) {
      const rank = (home + k) % ranks;
      // Replicas hold the trunk (sometimes only a part of it) and some of the branches.
      const depth = k === 0 ? trunk.length : Math.max(1, Math.floor(trunk.length * (0.3 + 0.7 * rand())));
      publish(rank, trunk.slice(0, depth), "");
      if (depth === trunk.length) {
        for (const b of branches) if (k === 0 || rand() < 0.3) publish(rank, b, trunk[trunk.length - 1]!);
      }
    }
  }
  const snapshots = perRank.map((entries, rank) => {
    const numBlocks = entries.length + 4000;
    const referenced = entries.filter((e) => e.refCount > 0).length;
    return {
      rank,
      epoch: 1,
      version: 1,
      capacity: {
        numBlocks,
        blockSize: BLOCK_SIZE,
        numFree: 4000 - 200 * (rank % 3),
        numReclaimable: entries.length - referenced,
      },
      load: {
        numRunning: 8 + rank,
        numWaiting: rank % 4,
        runningTokens: (8 + rank) * 1500,
        waitingTokens: (rank % 4) * 2000,
      },
      entries,
    } satisfies BlockSnapshot;
  });
  return { trees, snapshots };
}

/** Queries: mostly a tree's trunk (full or partial) + a branch prefix + fresh blocks; some cold. */
export function buildQueries(ranks: number, trees: PrefixTree[], n: number, rand: () => number): RouteQuery[] {
  const out: RouteQuery[] = [];
  for (let i = 0; i < n; i++) {
    let hashes: BlockHash[];
    if (rand() < 0.1) {
      hashes = chain(rootHash(), 4 + Math.floor(rand() * 100), rand);
    } else {
      const t = trees[Math.floor(rand() * trees.length)]!;
      const b = t.branches[Math.floor(rand() * t.branches.length)]!;
      const partial = rand() < 0.2;
      const trunk = partial ? t.trunk.slice(0, 1 + Math.floor(rand() * t.trunk.length)) : t.trunk;
      const branch = partial ? [] : b.slice(0, Math.floor(rand() * (b.length + 1)));
      const last = (branch.length ? branch[branch.length - 1] : trunk[trunk.length - 1])!;
      hashes = [...trunk, ...branch, ...chain(last, 1 + Math.floor(rand() * 8), rand)];
    }
    const promptTokens = hashes.length * BLOCK_SIZE + Math.floor(rand() * BLOCK_SIZE);
    out.push({
      requestId: `b${i}`,
      // A request's hashes are computed at ingress, never the very strings the index holds.
      blockHashes: JSON.parse(JSON.stringify(hashes)),
      promptTokens,
      maxTokens: 256,
      sessionId: `s${i % 512}`,
      ingressRank: rand() < 0.5 ? Math.floor(rand() * ranks) : undefined,
    });
  }
  return out;
}

/** One policy's routing speed over a query list. */
export interface Measured {
  policy: PolicyName;
  routesPerS: number;
  p50Us: number;
  p99Us: number;
  /** Mean and max include GC pauses and scheduler noise that the percentiles hide. */
  meanUs: number;
  maxUs: number;
  hitRate: number;
}

/** Routes `queries` through a fresh Global Scheduler over `snapshots` (every pair linked), after `warmup` routes. */
export function measure(
  policy: PolicyName,
  snapshots: BlockSnapshot[],
  queries: RouteQuery[],
  warmup: number,
): Measured {
  const ranks = snapshots.length;
  const pairs: [number, number][] = [];
  for (let a = 0; a < ranks; a++) for (let b = a + 1; b < ranks; b++) pairs.push([a, b]);
  const topology = new NvlinkTopology(ranks, pairs);
  const s = new GlobalScheduler({ config: { policy }, topology });
  for (const snap of snapshots) s.applySnapshot(snap);
  // Keep a window of outstanding reservations, as a live system would have.
  const window: string[] = [];
  const run = (q: RouteQuery, tag: string) => {
    const d = s.route({ ...q, requestId: tag });
    window.push(tag);
    if (window.length > 256) s.release(window.shift()!);
    return d;
  };
  for (let i = 0; i < warmup; i++) run(queries[i % queries.length]!, `w${i}`);
  const lat = new Float64Array(queries.length);
  let hits = 0;
  const t0 = performance.now();
  for (let i = 0; i < queries.length; i++) {
    const a = performance.now();
    const d = run(queries[i]!, queries[i]!.requestId);
    lat[i] = performance.now() - a;
    if (d.matchedBlocks > 0) hits++;
  }
  const elapsed = performance.now() - t0;
  const sum = lat.reduce((a, b) => a + b, 0);
  lat.sort();
  return {
    policy,
    routesPerS: queries.length / (elapsed / 1000),
    p50Us: percentileOfSorted(lat, 50) * 1000,
    p99Us: percentileOfSorted(lat, 99) * 1000,
    meanUs: (sum / lat.length) * 1000,
    maxUs: lat[lat.length - 1]! * 1000,
    hitRate: hits / queries.length,
  };
}

const USAGE = `usage: bun bench routing [--quick] [--ranks N] [--policy ${POLICY_NAMES.join("|")}]
  --quick   10k measured routes instead of 50k (same world)
  --ranks   ranks of ${BLOCKS_PER_RANK} published blocks each (default ${DEFAULT_RANKS}, at most ${MAX_INDEXED_RANKS})
  --policy  measure one policy (default: all, lmpool first)`;

const entry: BenchEntry = {
  name: "routing",
  description:
    "Global Scheduler route decisions/s and p50/p99 latency, --ranks N (default 8) x 12.5k cached blocks each (lmpool target: 8 ranks >= 100k routes/s, p99 <= 50 us; 64 ranks >= 20k routes/s, p99 <= 200 us)",
  async run(argv: string[]): Promise<void> {
    const { values: a } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        quick: { type: "boolean" },
        help: { type: "boolean", short: "h" },
        ranks: { type: "string" },
        policy: { type: "string" },
      },
    });
    if (a.help) {
      console.log(USAGE);
      return;
    }
    const quick = a.quick === true;
    const ranks = intOption("ranks", a.ranks, DEFAULT_RANKS);
    if (ranks > MAX_INDEXED_RANKS) throw new RangeError(`--ranks must be at most ${MAX_INDEXED_RANKS}, got ${ranks}`);
    const only = a.policy;
    if (only !== undefined && !(POLICY_NAMES as readonly string[]).includes(only)) {
      throw new RangeError(`unknown --policy ${JSON.stringify(only)}; valid: ${POLICY_NAMES.join(", ")}`);
    }
    const target = targetFor(ranks);
    const rand = seededRandom(42);
    const tBuild = performance.now();
    const { trees, snapshots } = buildWorld(ranks, rand);
    const queries = buildQueries(ranks, trees, quick ? 10_000 : 50_000, rand);
    const blocks = snapshots.reduce((n, s) => n + s.entries.length, 0);
    const avgLen = queries.reduce((n, q) => n + q.blockHashes.length, 0) / queries.length;
    console.log(
      `routing bench: ${ranks} ranks, ${blocks} published blocks in ${trees.length} prefix trees, ${queries.length} queries (mean ${
        avgLen.toFixed(0)
      } blocks), built in ${((performance.now() - tBuild) / 1000).toFixed(1)} s`,
    );
    const policies = only ? [only as PolicyName] : [...POLICY_NAMES];
    let ok = true;
    for (const p of policies) {
      const m = measure(p, snapshots, queries, quick ? 1000 : 5000);
      const pass = m.routesPerS >= target.routesPerS && m.p99Us <= target.p99Us;
      if (p === "lmpool") ok = pass;
      console.log(
        `  ${p.padEnd(17)} ${
          Math.round(m.routesPerS).toString().padStart(8)
        } routes/s (target >= ${target.routesPerS})  p50 ${m.p50Us.toFixed(1).padStart(6)} us  p99 ${
          m.p99Us.toFixed(1).padStart(6)
        } us (target <= ${target.p99Us})  mean ${m.meanUs.toFixed(1)} us  max ${
          (m.maxUs / 1000).toFixed(1)
        } ms  prefix-hit ${(m.hitRate * 100).toFixed(1)}%  ${pass ? "PASS" : "FAIL"}`,
      );
    }
    if (policies.includes("lmpool")) {
      console.log(`lmpool routing ${ok ? "meets" : "MISSES"} the target at ${ranks} ranks`);
    }
  },
};

export default entry;

if (import.meta.main) await entry.run((globalThis as { process?: { argv: string[] } }).process?.argv.slice(2) ?? []);
