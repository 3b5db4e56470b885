/**
 * Start-up failures as one line that names the flag to change and how: the server's own checks
 * throw StartupError, and engine errors that name an option (maxModelLen) are rewritten to name its
 * flag (--max-model-len), so a user never reads a stack dump or an internal name.
 * @module
 */

/** A start-up failure caused by one flag's value (or the environment it points at). */
export class StartupError extends Error {
  override readonly name = "StartupError";
  constructor(
    readonly flag: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`${flag} ${message}`, options);
  }
}

/** Engine option names -> the serve flags that set them. */
const OPTION_FLAGS: Readonly<Record<string, string>> = {
  maxModelLen: "--max-model-len",
  blockSize: "--block-size",
  gpuMemoryUtilization: "--gpu-memory-utilization",
  maxNumSeqs: "--max-num-seqs",
  maxNumBatchedTokens: "--max-num-batched-tokens",
  longPrefillChunk: "--long-prefill-chunk",
  numBlocks: "--num-gpu-blocks-override",
  worldSize: "--gpus",
  maxRequestBytes: "--max-request-bytes",
  requestTimeoutSeconds: "--request-timeout",
};

/** `message` with every engine option name replaced by its flag. */
export function withFlagNames(message: string): string {
  // Only camelCase words: plain ones (gpus, routing) are also ordinary English in messages.
  return message.replace(/\b[a-z]+(?:[A-Z][a-z]*)+\b/g, (name) => OPTION_FLAGS[name] ?? name);
}

/** One line saying what failed at start-up and, where known, which flag to change. */
export function startupErrorLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const line = message.replace(/\s*\n\s*/g, "; ").trim();
  return err instanceof StartupError ? line : withFlagNames(line);
}
