/**
 * Command-line options of `bun run examples/serve.ts` (vLLM's flag names), parsed with
 * node:util parseArgs. Bad values throw RangeError naming the flag and the value.
 * @module
 */
import { parseGpuList } from "../core/gpu_list.ts";
import { parseRankPairs, type RankPair } from "../core/rank_pairs.ts";
import { parseArgs } from "node:util";
import { type KvEventsConfig, parseKvEventsConfig } from "../kv_events/kv_events_config.ts";
import { TRANSFER_MODES, type TransferModeSetting } from "../transfer/control/transfer_config.ts";
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from "./lifecycle.ts";
import { REASONING_PARSERS } from "./reasoning_parser.ts";
import { type ReplyParserSettings, replyParserSettingsOf } from "./reply_parsing.ts";
import { DEFAULT_MAX_REQUEST_BYTES } from "./request_body.ts";
import { MAX_TIMEOUT_SECONDS } from "./request_timeout.ts";
import { TOOL_CALL_PARSERS } from "./tool_call_parser.ts";
import { DEFAULT_TOKENIZER_THREADS } from "./tokenizer_pool.ts";

/** Parsed serve options. */
export interface ServeCliOptions {
  /** HF model directory; absent means the embedded random-weight demo model. */
  model?: string;
  /** A rank count (ranks on devices 0..n-1), or the device of each rank (repeats: ranks sharing a device). */
  gpus: number | number[];
  host: string;
  port: number;
  maxModelLen?: number;
  blockSize?: number;
  gpuMemoryUtilization?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  longPrefillChunk?: number;
  routingPolicy?: string;
  /** GPU pairs joined by NVLink, e.g. [[0, 1], [2, 3]]. */
  nvlinkPairs?: RankPair[];
  apiKey?: string;
  servedModelName?: string;
  backend?: "cpu" | "cuda";
  /** KV blocks per rank, overriding the memory-based sizing (vLLM's --num-gpu-blocks-override). */
  numGpuBlocksOverride?: number;
  /** KV transfers between ranks (default auto). */
  kvTransfers?: TransferModeSetting;
  /** KV events in vLLM's format over ZeroMQ (vLLM's --kv-events-config JSON). */
  kvEventsConfig?: KvEventsConfig;
  /** Largest request body in bytes. */
  maxRequestBytes: number;
  /** Time limit of every request in seconds (absent: none). */
  requestTimeout?: number;
  /** Longest SIGTERM drain in seconds before remaining requests are ended. */
  drainTimeout: number;
  /** Threads that tokenize and template large inputs. */
  tokenizerThreads: number;
  /** --reasoning-parser, --enable-auto-tool-choice, --tool-call-parser. */
  replyParsers: ReplyParserSettings;
  help: boolean;
}

