/**
 * Sends one request and classifies how it ended, by the rule the fault suite counts with:
 * - completed: a 200 whose body (JSON, or an SSE stream ending in [DONE]) carries a finish reason
 *   of stop or length;
 * - clear error: an HTTP 4xx/5xx with an OpenAI error body, or a stream whose error event is
 *   followed by [DONE];
 * - lost: anything else: no answer by the client-side deadline, a connection reset, a stream that
 *   ends without [DONE], a 200 with a body that is not a well-formed answer;
 * - cancelled: the client hung up on purpose (a disconnect case), so there is nothing to judge.
 * @module
 */
import { readSseData } from "../driver/sse_reader.ts";

/** How one request ended. */
export type OutcomeKind = "completed" | "clear_error" | "lost" | "cancelled";

/** One request's ending and timings (performance.now() milliseconds). */
export interface RequestOutcome {
  kind: OutcomeKind;
  /** What was sent, e.g. "short-stream", "f2:temperature=1e308". */
  label: string;
  status: number | null;
  /** Why it counts as it does (the error message, or what was wrong). */
  detail: string;
  sentAt: number;
  firstTokenAt: number | null;
  endAt: number;
  /** True when the failure was at the transport (reset, refused), not an HTTP answer. */
  transport: boolean;
}

/** One request to send. */
export interface OutgoingRequest {
  label: string;
  path: string;
  /** A JSON value, or a raw string body (sent as is). */
  body: unknown;
  stream: boolean;
  deadlineMs: number;
  /** Aborting it is a deliberate client disconnect (the outcome is "cancelled"). */
  cancel?: AbortSignal;
  /** Called on the first streamed chunk that carries text. */
  onFirstToken?: () => void;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);

/** The message of an OpenAI error body ({"error": {"message": ...}}), or null when `x` is not one. */
function openAIErrorMessage(x: unknown): string | null {
  if (!isObject(x) || !isObject(x.error)) return null;
  return typeof x.error.message === "string" && x.error.message !== "" ? x.error.message : null;
}

/** The finish reason of a well-formed non-streamed completion, or null. */
function completionFinish(x: unknown): string | null {
  if (!isObject(x) || !Array.isArray(x.choices) || x.choices.length === 0) return null;
  const c = x.choices[0] as unknown;
  if (!isObject(c) || (typeof c.text !== "string" && !isObject(c.message))) return null;
  return typeof c.finish_reason === "string" ? c.finish_reason : null;
}

async function readStream(res: Response, req: OutgoingRequest, o: RequestOutcome): Promise<void> {
  let done = false;
  let error: string | null = null;
  let finish: string | null = null;
  for await (const data of readSseData(res.body!)) {
    if (done) {
      o.kind = "lost";
      o.detail = `data after [DONE]: ${data.slice(0, 120)}`;
      return;
    }
    if (data === "[DONE]") {
      done = true;
      continue;
    }
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      o.kind = "lost";
      o.detail = `stream event that is not JSON: ${data.slice(0, 120)}`;
      return;
    }
    const msg = openAIErrorMessage(chunk);
    if (msg !== null) error = msg;
    const choice = isObject(chunk) && Array.isArray(chunk.choices) ? (chunk.choices[0] as unknown) : undefined;
    if (isObject(choice)) {
      const text = typeof choice.text === "string"
        ? choice.text
        : isObject(choice.delta) && typeof choice.delta.content === "string"
        ? choice.delta.content
        : "";
      if (text !== "" && o.firstTokenAt === null) {
        o.firstTokenAt = performance.now();
        req.onFirstToken?.();
      }
      if (typeof choice.finish_reason === "string") finish = choice.finish_reason;
    }
  }
  if (!done) {
    o.kind = "lost";
    o.detail = error === null
      ? "the stream ended without [DONE]"
      : `error event (${error}) but the stream ended without [DONE]`;
  } else if (error !== null) {
    o.kind = "clear_error";
    o.detail = error;
  } else if (finish === "stop" || finish === "length") {
    o.kind = "completed";
    o.detail = finish;
  } else {
    o.kind = "lost";
    o.detail = `the stream ended with [DONE] but finish_reason ${JSON.stringify(finish)} and no error event`;
  }
}

async function readBody(res: Response, o: RequestOutcome): Promise<void> {
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    o.kind = "lost";
    o.detail = `HTTP ${res.status} with a body that is not JSON: ${text.slice(0, 120)}`;
    return;
  }
  if (res.status >= 400) {
    const msg = openAIErrorMessage(json);
    o.kind = msg === null ? "lost" : "clear_error";
    o.detail = msg === null ? `HTTP ${res.status} without an OpenAI error body: ${text.slice(0, 120)}` : msg;
    return;
  }
  const finish = completionFinish(json);
  const isTokenize = isObject(json) && (Array.isArray(json.tokens) || typeof json.count === "number");
  if (res.status === 200 && (finish === "stop" || finish === "length" || isTokenize)) {
    o.kind = "completed";
    o.detail = finish ?? "tokenized";
  } else {
    o.kind = "lost";
    o.detail = `HTTP ${res.status} that is not a finished answer (finish_reason ${JSON.stringify(finish)}): ${
      text.slice(0, 120)
    }`;
  }
}

/** Sends `req` to `baseUrl` and classifies its ending; never throws, never outlives its deadline. */
export async function sendClassified(baseUrl: string, req: OutgoingRequest): Promise<RequestOutcome> {
  const deadline = AbortSignal.timeout(req.deadlineMs);
  const signal = req.cancel ? AbortSignal.any([deadline, req.cancel]) : deadline;
  const o: RequestOutcome = {
    kind: "lost",
    label: req.label,
    status: null,
    detail: "",
    sentAt: performance.now(),
    firstTokenAt: null,
    endAt: 0,
    transport: false,
  };
  try {
    const res = await fetch(`${baseUrl}${req.path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: typeof req.body === "string" ? req.body : JSON.stringify(req.body),
      signal,
    });
    o.status = res.status;
    const sse = (res.headers.get("content-type") ?? "").includes("text/event-stream");
    if (res.status === 200 && sse && res.body) await readStream(res, req, o);
    else if (res.status === 200 && req.stream) {
      o.kind = "lost";
      o.detail = `a streaming request got a 200 that is not an event stream: ${(await res.text()).slice(0, 120)}`;
    } else await readBody(res, o);
  } catch (e) {
    if (req.cancel?.aborted) {
      o.kind = "cancelled";
      o.detail = "client disconnected on purpose";
    } else if (deadline.aborted) {
      o.kind = "lost";
      o.detail = `no complete answer within the ${req.deadlineMs} ms deadline`;
    } else {
      o.kind = "lost";
      o.transport = true;
      o.detail = `connection error: ${e instanceof Error ? e.message : String(e)}`;
    }
  }
  o.endAt = performance.now();
  return o;
}
