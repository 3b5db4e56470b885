// The two KV-event consumers of the system tests, behind one shape: the TypeScript one in this
// process (KvEventSubscriber + the independent decoder + BlockSets, polled on a timer) and the
// strict Python one (strict_consumer.py, Debian's python3-zmq and python3-msgpack) as a subprocess
// driven over stdin. Both rebuild one block set per stream.
import { fileURLToPath } from "node:url";
import type { ZmqContext } from "../../../ffi/zmq/zmq_socket.ts";
import { BlockSets } from "../../../lib/kv_events/subscriber/block_sets.ts";
import { decodeEventBatch, parseTopic } from "../../../lib/kv_events/subscriber/event_decoder.ts";
import { KvEventSubscriber } from "../../../lib/kv_events/subscriber/kv_event_subscriber.ts";

/** One stream to consume. */
export interface StreamSpec {
  name: string;
  endpoint: string;
  replay: string | null;
  /** data_parallel_rank its batches carry. */
  rank: number;
}

/** What both consumers check beyond the stream's own promises. */
export interface ConsumerExpectations {
  blockSize: number;
  pod: string;
  model: string;
  topicFilter: string;
}

/** A stream's rebuilt state. */
export interface StreamReport {
  lastSeq: number;
  /** Wire hashes as 16 hex digits, sorted. */
  blocks: string[];
  counts: Record<string, number>;
  replays: number;
}

const hex = (h: bigint) => h.toString(16).padStart(16, "0");

/** The in-process TypeScript consumer. */
export class TsConsumer {
  readonly streams: { spec: StreamSpec; sub: KvEventSubscriber; sets: BlockSets }[];
  readonly #timer: ReturnType<typeof setInterval>;
  /** The first rule a batch broke, if any (the consumer stops applying then). */
  error: Error | undefined;

  constructor(ctx: ZmqContext, specs: StreamSpec[], x: ConsumerExpectations, startSeq = 0n) {
    this.streams = specs.map((spec) => {
      const sets = new BlockSets({ blockSize: x.blockSize, dataParallelRank: spec.rank });
      const sub = new KvEventSubscriber(ctx, {
        endpoint: spec.endpoint,
        replayEndpoint: spec.replay,
        topicFilter: x.topicFilter,
        startSeq,
        onBatch: (b) => {
          if (this.error) return;
          try {
            const t = parseTopic(b.topic);
            if (t.pod !== x.pod || t.model !== x.model) {
              throw new Error(`topic ${b.topic} is not kv@${x.pod}@${x.model}`);
            }
            sets.apply(b.seq, decodeEventBatch(b.payload));
          } catch (e) {
            this.error = e as Error;
          }
        },
      });
      return { spec, sub, sets };
    });
    this.#timer = setInterval(() => this.poll(), 5);
  }

  /** Reads what is queued on every stream. */
  poll(): void {
    for (const s of this.streams) s.sub.poll();
  }

  /** Waits until every stream applied batch `lastSeq[name]` (and no replay runs), then reports. */
  async report(lastSeq: Record<string, number>, timeoutMs = 20_000): Promise<Record<string, StreamReport>> {
    const deadline = Date.now() + timeoutMs;
    const done = () =>
      this.streams.every((s) => !s.sub.replaying && Number(s.sub.lastSeq) >= (lastSeq[s.spec.name] ?? -1));
    while (!done() && !this.error) {
      if (Date.now() > deadline) throw new Error(`TS consumer did not reach ${JSON.stringify(lastSeq)}`);
      await Bun.sleep(10);
    }
    if (this.error) throw this.error;
    return Object.fromEntries(this.streams.map((s) => [s.spec.name, {
      lastSeq: Number(s.sub.lastSeq),
      blocks: [...s.sets.blocks.keys()].map(hex).sort(),
      counts: { ...s.sets.counts },
      replays: s.sub.counters.replays,
    }]));
  }

  /** Every stream's blocks with their tokens. */
  tokens(name: string): Map<bigint, number[]> {
    return this.streams.find((s) => s.spec.name === name)!.sets.blocks;
  }