/** The --help text. */
export const SERVE_USAGE = `Usage: bun run examples/serve.ts [options]     (or: make serve ARGS="...")

OpenAI-compatible server for LMPool. Without --model it serves an embedded demo model with
random weights (its text is random), generated once and cached.

Options:
  --model <dir>                     Hugging Face model directory (Qwen3 or Llama)
  --gpus <n|ids>                    Ranks to serve with, one replica each (default 1): a count n (devices
                                    0..n-1) or a comma list of device ids, repeats allowed (0,0: two
                                    ranks on device 0; one id alone needs a trailing comma: 3,)
  --host <addr>                     Address to listen on (default 127.0.0.1)
  --port <n>                        Port to listen on; 0 picks a free one (default 8000)
  --max-model-len <n>               Context length limit (default: the model's)
  --block-size <n>                  KV cache block size in tokens
  --gpu-memory-utilization <f>      Fraction of GPU memory for weights + KV cache, in (0, 1]
  --max-num-seqs <n>                Most sequences in one batch
  --max-num-batched-tokens <n>      Most tokens in one batch
  --long-prefill-chunk <n>          Prompt tokens per step long prompts share while others decode
                                    or short prompts wait (default 0: no limit)
  --routing-policy <name>           Request routing policy across GPUs
  --nvlink-pairs <a-b,c-d>          GPU pairs joined by NVLink, e.g. 0-1,2-3
  --api-key <key>                   Require 'Authorization: Bearer <key>' on /v1/*
  --served-model-name <name>        Model name clients use (default: the model's)
  --backend <cpu|cuda>              Native backend (default: CUDA when a GPU is found, else CPU)
  --num-gpu-blocks-override <n>     KV cache blocks per rank, instead of sizing from free memory
  --kv-transfers <off|auto|force>   KV transfers between ranks: off, auto (when they pay; default) or
                                    force (every valid candidate, for tests)
  --kv-events-config <json>         KV cache events over ZeroMQ as vLLM publishes them, e.g.
                                    '{"enable_kv_cache_events":true,"publisher":"zmq","topic":"kv@pod@model"}'
                                    (vLLM's fields; LMPool's own "granularity": "node" (default) or "rank")
  --max-request-bytes <n>           Largest request body; larger ones get 413 (default ${DEFAULT_MAX_REQUEST_BYTES})
  --request-timeout <s>             Time limit of every request; 504 after it (default: none). A client
                                    may shorten its own with the header x-request-timeout: <s>
  --drain-timeout <s>               On SIGTERM, longest wait for in-flight requests before they are
                                    ended with an error (default ${DEFAULT_DRAIN_TIMEOUT_SECONDS})
  --tokenizer-threads <n>           Threads that tokenize and template large inputs (default ${DEFAULT_TOKENIZER_THREADS})
  --reasoning-parser <name>         Split the reply's reasoning into \`reasoning\` (${
  REASONING_PARSERS.join(", ")
}: <think>...</think>)
  --enable-auto-tool-choice         Parse tool calls of requests with tools and tool_choice "auto"
  --tool-call-parser <name>         The tool-call format (${
  TOOL_CALL_PARSERS.join(", ")
}: <tool_call>{json}</tool_call>, Qwen3's)
  -h, --help                        Show this help
`;

