/**
 * A node's KV events, end to end, in the launcher: the page table's changes (from the control
 * plane) update a mirror of every rank's blocks; the requests' token sequences fill the BlockBook;
 * every few milliseconds each stream turns what changed into one batch of vLLM-format events
 * (lib/kv_events/event_batch.ts) and publishes it over ZeroMQ.
 *
 * Granularity. By default there is one stream for the node, with pod semantics, because llm-d
 * indexes blocks per pod: a block is stored when its first copy appears on any rank and removed
 * when its last copy leaves, so a transfer between ranks changes nothing in it (inside the node
 * LMPool's own routing decides which rank serves). With `granularity: "rank"` there is one stream
 * per rank, as vLLM's data parallelism publishes: a copy is stored on its destination and a move
 * also removes it from its source; a rank that restarts (and rejoins empty) sends AllBlocksCleared.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import type { MessageOf } from "../protocol/messages.ts";
import { BlockBook } from "./block_book.ts";
import { encodeEventBatch } from "./event_batch.ts";
import { EventStream } from "./event_stream.ts";
import type { KvEventPublishers, StreamPublisher } from "./kv_event_publishers.ts";
import { PageTableMirror } from "./page_table_mirror.ts";
import { RequestChains } from "./request_chains.ts";
import "./page_table_messages.ts";

/** How long changes gather before a batch goes out: long enough that a move's two halves (two workers' deltas) meet in one batch. */
export const FLUSH_DELAY_MS = 20;
/** Unpinned blocks whose tokens the book keeps (for blocks published after their request ended). */
const DEFAULT_SPARE_BLOCKS = 16_384;

/** Options of a KvEventService. */
export interface KvEventServiceOptions {
  /** Tokens per KV block, as configured on the workers. */
  blockSize: number;
  /** Unpinned book entries kept (default 16384). */
  spareBlocks?: number;
  /** Gathering time before a batch (default {@link FLUSH_DELAY_MS}). */
  flushDelayMs?: number;
  /** Where a failed publish is reported (default console.error). */
  log?: (line: string) => void;
}

/** Counters of one stream. */
export interface KvEventStreamStats {
  stream: number | "node";
  endpoint: string;
  replayEndpoint: string | null;
  /** Sequence number of the last batch (-1 before the first). */
  lastSeq: number;
  /** Blocks announced and not removed. */
  announced: number;
  /** Changed blocks not yet announced (their tokens or parent not known yet, or a batch not yet sent). */
  pending: number;
}

interface Stream {
  readonly out: StreamPublisher;
  readonly events: EventStream;
}

/** Publishes a node's KV events. */
export class KvEventService {
  readonly publishers: KvEventPublishers;
  readonly #book: BlockBook;
  readonly #chains: RequestChains;
  readonly #mirror: PageTableMirror;
  readonly #streams: Stream[];
  #node: EventStream | undefined;
  readonly #byRank = new Map<number, EventStream>();
  readonly #delayMs: number;
  readonly #log: (line: string) => void;
  #publishErrors = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #batches = 0;
  #closed = false;

