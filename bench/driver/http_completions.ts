/**
 * Sends one workload request to an OpenAI-compatible server as a streaming /v1/completions call
 * (prompt as token ids or text) and observes it: a chunk with non-empty text counts as one token
 * event (for TTFT and ITL, as vLLM's benchmark counts them) and the output token count comes
 * from the final usage chunk (stream_options.include_usage), including cached prompt tokens
 * when the server reports usage.prompt_tokens_details.cached_tokens.
 * @module
 */
import type { FinishReason } from "../../lib/core/outputs.ts";
import type { WorkloadRequest } from "../workloads/types.ts";
import { type RequestObservation, startObservation } from "./request_record.ts";
import { readSseData } from "./sse_reader.ts";

/** Where and how to send. */
export interface HttpTarget {
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Temperature of requests that do not set one. */
  temperature: number;
}

interface CompletionChunk {
  choices?: { text?: string; finish_reason?: string | null }[];
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
  error?: { message?: string };
}

/** Fields added to one request's body, the phase its record is reported under, and who sees its text. */
export interface CompletionExtra {
  body: Record<string, unknown>;
  phase: string;
  /** Called with the whole output text and finish reason once the stream ends. */
  onText?: (text: string, finishReason: string) => void;
}

/** Sends `r` and observes its stream; never throws (failures land in `error`). */
export async function sendCompletion(
  target: HttpTarget,
  r: WorkloadRequest,
  now: () => number,
  dueMs: number,
  extra?: CompletionExtra,
): Promise<RequestObservation> {
  const obs = startObservation(r, dueMs, now());
  if (extra) obs.phase = extra.phase;
  let text = "";
  try {
    const body = {
      model: target.model,
      prompt: r.promptTokenIds ?? r.prompt,
      max_tokens: r.maxTokens,
      temperature: r.temperature ?? target.temperature,
      ignore_eos: r.ignoreEos ?? false,
      stream: true,
      stream_options: { include_usage: true },
      ...extra?.body,
    };
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (target.apiKey) headers.authorization = `Bearer ${target.apiKey}`;
    if (r.sessionId !== undefined) headers["x-session-id"] = r.sessionId;
    const res = await fetch(`${target.baseUrl.replace(/\/$/, "")}/v1/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
    });
    if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
    let reason: string | undefined;
    for await (const data of readSseData(res.body)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data) as CompletionChunk;
      if (chunk.error) throw new Error(`server error: ${chunk.error.message ?? JSON.stringify(chunk.error)}`);
      const choice = chunk.choices?.[0];
      if (choice?.text) {
        obs.tokenDeltas.push({ atMs: now(), tokens: 1 });
        if (extra?.onText) text += choice.text;
      }
      if (choice?.finish_reason) reason = choice.finish_reason;
      if (chunk.usage) {
        if (chunk.usage.prompt_tokens !== undefined) obs.promptTokens = chunk.usage.prompt_tokens;
        if (chunk.usage.completion_tokens !== undefined) obs.reportedOutputTokens = chunk.usage.completion_tokens;
        obs.cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
      }
    }
    obs.finishMs = now();
    if (reason === undefined) throw new Error("the stream ended without a finish_reason");
    extra?.onText?.(text, reason);
    obs.finishReason =
      (reason === "length" || reason === "stop" || reason === "abort" ? reason : "stop") as FinishReason;
    if (obs.finishReason === "abort") obs.error = "finished with reason abort";
  } catch (e) {
    obs.finishMs = now();
    obs.finishReason = "error";
    obs.error = e instanceof Error ? e.message : String(e);
  }
  return obs;
}
