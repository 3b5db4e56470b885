/**
 * The background load every fault case runs under: a fixed number of client loops, each sending
 * one request after another to /v1/completions, cycling through a mix of short and long prompts,
 * streamed and not. Every request has a client-side deadline; stop() ends the loops and waits
 * for the requests in flight (each bounded by its deadline).
 * @module
 */
import { SeededRandom } from "../workloads/prng.ts";
import { type OutgoingRequest, type RequestOutcome, sendClassified } from "./request_outcome.ts";

/** One kind of request in the mix. */
export interface LoadKind {
  label: string;
  promptWords: number;
  maxTokens: number;
  stream: boolean;
}

/** The default mix: short and long prompts and outputs, streamed and not. */
const DEFAULT_MIX: readonly LoadKind[] = [
  { label: "short", promptWords: 12, maxTokens: 8, stream: false },
  { label: "short-stream", promptWords: 12, maxTokens: 16, stream: true },
  { label: "long-stream", promptWords: 300, maxTokens: 64, stream: true },
  { label: "long", promptWords: 300, maxTokens: 32, stream: false },
];

const WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point " +
  "government company number group problem fact river stone cloud garden engine signal market letter window").split(
    " ",
  );

/** `n` words of seeded plain text. */
export function promptText(rng: SeededRandom, n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(WORDS[rng.int(0, WORDS.length - 1)]!);
  return out.join(" ");
}

/** The body of a /v1/completions request. */
export function completionBody(
  model: string,
  prompt: string,
  maxTokens: number,
  stream: boolean,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    model,
    prompt,
    max_tokens: maxTokens,
    ignore_eos: true,
    temperature: 0.8,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
    ...extra,
  };
}

/** Pause of a client loop after a request that did not complete. */
const FAILURE_PAUSE_MS = 100;

/** Settings of one load run. */
export interface LoadOptions {
  baseUrl: string;
  model: string;
  concurrency: number;
  deadlineMs: number;
  seed?: number;
  mix?: readonly LoadKind[];
}

/** Client loops that keep the server busy; outcomes are kept in order of completion. */
export class LoadGenerator {
  readonly outcomes: RequestOutcome[] = [];
  #running = false;
  #loops: Promise<void>[] = [];
  #rng: SeededRandom;
  #next = 0;

  constructor(readonly options: LoadOptions) {
    this.#rng = new SeededRandom(options.seed ?? 1);
  }

  /** Requests sent so far. */
  get sent(): number {
    return this.#next;
  }

  /** Requests that completed so far. */
  completed(): number {
    return this.outcomes.filter((o) => o.kind === "completed").length;
  }

  /** Starts the client loops (no-op when running). */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    for (let i = 0; i < this.options.concurrency; i++) this.#loops.push(this.#loop());
  }

  /** Stops sending and resolves once every request in flight has ended (each within its deadline). */
  async stop(): Promise<RequestOutcome[]> {
    this.#running = false;
    await Promise.all(this.#loops.splice(0));
    return this.outcomes;
  }

  /** The next request of the mix. */
  nextRequest(): OutgoingRequest {
    const mix = this.options.mix ?? DEFAULT_MIX;
    const kind = mix[this.#next++ % mix.length]!;
    return {
      label: kind.label,
      path: "/v1/completions",
      body: completionBody(this.options.model, promptText(this.#rng, kind.promptWords), kind.maxTokens, kind.stream),
      stream: kind.stream,
      deadlineMs: this.options.deadlineMs,
    };
  }

  async #loop(): Promise<void> {
    while (this.#running) {
      const o = await sendClassified(this.options.baseUrl, this.nextRequest());
      this.outcomes.push(o);
      // A refusal (503 from a dead engine, a refused connection) returns at once: pace the loop so
      // a broken server is not spun on and the counts stay those of a load, not of a busy loop.
      if (o.kind !== "completed") await Bun.sleep(FAILURE_PAUSE_MS);
    }
  }
}
