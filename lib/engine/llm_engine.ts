/**
 * LLMEngine: the multi-GPU launcher. Starts one control-plane process and one worker process per
 * rank, routes every request through the control plane (KV-aware), dispatches the full sequence
 * to the chosen worker, and streams its tokens back. Supervises the children: a dead control plane
 * is restarted and rebuilt from the workers' full snapshots while they keep decoding (requests
 * route locally meanwhile); a dead or hung worker is restarted with back-off and rejoins empty,
 * its blocks leave the page table, and its requests that had streamed nothing run once more on a
 * live rank (`retryOnWorkerDeath`), the others fail with WorkerDiedError.
 * @module
 */
import type {
  EngineStats,
  GenerateArgs,
  GenerationEngine,
  RankStats,
  ServedModelInfo,
  TextTokenizer,
} from "../core/engine_api.ts";
import { prefixBlockHashes } from "../core/block_hash.ts";
import { AbortedError, CapacityError, DisposedError, WorkerDiedError } from "../core/errors.ts";
import type { PromptInput, RequestOptions, RequestOutput, StreamDelta } from "../core/outputs.ts";
import { promptTokenIds } from "../core/prompt_input.ts";
import { resolveSamplingParams, type SamplingParams } from "../core/sampling_params.ts";
import { checkStructuredOutput } from "../model/grammar/grammar_checker.ts";
import type { RoutingConfigInput } from "../global/routing_config.ts";
import { resolveTransferOptions, type TransferConfigInput } from "../transfer/control/transfer_config.ts";
import type { TransferTuning } from "../transfer/control/transfer_tuning.ts";
import { readModelSpec } from "../model/config.ts";
import { ModelTokenizer } from "../model/tokenizer.ts";
import type { HeartbeatOptions } from "../protocol/heartbeat_monitor.ts";
import { RemoteError } from "../protocol/protocol_errors.ts";
import { EngineProcesses } from "./engine_processes.ts";
import type { RestartPolicy } from "./supervisor.ts";
import { resolveTopology, type TopologyInput } from "./engine_topology.ts";
import { type InflightRequest, InflightRequests } from "./inflight_requests.ts";
import type { LLMOptions } from "./llm.ts";
import { type KvEventsConfig, kvEventsEnabled } from "../kv_events/kv_events_config.ts";
import { KvEventPublishers } from "../kv_events/kv_event_publishers.ts";
import { KvEventService } from "../kv_events/kv_event_service.ts";

/** Options of LLMEngine.create. */
export interface LLMEngineOptions extends Omit<LLMOptions, "device" | "onProgress"> {
  /** Worker ranks (default: from gpus, else 1). */
  worldSize?: number;
  /** A GPU count (ranks on devices 0..n-1), or the CUDA device of each rank. The CPU backend runs every rank on its one device. */
  gpus?: number | number[];
  /** NVLink pairs: "0-1,2-3", [[0, 1]], "auto" (nvidia-smi topo -m; the default) or "none". */
  topology?: TopologyInput;
  /** Routing policy and weights (default policy: lmpool). */
  routing?: RoutingConfigInput;
  /**
   * KV transfer between NVLink partners: "off", "auto" (cost-gated; the default) or "force" (admit
   * every valid candidate, for tests and benchmarks), or partial TransferOptions with `mode`,
   * `foreground`, `background`, the cost gate, deadlines and `dataPath` (how workers move K/V: "auto" =
   * per NVLink partner, CUDA IPC copy-engine copies where they come up, else an NCCL pair, else
   * host sockets; "host"; "ipc" / "nccl" = that path required at start-up)
   * (lib/transfer/control/transfer_config.ts).
   */
  transfers?: TransferConfigInput;
  /** Heartbeat timing of every connection (default 1 s, dead after 5 missed). */
  heartbeat?: HeartbeatOptions;
  /** Re-run a dead worker's requests once elsewhere when they have streamed nothing yet (default true). */
  retryOnWorkerDeath?: boolean;
  /** Restart a dead control plane (default true). */
  restartControlPlane?: boolean;
  /** Restart dead or hung workers (default true). */
  restartWorkers?: boolean;
  /** Back-off and limits of restarts (default 0.5 s doubling to 30 s, reset after a minute of health, 10 per 10 minutes). */
  restartPolicy?: Partial<RestartPolicy>;
  /** Start-up limit for every worker to load and report ready (default 600 s). */
  startTimeoutMs?: number;
  /** Route query timeout before falling back to local routing (default 5 s). */
  routeTimeoutMs?: number;
  /** Progress and supervision log (default: console.error); `null` silences it. */
  log?: ((line: string) => void) | null;
  /**
   * KV events in vLLM's wire format over ZeroMQ, configured as vLLM's `--kv-events-config`
   * (lib/kv_events/kv_events_config.ts: parseKvEventsConfig). Its sockets open before any process
   * starts, so a missing libzmq or a taken port fails create() at once.
   */
  kvEvents?: KvEventsConfig;
  /**
   * Internal, for tests and benchmarks: overrides of the transfer cost model's constants
   * (lib/transfer/control/transfer_tuning.ts). Not a supported knob.
   */
  transferTuning?: Partial<TransferTuning>;
  /**
   * Internal, for tests: the worker entry module (default lib/processes/worker_main.ts), e.g.
   * test/helpers/faulty_worker_main.ts, which injects transfer faults.
   */
  workerMain?: string;
}

