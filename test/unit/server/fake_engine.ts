// A small GenerationEngine test double for the server's unit tests: a character tokenizer
// (id = char code), and a generator that emits letters derived from the seed, one token per tick,
// stopping at stop token ids and one-letter stop strings (whose text it leaves out).
import type {
  ChatMessage,
  ChatRenderOptions,
  EngineStats,
  GenerationEngine,
  ServedModelInfo,
  TextTokenizer,
} from "../../../lib/core/engine_api.ts";
import type { PromptInput, RequestOptions, RequestOutput, StreamDelta } from "../../../lib/core/outputs.ts";
import { resolveSamplingParams, type SamplingParams } from "../../../lib/core/sampling_params.ts";

/** id = UTF-16 code unit; 0 is EOS. */
export class CharTokenizer implements TextTokenizer {
  readonly eosTokenIds = [0];
  encode(text: string): number[] {
    return [...text].map((c) => c.charCodeAt(0));
  }
  decode(ids: readonly number[]): string {
    return ids.filter((i) => i !== 0).map((i) => String.fromCharCode(i)).join("");
  }
  /** `<role>content` lines (with tool calls and call ids), the tools and variables first when given. */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatRenderOptions = {}): string {
    const head = (options.tools ? `<tools>${JSON.stringify(options.tools)}\n` : "") +
      (options.variables ? `<vars>${JSON.stringify(options.variables)}\n` : "");
    const lines = messages.map((m) =>
      `<${m.role}>${m.content}` + (m.tool_calls ? `<calls>${JSON.stringify(m.tool_calls)}` : "") +
      (m.tool_call_id ? `<id>${m.tool_call_id}` : "")
    );
    if (options.continueFinalMessage) return head + lines.join("\n");
    return head + lines.map((l) => `${l}\n`).join("") + (options.addGenerationPrompt ? "<assistant>" : "");
  }
}

/** What one stream() call received, for assertions. */
export interface RecordedRequest {
  promptTokenIds: number[];
  params: SamplingParams;
  options: RequestOptions;
  finishReason?: string;
}

export class FakeEngine implements GenerationEngine {
  readonly tokenizer = new CharTokenizer();
  readonly model: ServedModelInfo = {
    name: "fake-model",
    maxModelLen: 64,
    vocabSize: 256,
    blockSize: 4,
    backend: "cpu",
    numRanks: 1,
  };
  healthy = true;
  /** Delay per token in ms (0 = next microtask). */
  tokenDelayMs = 0;
  /**
   * A fixed reply instead of the seeded letters: one delta per piece (its characters as token
   * ids), finishing with "stop" after the last piece.
   */
  replyPieces: string[] | undefined;
  /** Throw this from stream() after the first token. */
  failAfterFirstToken: Error | undefined;
  /** After the first token, never yield again and ignore aborts (a hung worker). */
  hangAfterFirstToken = false;
  readonly requests: RecordedRequest[] = [];
  live = 0;
  private finished = 0;
  private generated = 0;
  private counter = 0;