  dispose(): void {
    clearInterval(this.#timer);
    for (const s of this.streams) s.sub.dispose();
  }
}

const CONSUMER_PY = fileURLToPath(new URL("./strict_consumer.py", import.meta.url));

/** The strict Python consumer as a subprocess. */
export class PythonConsumer {
  readonly #proc: Bun.Subprocess<"pipe", "pipe", "pipe">;
  readonly #lines: string[] = [];
  #out = "";
  #err = "";

  private constructor(proc: Bun.Subprocess<"pipe", "pipe", "pipe">) {
    this.#proc = proc;
    void (async () => {
      const dec = new TextDecoder();
      for await (const chunk of proc.stdout) {
        this.#out += dec.decode(chunk, { stream: true });
        let i;
        while ((i = this.#out.indexOf("\n")) >= 0) {
          this.#lines.push(this.#out.slice(0, i));
          this.#out = this.#out.slice(i + 1);
        }
      }
    })();
    void (async () => {
      const dec = new TextDecoder();
      for await (const chunk of proc.stderr) this.#err += dec.decode(chunk, { stream: true });
    })();
  }

  /** Starts it (resuming from `stateFile` when that exists) and waits for its ready line. */
  static async start(
    python: string,
    specs: StreamSpec[],
    x: ConsumerExpectations,
    stateFile: string,
  ): Promise<PythonConsumer> {
    const config = {
      streams: specs.map((s) => ({ name: s.name, endpoint: s.endpoint, replay: s.replay, rank: s.rank })),
      topic_filter: x.topicFilter,
      pod: x.pod,
      model: x.model,
      block_size: x.blockSize,
      state_file: stateFile,
    };
    const proc = Bun.spawn([python, CONSUMER_PY, JSON.stringify(config)], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const c = new PythonConsumer(proc);
    await c.#next(10_000);
    return c;
  }

  /** Waits until every stream applied batch `lastSeq[name]`, then returns its report. */
  async report(lastSeq: Record<string, number>, timeoutMs = 20_000): Promise<Record<string, StreamReport>> {
    this.#send(`dump ${Object.entries(lastSeq).map(([k, v]) => `${k}=${v}`).join(" ")}`);
    const r = await this.#next(timeoutMs) as { streams: Record<string, Record<string, unknown>> };
    return Object.fromEntries(
      Object.entries(r.streams).map(([name, s]) => [name, {
        lastSeq: s.last_seq as number,
        blocks: s.blocks as string[],
        counts: s.counts as Record<string, number>,
        replays: s.replays as number,
      }]),
    );
  }

  /** Saves its state file and exits (a subscriber that stops, to be restarted later). */
  async save(): Promise<void> {
    this.#send("save");
    await this.#next(10_000);
    await this.#proc.exited;
  }

  /** Ends it if it still runs. */
  async stop(): Promise<void> {
    if (this.#proc.exitCode === null) {
      this.#proc.kill("SIGKILL");
      await this.#proc.exited;
    }
  }

  #send(line: string): void {
    this.#proc.stdin.write(`${line}\n`);
    this.#proc.stdin.flush();
  }

  /** The next JSON line it prints; its error line or an early exit is thrown. */
  async #next(timeoutMs: number): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    let exitedAt: number | undefined;
    while (this.#lines.length === 0) {
      // Its last lines may still be in the pipe when the exit is seen: read on for a moment.
      if (this.#proc.exitCode !== null) exitedAt ??= Date.now();
      if (exitedAt !== undefined && Date.now() - exitedAt > 200) {
        throw new Error(`strict_consumer.py exited with ${this.#proc.exitCode}: ${this.#out}${this.#err}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`strict_consumer.py said nothing within ${timeoutMs} ms: ${this.#err}`);
      }
      await Bun.sleep(10);
    }
    const v = JSON.parse(this.#lines.shift()!) as Record<string, unknown>;
    if (typeof v.error === "string") throw new Error(`strict_consumer.py: ${v.error}`);
    return v;
  }
}