  constructor(publishers: KvEventPublishers, o: KvEventServiceOptions) {
    this.publishers = publishers;
    this.#delayMs = o.flushDelayMs ?? FLUSH_DELAY_MS;
    this.#log = o.log ?? ((line) => console.error(line));
    this.#book = new BlockBook(o.spareBlocks ?? DEFAULT_SPARE_BLOCKS);
    this.#chains = new RequestChains(this.#book, o.blockSize);
    this.#mirror = new PageTableMirror({
      rankChanged: (rank, hash) => this.#byRank.get(rank)?.touch(hash),
      nodeChanged: (hash, held) => {
        this.#node?.touch(hash);
        if (held) this.#book.pin(hash);
        else this.#book.unpin(hash);
      },
      rankCleared: (rank) => {
        this.#byRank.get(rank)?.cleared();
        this.#node?.cleared();
      },
    });
    const m = this.#mirror;
    this.#streams = publishers.streams.map((out) => {
      const rank = out.stream;
      const events = rank === "node"
        ? new EventStream(
          { holds: (h) => m.heldAnywhere(h), all: () => m.allHashes(), size: () => m.nodeSize },
          o.blockSize,
          { clearWhole: false },
        )
        : new EventStream(
          { holds: (h) => m.holds(rank, h), all: () => m.hashesOf(rank), size: () => m.rankSize(rank) },
          o.blockSize,
          { clearWhole: true },
        );
      if (rank === "node") this.#node = events;
      else this.#byRank.set(rank, events);
      return { out, events };
    });
    // A block the page table holds whose tokens arrive only now (a non-streaming request's output).
    this.#book.onRecorded = (hash) => {
      if (!m.heldAnywhere(hash)) return;
      this.#node?.touch(hash);
      for (const [rank, s] of this.#byRank) if (m.holds(rank, hash)) s.touch(hash);
      this.#schedule();
    };
  }

  // ---- the page table ----------------------------------------------------------------------

  /** Applies one forwarded page-table change. */
  onPageTableChange(m: MessageOf<"page_table_change">): void {
    if (this.#closed) return;
    if (m.dropped) this.#mirror.drop(m.rank);
    else if (m.full) this.#mirror.applyFull(m.rank, m.epoch, m.hashes, m.parents);
    else this.#mirror.applyDelta(m.rank, m.epoch, m.hashes, m.parents, m.removed);
    this.#schedule();
  }

  /** The launcher saw rank `rank`'s worker die: its blocks are gone (the control plane drops them too). */
  rankDown(rank: number): void {
    if (this.#closed) return;
    this.#mirror.drop(rank);
    this.#schedule();
  }

  // ---- requests ----------------------------------------------------------------------------

  /** A request was submitted with these prompt tokens (and block hashes, computed at ingress). */
  requestStarted(
    requestId: string,
    promptTokenIds: readonly number[],
    salt?: string,
    hashes?: readonly BlockHash[],
  ): void {
    this.#chains.start(requestId, promptTokenIds, salt, hashes);
  }

  /** Output tokens streamed back. */
  requestTokens(requestId: string, tokenIds: readonly number[]): void {
    this.#chains.append(requestId, tokenIds);
  }

  /** The request's whole output, from its finish. */
  requestOutput(requestId: string, outputTokenIds: readonly number[]): void {
    this.#chains.output(requestId, outputTokenIds);
  }

  /** The request left the launcher. */
  requestEnded(requestId: string): void {
    this.#chains.end(requestId);
  }

  // ---- batches -----------------------------------------------------------------------------

  /** Publishes every stream's pending changes now; returns the batches sent. */
  flush(): number {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#closed) return 0;
    let sent = 0;
    const ts = (performance.timeOrigin + performance.now()) / 1000;
    for (const s of this.#streams) {
      const events = s.events.flush(this.#book);
      if (events.length === 0) continue;
      // Events are advisory for routers: a socket that fails costs them this batch (a gap replay
      // cannot fill), never a request of this server.
      try {
        s.out.publisher.publish(encodeEventBatch(ts, events, s.out.dataParallelRank));
        sent++;
      } catch (e) {
        if (this.#publishErrors++ === 0) {
          this.#log(
            `[lmpool] KV events: publishing a batch failed (${(e as Error).message}); later failures are counted`,
          );
        }
      }
    }
    this.#batches += sent;
    return sent;
  }

  /** Per-stream counters. */
  stats(): {
    batches: number;
    publishErrors: number;
    bookEntries: number;
    requests: number;
    streams: KvEventStreamStats[];
  } {
    return {
      batches: this.#batches,
      publishErrors: this.#publishErrors,
      bookEntries: this.#book.size,
      requests: this.#chains.size,
      streams: this.#streams.map((s) => ({
        stream: s.out.stream,
        endpoint: s.out.publisher.boundEndpoint,
        replayEndpoint: s.out.publisher.boundReplayEndpoint,
        lastSeq: Number(s.out.publisher.lastSeq),
        announced: s.events.announcedSize,
        pending: s.events.pendingSize,
      })),
    };
  }

  /** Sends what is pending, then closes the sockets. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.publishers.dispose();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = setTimeout(() => this.flush(), this.#delayMs);
  }
}