/**
 * Several data-parallel workers behind one KV-aware control plane.
 *
 * @example
 * ```ts
 * import { LLMEngine } from "./mod.ts";
 * await using engine = await LLMEngine.create({ model: "/models/Qwen3-0.6B", worldSize: 2 });
 * const outs = await engine.generate(["Hello", "Bonjour"], { maxTokens: 16, temperature: 0 });
 * console.log(outs.map((o) => [o.text, o.metrics.rank]), engine.stats().routing);
 * ```
 */
export class LLMEngine implements GenerationEngine {
  readonly model: ServedModelInfo;
  readonly tokenizer: TextTokenizer;
  readonly #procs: EngineProcesses;
  readonly #inflight = new InflightRequests();
  readonly #rankStats = new Map<number, RankStats>();
  readonly #o: LLMEngineOptions;
  readonly #log: (line: string) => void;
  readonly #kvEvents: KvEventService | undefined;
  #routing: Record<string, number> = {};
  #nextId = 0;
  #fallbackCursor = 0;
  #closed = false;
  #statsTimer: ReturnType<typeof setInterval>;

  private constructor(
    procs: EngineProcesses,
    tokenizer: TextTokenizer,
    model: ServedModelInfo,
    o: LLMEngineOptions,
    log: (line: string) => void,
    kvEvents: KvEventService | undefined,
  ) {
    this.#procs = procs;
    this.#log = log;
    this.#kvEvents = kvEvents;
    this.tokenizer = tokenizer;
    this.model = model;
    this.#o = o;
    procs.onWorkerMessage = (rank, m) => {
      if (m.type === "token_delta") {
        if (kvEvents) { for (const it of m.items) kvEvents.requestTokens(it.requestId, it.tokenIds); }
        this.#inflight.onTokens(m.items);
      } else if (m.type === "finish") {
        if (kvEvents && m.output) kvEvents.requestOutput(m.requestId, m.output.tokenIds);
        if (this.#inflight.onFinish(m, rank)) {
          this.#procs.sendControl({ type: "route_release", requestId: m.requestId });
        }
      } else if (m.type === "stats" && m.rank !== undefined) {
        this.#rankStats.set(m.rank, m.counters as unknown as RankStats);
      }
    };
    procs.onWorkerDied = (rank, why) => this.#onWorkerDied(rank, why);
    if (kvEvents) {
      // The page table's changes feed the events; a restarted control plane is asked again.
      const subscribe = () => void procs.sendControl({ type: "kv_events_subscribe" });
      procs.onControlMessage = (m) => {
        if (m.type === "page_table_change") kvEvents.onPageTableChange(m);
      };
      procs.onControlConnected = subscribe;
      subscribe();
    }
    this.#statsTimer = setInterval(() => void this.#pollRouting(), 1000);
    (this.#statsTimer as { unref?: () => void }).unref?.();
  }

  /** Starts the control plane and every worker, and resolves once all are ready. */
  static async create(o: LLMEngineOptions): Promise<LLMEngine> {
    if (typeof o?.model !== "string" || o.model.length === 0) {
      throw new TypeError(`LLMEngine: model must be a model directory, got ${JSON.stringify(o?.model)}`);
    }
    const listed = Array.isArray(o.gpus) ? o.gpus : undefined;
    const worldSize = o.worldSize ?? listed?.length ?? (typeof o.gpus === "number" ? o.gpus : 1);
    if (!Number.isInteger(worldSize) || worldSize < 1) {
      throw new RangeError(`worldSize must be an integer >= 1, got ${worldSize}`);
    }
    const gpus = listed ?? Array.from({ length: worldSize }, (_, i) => i);
    if (gpus.length !== worldSize) throw new RangeError(`gpus lists ${gpus.length} devices for worldSize ${worldSize}`);
    for (const g of gpus) {
      if (!Number.isInteger(g) || g < 0) throw new RangeError(`gpus entries must be device indices, got ${g}`);
    }
    const log = o.log === null ? () => {} : (o.log ?? ((l: string) => console.error(l)));
    const spec = readModelSpec(o.model);
    const tokenizer = ModelTokenizer.fromDir(o.model, { eosTokenIds: spec.eosTokenIds });
    const topology = await resolveTopology(o.topology, gpus, log);
    const transfers = resolveTransferOptions(o.transfers, o.transferTuning); // validates before any process starts
    const {
      model: _m,
      worldSize: _w,
      gpus: _g,
      topology: _t,
      routing,
      transfers: _x,
      heartbeat,
      retryOnWorkerDeath: _r,
      restartControlPlane,
      restartWorkers,
      restartPolicy,
      startTimeoutMs,
      routeTimeoutMs: _rt,
      log: _l,
      transferTuning: _tt,
      workerMain,
      kvEvents,
      ...engine
    } = o;
    const kvPublishers = kvEventsEnabled(kvEvents) ? KvEventPublishers.open(kvEvents, worldSize) : undefined;
    if (kvPublishers) {
      for (const s of kvPublishers.describe()) {
        log(
          `[lmpool] KV events (${s.stream === "node" ? "node" : `rank ${s.stream}`}) on ${s.endpoint}${
            s.replayEndpoint ? `, replay on ${s.replayEndpoint}` : ""
          }`,
        );
      }
    }
    const procs = await EngineProcesses.start({
      worldSize,
      gpus,
      engine: { ...engine, model: o.model },
      pairs: topology.pairs.map(([a, b]) => [a, b] as [number, number]),
      routing,
      transfers,
      heartbeat,
      restartControlPlane: restartControlPlane ?? true,
      restartWorkers: restartWorkers ?? true,
      ...(restartPolicy ? { restartPolicy } : {}),
      startTimeoutMs: startTimeoutMs ?? 600_000,
      log,
      ...(workerMain !== undefined ? { workerMain } : {}),
    }).catch((e) => {
      kvPublishers?.dispose();
      throw e;
    });
    const first = procs.readyInfo(0);
    const model: ServedModelInfo = {
      name: spec.name,
      maxModelLen: first.maxModelLen ?? spec.maxModelLen,
      vocabSize: spec.native.vocabSize,
      blockSize: first.blockSize ?? 16,
      backend: first.backend ?? "cpu",
      numRanks: worldSize,
    };
    log(
      `[lmpool] ${worldSize} workers ready (${model.backend}, ${
        topology.pairs.length ? `direct pairs ${topology.describe()}` : "no direct pairs"
      }, routing ${routing?.policy ?? "lmpool"})`,
    );
    const kvService = kvPublishers && new KvEventService(kvPublishers, { blockSize: model.blockSize, log });
    return new LLMEngine(procs, tokenizer, model, o, log, kvService);
  }

  /** True while the engine accepts requests (some worker alive, not shut down). */
  get healthy(): boolean {
    return !this.#closed && this.#procs.liveRanks().length > 0;
  }

  /** Streams one request's deltas; the last has `finished` and the full `output`. */
  async *stream(
    input: PromptInput,
    params: Partial<SamplingParams> = {},
    options: RequestOptions = {},
  ): AsyncGenerator<StreamDelta> {
    // Only a constrained request waits here: submission stays synchronous for the rest.
    if (params.structuredOutput !== undefined) await checkStructuredOutput(params.structuredOutput);
    const r = this.#submit(input, params, options);
    let done = false;
    try {
      for await (const d of r.queue) {
        if (d.finished) done = true;
        yield d;
        if (done) return;
      }
    } finally {
      if (!done) this.abort(r.requestId);
    }
  }

  /** Runs requests to completion; outputs in input order. An aborted request ends with finishReason "abort". */
  async generate(...[inputs, params = {}, options = {}]: GenerateArgs): Promise<RequestOutput[]> {
    // Only a constrained request waits here: submission stays synchronous for the rest.
    if (params.structuredOutput !== undefined) await checkStructuredOutput(params.structuredOutput);
    const list = Array.isArray(inputs) ? inputs : [inputs];
    const started: InflightRequest[] = [];
    try {
      list.forEach((input, i) => {
        const requestId = options.requestId !== undefined && list.length > 1
          ? `${options.requestId}-${i}`
          : options.requestId;
        started.push(this.#submit(input, params, { ...options, requestId }));
      });
    } catch (e) {
      for (const r of started) this.abort(r.requestId);
      throw e;
    }
    return Promise.all(
      started.map(async (r) => {
        let out: RequestOutput | undefined;
        for await (const d of r.queue) if (d.output) out = d.output;
        if (!out) throw new Error(`request ${r.requestId} ended without an output`);
        return out;
      }),
    );
  }

  /** Aborts a request: its worker frees its blocks and its stream ends with finishReason "abort". */
  abort(requestId: string): void {
    const r = this.#inflight.get(requestId);
    if (!r) return;
    if (r.rank < 0) {
      r.abortRequested = true;
      return;
    }
    this.#procs.sendWorker(r.rank, { type: "abort", requestId });
  }

  /** Latest per-rank stats (pushed by workers) and routing counters (polled from the control plane). */
  stats(): EngineStats {
    const ranks = [...this.#rankStats.values()].sort((a, b) => a.rank - b.rank);
    const r = this.#routing;
    return {
      ranks,
      routing: { ...r, control_plane_restarts: this.#procs.controlRestarts },
      transfers: { count: r.transfer_completed ?? 0, blocks: r.transfer_blocks ?? 0, bytes: r.transfer_bytes ?? 0 },
      health: { ranks: this.#procs.health() },
    };
  }

  /** stats() after reading the control plane's counters now. */
  async currentStats(): Promise<EngineStats> {
    await this.#pollRouting();
    return this.stats();
  }

  /** The KV-event publisher when `kvEvents` enabled it (its streams, counters, flush). */
  get kvEvents(): KvEventService | undefined {
    return this.#kvEvents;
  }

  /** The process machinery (pids, kill hooks, page-table checks); for tests and tools. */
  get processes(): EngineProcesses {
    return this.#procs;
  }

  /** Aborts outstanding requests, stops every child process, and removes the sockets. Idempotent. */
  async shutdown(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#statsTimer);
    for (const r of this.#inflight.all()) {
      this.#inflight.fail(r, new AbortedError(`request ${r.requestId} aborted: the engine is shutting down`));
    }
    await this.#procs.stop();
    this.#kvEvents?.close();
  }

  /** Same as shutdown(). */
  dispose(): Promise<void> {
    return this.shutdown();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }

  #submit(input: PromptInput, params: Partial<SamplingParams>, options: RequestOptions): InflightRequest {
    if (this.#closed) throw new DisposedError("LLMEngine");
    if (options.signal?.aborted) {
      throw new AbortedError(`request ${options.requestId ?? "(new)"} was aborted before it started`, {
        cause: options.signal.reason,
      });
    }
    const promptTokenIds = this.#promptIds(input);
    const r = this.#inflight.add({
      requestId: options.requestId ?? `lmp-${this.#nextId++}`,
      promptTokenIds,
      sampling: resolveSamplingParams(params),
      blockHashes: prefixBlockHashes(promptTokenIds, this.model.blockSize, options.cacheSalt),
      cacheSalt: options.cacheSalt,
      sessionId: options.sessionId,
      arrivalTime: performance.timeOrigin + performance.now(),
    });
    const kv = this.#kvEvents;
    kv?.requestStarted(r.requestId, promptTokenIds, options.cacheSalt, r.blockHashes);
    const signal = options.signal;
    if (signal) {
      const onAbort = () => this.abort(r.requestId);
      signal.addEventListener("abort", onAbort, { once: true });
      r.onEnd = () => {
        signal.removeEventListener("abort", onAbort);
        kv?.requestEnded(r.requestId);
      };
    } else if (kv) r.onEnd = () => kv.requestEnded(r.requestId);
    void this.#routeAndDispatch(r);
    return r;
  }

  async #routeAndDispatch(r: InflightRequest): Promise<void> {
    let rank: number;
    try {
      rank = await this.#route(r);
    } catch (e) {
      this.#inflight.fail(r, e as Error);
      return;
    }
    if (!this.#inflight.has(r.requestId)) return; // failed or shut down meanwhile
    if (r.abortRequested) {
      this.#procs.sendControl({ type: "route_release", requestId: r.requestId });
      this.#inflight.abortLocally(r);
      return;
    }
    r.rank = rank;
    const sent = this.#procs.sendWorker(rank, {
      type: "dispatch",
      requestId: r.requestId,
      promptTokenIds: r.promptTokenIds,
      sampling: r.sampling,
      ...(r.cacheSalt ? { cacheSalt: r.cacheSalt } : {}),
      arrivalTime: r.arrivalTime,
    });
    if (!sent) this.#onRequestLost(r, `worker ${rank} is gone`);
  }

  /** The control plane's choice, or local least-outstanding routing while it is unavailable. */
  async #route(r: InflightRequest): Promise<number> {
    const live = this.#procs.liveRanks();
    if (live.length === 0) throw new WorkerDiedError(`no live worker to run ${r.requestId}`, -1);
    try {
      const res = await this.#procs.routeQuery(
        {
          type: "route_query",
          requestId: r.requestId,
          blockHashes: r.blockHashes,
          promptTokens: r.promptTokenIds.length,
          maxTokens: r.sampling.maxTokens,
          ...(r.sessionId ? { sessionId: r.sessionId } : {}),
        },
        this.#o.routeTimeoutMs ?? 5000,
      );
      if (this.#procs.liveRanks().includes(res.rank)) return res.rank;
    } catch (e) {
      if (e instanceof RemoteError && e.code === "capacity") throw new CapacityError(e.message);
      // Control plane down or restarting: route locally.
    }
    const counts = this.#inflight.countByRank();
    const alive = this.#procs.liveRanks();
    if (alive.length === 0) throw new WorkerDiedError(`no live worker to run ${r.requestId}`, -1);
    // Fewest requests in flight; ties rotate so a burst routed at once still spreads.
    const start = this.#fallbackCursor++ % alive.length;
    const order = [...alive.slice(start), ...alive.slice(0, start)];
    return order.reduce((best, x) => ((counts.get(x) ?? 0) < (counts.get(best) ?? 0) ? x : best));
  }