function integer(flag: string, v: string | undefined, min: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === "" || !Number.isSafeInteger(n) || n < min) {
    throw new RangeError(`--${flag} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  }
  return n;
}

function fraction(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === "" || !(n > 0 && n <= 1)) {
    throw new RangeError(`--${flag} must be a number in (0, 1], got ${JSON.stringify(v)}`);
  }
  return n;
}

function seconds(flag: string, v: string | undefined, min: number, minInclusive: boolean): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  const ok = v.trim() !== "" && Number.isFinite(n) && (minInclusive ? n >= min : n > min) && n <= MAX_TIMEOUT_SECONDS;
  if (!ok) {
    throw new RangeError(
      `--${flag} must be a number of seconds ${minInclusive ? ">=" : ">"} ${min} and <= ${MAX_TIMEOUT_SECONDS}, got ${
        JSON.stringify(v)
      }`,
    );
  }
  return n;
}

/** Parses --gpus: a rank count ("2") or a comma list of device ids with repeats ("0,0", "3,"). */
function parseGpus(v: string): number | number[] {
  return parseGpuList("gpus", v);
}

/** Parses serve's command line (without the runtime and script arguments). */
export function parseServeArgs(argv: readonly string[]): ServeCliOptions {
  const { values, positionals } = parseArgs({
    args: [...argv],
    strict: true,
    allowPositionals: true,
    options: {
      model: { type: "string" },
      gpus: { type: "string" },
      host: { type: "string" },
      port: { type: "string" },
      "max-model-len": { type: "string" },
      "block-size": { type: "string" },
      "gpu-memory-utilization": { type: "string" },
      "max-num-seqs": { type: "string" },
      "max-num-batched-tokens": { type: "string" },
      "long-prefill-chunk": { type: "string" },
      "routing-policy": { type: "string" },
      "nvlink-pairs": { type: "string" },
      "api-key": { type: "string" },
      "served-model-name": { type: "string" },
      backend: { type: "string" },
      "num-gpu-blocks-override": { type: "string" },
      "kv-transfers": { type: "string" },
      "kv-events-config": { type: "string" },
      "max-request-bytes": { type: "string" },
      "request-timeout": { type: "string" },
      "drain-timeout": { type: "string" },
      "tokenizer-threads": { type: "string" },
      "reasoning-parser": { type: "string" },
      "enable-auto-tool-choice": { type: "boolean" },
      "tool-call-parser": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (positionals.length > 0) throw new RangeError(`unexpected argument ${JSON.stringify(positionals[0])}; see --help`);
  const backend = values.backend;
  if (backend !== undefined && backend !== "cpu" && backend !== "cuda") {
    throw new RangeError(`--backend must be cpu or cuda, got ${JSON.stringify(backend)}`);
  }
  const kvTransfers = values["kv-transfers"];
  if (kvTransfers !== undefined && !(TRANSFER_MODES as readonly string[]).includes(kvTransfers)) {
    throw new RangeError(
      `--kv-transfers must be one of ${TRANSFER_MODES.join(", ")}, got ${JSON.stringify(kvTransfers)}`,
    );
  }
  const port = integer("port", values.port, 0) ?? 8000;
  if (port > 65535) throw new RangeError(`--port must be at most 65535, got ${port}`);
  for (
    const [flag, v] of [["model", values.model], ["host", values.host], ["api-key", values["api-key"]], [
      "served-model-name",
      values["served-model-name"],
    ]] as const
  ) {
    if (v !== undefined && v.trim() === "") throw new RangeError(`--${flag} must not be empty`);
  }
  return {
    model: values.model,
    gpus: values.gpus === undefined ? 1 : parseGpus(values.gpus),
    host: values.host ?? "127.0.0.1",
    port,
    maxModelLen: integer("max-model-len", values["max-model-len"], 1),
    blockSize: integer("block-size", values["block-size"], 1),
    gpuMemoryUtilization: fraction("gpu-memory-utilization", values["gpu-memory-utilization"]),
    maxNumSeqs: integer("max-num-seqs", values["max-num-seqs"], 1),
    maxNumBatchedTokens: integer("max-num-batched-tokens", values["max-num-batched-tokens"], 1),
    longPrefillChunk: integer("long-prefill-chunk", values["long-prefill-chunk"], 0),
    routingPolicy: values["routing-policy"],
    nvlinkPairs: values["nvlink-pairs"] === undefined
      ? undefined
      : parseRankPairs(values["nvlink-pairs"], "--nvlink-pairs"),
    apiKey: values["api-key"],
    servedModelName: values["served-model-name"],
    backend,
    numGpuBlocksOverride: integer("num-gpu-blocks-override", values["num-gpu-blocks-override"], 1),
    kvTransfers: kvTransfers as TransferModeSetting | undefined,
    ...(values["kv-events-config"] !== undefined
      ? { kvEventsConfig: parseKvEventsConfig(values["kv-events-config"]) }
      : {}),
    maxRequestBytes: integer("max-request-bytes", values["max-request-bytes"], 1) ?? DEFAULT_MAX_REQUEST_BYTES,
    requestTimeout: seconds("request-timeout", values["request-timeout"], 0, false),
    drainTimeout: seconds("drain-timeout", values["drain-timeout"], 0, true) ?? DEFAULT_DRAIN_TIMEOUT_SECONDS,
    tokenizerThreads: integer("tokenizer-threads", values["tokenizer-threads"], 1) ?? DEFAULT_TOKENIZER_THREADS,
    replyParsers: replyParserSettingsOf({
      reasoningParser: values["reasoning-parser"],
      enableAutoToolChoice: values["enable-auto-tool-choice"],
      toolCallParser: values["tool-call-parser"],
    }),
    help: values.help ?? false,
  };
}