  async *stream(
    input: PromptInput,
    params: Partial<SamplingParams> = {},
    options: RequestOptions = {},
  ): AsyncGenerator<StreamDelta> {
    const p = resolveSamplingParams(params);
    const promptTokenIds = typeof input === "string"
      ? this.tokenizer.encode(input)
      : "promptTokenIds" in input
      ? input.promptTokenIds
      : this.tokenizer.encode(input.prompt);
    const rec: RecordedRequest = { promptTokenIds, params: p, options };
    this.requests.push(rec);
    const requestId = options.requestId ?? `fake-${this.counter++}`;
    const arrivalTime = Date.now();
    if (this.replyPieces) {
      yield* this.#scripted(this.replyPieces, requestId, promptTokenIds, rec, arrivalTime);
      return;
    }
    this.live++;
    const tokenIds: number[] = [];
    let text = "";
    let finishReason: "stop" | "length" | "abort" = "length";
    try {
      for (let i = 0; i < p.maxTokens; i++) {
        await new Promise((r) => setTimeout(r, this.tokenDelayMs));
        if (options.signal?.aborted) {
          finishReason = "abort";
          break;
        }
        if (i === 1 && this.failAfterFirstToken) throw this.failAfterFirstToken;
        if (i === 1 && this.hangAfterFirstToken) await new Promise(() => {});
        // Letters a..z chosen by seed and position: different seeds give different text.
        const id = 97 + (((p.seed ?? 7) * 31 + i * 7 + promptTokenIds.length) % 26);
        tokenIds.push(id);
        this.generated++;
        const piece = String.fromCharCode(id);
        // Stop token ids and one-letter stop strings end it once min_tokens tokens came before.
        if (i >= p.minTokens && (p.stopTokenIds.includes(id) || p.stop.includes(piece))) {
          finishReason = "stop";
          break;
        }
        text += piece;
        const last = i === p.maxTokens - 1;
        const delta: StreamDelta = {
          requestId,
          tokenIds: [id],
          text: piece,
          finished: false,
          logprobs: p.logprobs ? [-0.5] : undefined,
        };
        if (last) break;
        yield delta;
      }
      // The final delta carries the last token (unless aborted) and the output.
      const lastId = finishReason === "abort" ? undefined : tokenIds[tokenIds.length - 1];
      const output: RequestOutput = {
        requestId,
        promptTokenIds,
        tokenIds,
        text,
        finishReason,
        logprobs: p.logprobs ? tokenIds.map(() => -0.5) : undefined,
        metrics: { arrivalTime, firstTokenTime: arrivalTime, finishTime: Date.now(), numCachedTokens: 0, rank: 0 },
      };
      rec.finishReason = finishReason;
      this.finished++;
      yield {
        requestId,
        tokenIds: lastId === undefined ? [] : [lastId],
        text: lastId === undefined || finishReason === "stop" ? "" : String.fromCharCode(lastId),
        logprobs: p.logprobs && lastId !== undefined ? [-0.5] : undefined,
        finished: true,
        finishReason,
        output,
      };
    } finally {
      this.live--;
      if (rec.finishReason === undefined) rec.finishReason = "abort";
    }
  }

  async *#scripted(
    pieces: string[],
    requestId: string,
    promptTokenIds: number[],
    rec: RecordedRequest,
    arrivalTime: number,
  ): AsyncGenerator<StreamDelta> {
    this.live++;
    try {
      const tokenIds: number[] = [];
      for (const [i, piece] of pieces.entries()) {
        await new Promise((r) => setTimeout(r, this.tokenDelayMs));
        const ids = this.tokenizer.encode(piece);
        tokenIds.push(...ids);
        this.generated += ids.length;
        const last = i === pieces.length - 1;
        if (!last) {
          yield { requestId, tokenIds: ids, text: piece, finished: false };
          continue;
        }
        rec.finishReason = "stop";
        this.finished++;
        const output: RequestOutput = {
          requestId,
          promptTokenIds,
          tokenIds,
          text: pieces.join(""),
          finishReason: "stop",
          metrics: { arrivalTime, firstTokenTime: arrivalTime, finishTime: Date.now(), numCachedTokens: 0, rank: 0 },
        };
        yield { requestId, tokenIds: ids, text: piece, finished: true, finishReason: "stop", output };
      }
    } finally {
      this.live--;
      if (rec.finishReason === undefined) rec.finishReason = "abort";
    }
  }

  async generate(
    inputs: PromptInput | PromptInput[],
    params?: Partial<SamplingParams>,
    options?: RequestOptions,
  ): Promise<RequestOutput[]> {
    const list = Array.isArray(inputs) ? inputs : [inputs];
    const outs: RequestOutput[] = [];
    for (const input of list) {
      for await (const d of this.stream(input, params, options)) if (d.output) outs.push(d.output);
    }
    return outs;
  }

  abort(): void {}

  stats(): EngineStats {
    const used = this.live;
    return {
      ranks: [
        {
          rank: 0,
          numRunning: this.live,
          numWaiting: 0,
          numBlocks: 100,
          blockSize: 4,
          numFreeBlocks: 100 - used,
          numReclaimableBlocks: 0,
          kvUsage: used / 100,
          prefixQueryTokens: 10,
          prefixHitTokens: 4,
          numFinished: this.finished,
          numGeneratedTokens: this.generated,
        },
      ],
      routing: { prefix_hit: 3, load_balance: 2 },
      transfers: { count: 1, blocks: 8, bytes: 4096 },
      health: { ranks: [{ rank: 0, up: this.healthy, restarts: 0 }] },
    };
  }

  async shutdown(): Promise<void> {
    this.healthy = false;
  }
}