  #onWorkerDied(rank: number, why: string): void {
    this.#rankStats.delete(rank);
    this.#kvEvents?.rankDown(rank);
    for (const r of this.#inflight.onRank(rank)) this.#onRequestLost(r, why);
  }

  /**
   * A request's rank died. Before its first token it runs once more on a live rank; after that, or
   * when it was already retried or no rank serves, it fails saying why.
   */
  #onRequestLost(r: InflightRequest, why: string): void {
    const rank = r.rank;
    this.#procs.sendControl({ type: "route_release", requestId: r.requestId });
    const canRetry = (this.#o.retryOnWorkerDeath ?? true) && r.streamedTokens === 0 && !r.abortRequested;
    if (canRetry && r.retries === 0 && this.#procs.liveRanks().length > 0) {
      r.retries++;
      r.rank = -1;
      this.#log(`[lmpool] ${r.requestId}: worker ${rank} died before its first token; running it again on a live rank`);
      void this.#routeAndDispatch(r);
      return;
    }
    const after = r.streamedTokens > 0
      ? ` after ${r.streamedTokens} streamed tokens`
      : r.retries > 0
      ? " (its second attempt)"
      : this.#procs.liveRanks().length === 0
      ? "; no rank serves"
      : "";
    this.#inflight.fail(
      r,
      new WorkerDiedError(`worker ${rank} died while running ${r.requestId}${after}: ${why}`, rank),
    );
  }

  async #pollRouting(): Promise<void> {
    const counters = await this.#procs.controlStats().catch(() => undefined);
    if (counters) this.#routing = counters;
  }

  #promptIds(input: PromptInput): number[] {
    const ids = promptTokenIds(input, this.tokenizer, this.model.vocabSize);
    if (ids.length === 0) throw new RangeError("the prompt is empty");
    return ids;
  }
}
