/**
 * Server-sent events as OpenAI streams them: one `data: <json>\n\n` event per chunk, then
 * `data: [DONE]\n\n`. Cancelling the body (client disconnect) stops the producer and aborts the scope.
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

/** Streams `chunks` as SSE; an error mid-stream becomes an OpenAI error event before [DONE]. */
export function sseResponse(chunks: AsyncIterable<unknown>, scope: RequestScope): Response {
  scope.streaming = true;
  const iterator = chunks[Symbol.asyncIterator]();
  let finished = false;
  const finish = () => {
    finished = true;
    scope.close();
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (finished) return;
      try {
        const r = await iterator.next();
        if (r.done) {
          controller.enqueue(encoder.encode(SSE_DONE));
          controller.close();
          finish();
        } else {
          controller.enqueue(encoder.encode(sseEvent(r.value)));
        }
      } catch (err) {
        if (scope.signal.aborted) {
          // The client is gone; nobody reads an error event.
          try {
            controller.close();
          } catch {
            // already cancelled
          }
          finish();
          return;
        }
        // Stop the other choices of this request too.
        scope.abort(err);
        controller.enqueue(encoder.encode(sseEvent(toApiError(err).body())));
        controller.enqueue(encoder.encode(SSE_DONE));
        controller.close();
        finish();
      }
    },
    async cancel(reason) {
      scope.abort(reason ?? new Error("client disconnected"));
      try {
        await iterator.return?.();
      } finally {
        finish();
      }
    },
  });
  return new Response(body, {
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-accel-buffering": "no" },
  });
}
