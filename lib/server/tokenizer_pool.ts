/**
 * A small pool of tokenizer threads (lib/model/tokenizer_thread.ts) with its own bounds: a fixed
 * number of threads, a bounded queue (a full one is a 503 at once), and a per-job time limit (a
 * thread past it is terminated and replaced, the job fails with a 503). Jobs of a request that went
 * away leave the queue without running.
 * @module
 */
import type { TokenizerThreadJob, TokenizerThreadReply } from "../model/tokenizer_thread.ts";
import { startThread, type Thread } from "../runtime/threads.ts";
import { unavailable } from "./errors.ts";

/** Threads of a pool unless told otherwise. */
export const DEFAULT_TOKENIZER_THREADS = 2;

/** Bounds of the pool. */
export interface TokenizerPoolOptions {
  /** Model directory with tokenizer.json (and tokenizer_config.json, chat_template.jinja). */
  dir: string;
  /** Threads (default 2). */
  threads?: number;
  /** Jobs waiting for a thread before new ones are refused with 503 (default 64). */
  maxQueue?: number;
  /** Longest one job may run on its thread (default 30 s). */
  jobTimeoutMs?: number;
  /** Longest start-up may take: every thread loads the tokenizer (default 60 s). */
  startTimeoutMs?: number;
  /** Where replacement threads report failures (default console.error). */
  log?: (line: string) => void;
}

/** A job without its id (the pool numbers them). */
export type PoolJob = WithoutEnvelope<TokenizerThreadJob>;
type WithoutEnvelope<J> = J extends unknown ? Omit<J, "id" | "type"> : never;

/** The result of a job: what the thread sent back. */
export type PoolResult = Extract<TokenizerThreadReply, { type: "done" } | { type: "failed" }>;

interface Pending {
  id: number;
  job: PoolJob;
  resolve(r: PoolResult): void;
  reject(e: unknown): void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

interface Slot {
  thread: Thread;
  ready: boolean;
  current?: Pending;
  timer?: ReturnType<typeof setTimeout>;
  onReady?: (r: TokenizerThreadReply) => void;
}

const THREAD_URL = new URL("../model/tokenizer_thread.ts", import.meta.url);

function positiveInt(name: string, v: number | undefined, fallback: number): number {
  const n = v ?? fallback;
  if (!Number.isInteger(n) || n < 1) {
    throw new RangeError(`TokenizerPool ${name} must be an integer >= 1, got ${String(v)}`);
  }
  return n;
}

/** Tokenizer threads behind one bounded queue. */
export class TokenizerPool {
  readonly threads: number;
  readonly maxQueue: number;
  readonly jobTimeoutMs: number;
  /** Most input characters one token stands for (Infinity when unbounded); see token_lengths.ts. */
  maxInputCharsPerToken = Infinity;
  readonly #dir: string;
  readonly #log: (line: string) => void;
  readonly #slots: Slot[] = [];
  readonly #queue: Pending[] = [];
  #nextId = 0;
  #closed = false;

  private constructor(o: TokenizerPoolOptions) {
    this.threads = positiveInt("threads", o.threads, DEFAULT_TOKENIZER_THREADS);
    this.maxQueue = positiveInt("maxQueue", o.maxQueue, 64);
    this.jobTimeoutMs = positiveInt("jobTimeoutMs", o.jobTimeoutMs, 30_000);
    this.#dir = o.dir;
    this.#log = o.log ?? ((l) => console.error(l));
  }

