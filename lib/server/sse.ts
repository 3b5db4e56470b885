/**
 * Server-sent events as OpenAI streams them: one `data: <json>\n\n` event per chunk, then
 * `data: [DONE]\n\n`. Cancelling the body (client disconnect) stops the producer and aborts the scope.
 * A stream that fails (the engine throws, e.g. its worker died) or that the server ends (request
 * timeout, shutdown) still ends well-formed: an OpenAI error event, the usage so far when the client
 * asked for it, then [DONE].
 * @module
 */
import { toApiError } from "./errors.ts";
import type { RequestScope } from "./lifecycle.ts";

const encoder = new TextEncoder();

/** One SSE event carrying `payload` as JSON. */
export function sseEvent(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

/** The terminating event of an OpenAI stream. */
export const SSE_DONE = "data: [DONE]\n\n";

/** Options of sseResponse. */
export interface SseOptions {
  /**
   * The chunk that closes a stream ended by an error: the usage so far, or undefined when the
   * client did not ask for usage (`stream_options.include_usage`).
   */
  usageSoFar?: () => unknown;
}

/** Streams `chunks` as SSE; an error mid-stream becomes an OpenAI error event before [DONE]. */
export function sseResponse(chunks: AsyncIterable<unknown>, scope: RequestScope, options: SseOptions = {}): Response {
  scope.streaming = true;
  const iterator = chunks[Symbol.asyncIterator]();
  let finished = false;
  const finish = () => {
    finished = true;
    scope.close();
  };
  const endWithError = (controller: ReadableStreamDefaultController<Uint8Array>, err: unknown) => {
    if (finished) return;
    // Stop the other choices of this request too; the producer may be parked on an engine that
    // does not answer, so it is closed without waiting for it.
    scope.abort(err);
    void Promise.resolve()
      .then(() => iterator.return?.())
      .catch(() => {});
    controller.enqueue(encoder.encode(sseEvent((scope.failure ?? toApiError(err)).body())));
    const usage = options.usageSoFar?.();
    if (usage !== undefined) controller.enqueue(encoder.encode(sseEvent(usage)));
    controller.enqueue(encoder.encode(SSE_DONE));
    controller.close();
    finish();
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      // The server ends the stream (timeout, shutdown) at once, whether or not the client is
      // reading: the events queue up behind what it has not read yet.
      void scope.failed.then((failure) => endWithError(controller, failure));
    },
    async pull(controller) {
      if (finished) return;
      let r: IteratorResult<unknown>;
      try {
        r = await iterator.next();
      } catch (err) {
        if (finished) return;
        if (scope.signal.aborted && !scope.failure) {
          // The client is gone; nobody reads an error event.
          try {
            controller.close();
          } catch {
            // already cancelled
          }
          finish();
          return;
        }
        endWithError(controller, err);
        return;
      }
      if (finished) return;
      if (r.done) {
        controller.enqueue(encoder.encode(SSE_DONE));
        controller.close();
        finish();
      } else {
        controller.enqueue(encoder.encode(sseEvent(r.value)));
      }
    },
    async cancel(reason) {
      scope.abort(reason ?? new Error("client disconnected"));
      finished = true;
      try {
        await iterator.return?.();
      } finally {
        finish();
      }
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
    },
  });
}