  /** Starts every thread and resolves once each has loaded the tokenizer. */
  static async start(o: TokenizerPoolOptions): Promise<TokenizerPool> {
    const pool = new TokenizerPool(o);
    const startTimeoutMs = positiveInt("startTimeoutMs", o.startTimeoutMs, 60_000);
    try {
      const ready = Array.from({ length: pool.threads }, (_, i) => pool.#spawn(i, i === 0));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`tokenizer threads did not load ${o.dir} within ${startTimeoutMs} ms`)),
          startTimeoutMs,
        );
      });
      await Promise.race([Promise.all(ready), timeout]).finally(() => clearTimeout(timer));
    } catch (e) {
      pool.close();
      throw e;
    }
    return pool;
  }

  /** Jobs waiting for a thread. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Runs one job on a free thread; 503 when the queue is full or the job runs too long. */
  run(job: PoolJob, signal?: AbortSignal): Promise<PoolResult> {
    if (this.#closed) {
      return Promise.reject(unavailable("The tokenizer pool is shut down"));
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#queue.length >= this.maxQueue) {
      return Promise.reject(
        unavailable(
          `The tokenizer is busy: ${this.#queue.length} jobs are waiting (the queue holds ${this.maxQueue}); retry later`,
          "TokenizerBusyError",
        ),
      );
    }
    return new Promise<PoolResult>((resolve, reject) => {
      const p: Pending = { id: this.#nextId++, job, resolve, reject, signal };
      if (signal) {
        p.onAbort = () => {
          const at = this.#queue.indexOf(p);
          if (at < 0) return; // already running: it finishes (or times out) on its thread
          this.#queue.splice(at, 1);
          reject(signal.reason);
        };
        signal.addEventListener("abort", p.onAbort, { once: true });
      }
      this.#queue.push(p);
      this.#dispatch();
    });
  }

  /** Terminates every thread; queued and running jobs fail with 503. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const gone = unavailable("The tokenizer pool is shut down");
    for (const slot of this.#slots) {
      clearTimeout(slot.timer);
      slot.thread.terminate();
      if (slot.current) this.#settle(slot.current, () => slot.current!.reject(gone));
    }
    for (const p of this.#queue.splice(0)) this.#settle(p, () => p.reject(gone));
  }

  #settle(p: Pending, fn: () => void): void {
    if (p.onAbort) p.signal?.removeEventListener("abort", p.onAbort);
    fn();
  }

  #spawn(index: number, measure: boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const slot: Slot = {
        ready: false,
        thread: startThread(THREAD_URL, {
          onMessage: (m) => this.#onMessage(slot, m as TokenizerThreadReply),
          onError: (e) => this.#onThreadError(index, slot, e),
        }),
      };
      slot.onReady = (m) => {
        slot.onReady = undefined;
        if (m.type === "ready") {
          if (m.maxInputCharsPerToken !== undefined) this.maxInputCharsPerToken = m.maxInputCharsPerToken;
          slot.ready = true;
          resolve();
          this.#dispatch();
        } else {
          reject(
            new Error(
              `tokenizer thread cannot load ${this.#dir}: ${m.type === "init_failed" ? m.message : "unexpected reply"}`,
            ),
          );
        }
      };
      this.#slots[index] = slot;
      slot.thread.post({ type: "init", dir: this.#dir, measure });
    });
  }

  #onMessage(slot: Slot, m: TokenizerThreadReply): void {
    if (slot.onReady) {
      slot.onReady(m);
      return;
    }
    if (m.type !== "done" && m.type !== "failed") return;
    const p = slot.current;
    if (!p || p.id !== m.id) return;
    clearTimeout(slot.timer);
    slot.current = undefined;
    this.#settle(p, () => p.resolve(m));
    this.#dispatch();
  }

  #onThreadError(index: number, slot: Slot, e: Error): void {
    if (slot.onReady) {
      slot.onReady({ type: "init_failed", message: e.message });
      return;
    }
    const p = slot.current;
    slot.current = undefined;
    if (p) this.#settle(p, () => p.reject(new Error(`tokenizer thread failed: ${e.message}`, { cause: e })));
    this.#replace(index, slot, `failed (${e.message})`);
  }

  /** Terminates a slot's thread and starts a fresh one in its place. */
  #replace(index: number, slot: Slot, why: string): void {
    clearTimeout(slot.timer);
    slot.thread.terminate();
    slot.ready = false;
    if (this.#closed) return;
    this.#log(`[lmpool] tokenizer thread ${index} ${why}; starting a new one`);
    this.#spawn(index, false).catch((err: unknown) => {
      this.#log(
        `[lmpool] tokenizer thread ${index} could not restart: ${err instanceof Error ? err.message : String(err)}`,
      );
      if (this.#slots.every((s) => !s.ready && !s.onReady)) {
        const down = unavailable("No tokenizer thread is running");
        for (const p of this.#queue.splice(0)) this.#settle(p, () => p.reject(down));
      }
    });
  }

  #dispatch(): void {
    for (const [index, slot] of this.#slots.entries()) {
      if (this.#queue.length === 0) return;
      if (!slot || !slot.ready || slot.current) continue;
      const p = this.#queue.shift()!;
      slot.current = p;
      slot.timer = setTimeout(() => {
        if (slot.current !== p) return;
        slot.current = undefined;
        this.#settle(
          p,
          () =>
            p.reject(
              unavailable(
                `Tokenization took longer than ${this.jobTimeoutMs} ms and was stopped`,
                "TokenizerTimeoutError",
              ),
            ),
        );
        this.#replace(index, slot, `ran a job past ${this.jobTimeoutMs} ms`);
      }, this.jobTimeoutMs);
      const transfer = p.job.op === "decode" ? [p.job.ids.buffer as ArrayBuffer] : undefined;
      slot.thread.post({ type: "job", id: p.id, ...p.job }, transfer);
    }
  }
}
