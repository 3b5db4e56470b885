/**
 * How a finished choice ended, in vLLM's terms: `stop_reason` (the stop token id or stop string that
 * ended it; null for EOS, the length limit or an abort) and the text that
 * `include_stop_str_in_output` adds (the stop string, or the stop token's text). The engine reports
 * only "stop"; which stop it was follows from the last token and, for a stop string, from where the
 * choice's text ends in the decoded output.
 * @module
 */
import type { TextTokenizer } from "../core/engine_api.ts";
import type { FinishReason } from "../core/outputs.ts";
import type { SamplingParams } from "../core/sampling_params.ts";
import type { ServerContext } from "./context.ts";
import type { PromptTokenizer } from "./prompt_tokenizer.ts";

/** vLLM's stop_reason of one choice. */
export type StopReason = number | string | null;

/** What a finished choice reports about its end. */
export interface ChoiceEnding {
  stopReason: StopReason;
  /** Text to append to the choice (include_stop_str_in_output), else "". */
  includedText: string;
}

const NO_ENDING: ChoiceEnding = Object.freeze({ stopReason: null, includedText: "" });

/** What ending a choice needs from the server. */
export interface EndingContext {
  /** Synchronous decoding of one token (its text as the output shows it). */
  tokenizer: Pick<TextTokenizer, "decode" | "eosTokenIds">;
  /** Decoding of a whole output (off the main thread when it is long). */
  promptTokenizer: Pick<PromptTokenizer, "decode">;
  params: SamplingParams;
  includeStopStr: boolean;
}

/**
 * The stop string that ended a choice whose text is `text` and whose output decodes to `full`: the
 * one that starts earliest at or after the end of the text (the longer on a tie), as the engine's
 * matcher picks it.
 */
function matchedStopString(stops: readonly string[], full: string, text: string): string | null {
  let best: string | null = null;
  let at = -1;
  for (const s of stops) {
    const i = full.indexOf(s, text.length);
    if (i >= 0 && (at < 0 || i < at || (i === at && s.length > best!.length))) {
      at = i;
      best = s;
    }
  }
  return best ?? (stops.length === 1 ? stops[0]! : null);
}

/** The ending of a finished choice with output `tokenIds`, engine text `text` and finish `finish`. */
export async function choiceEnding(
  ctx: EndingContext,
  tokenIds: readonly number[],
  text: string,
  finish: FinishReason,
): Promise<ChoiceEnding> {
  const last = tokenIds.at(-1);
  if (finish !== "stop" || last === undefined) return NO_ENDING;
  const skipSpecialTokens = ctx.params.skipSpecialTokens;
  const tokenText = () => (ctx.includeStopStr ? ctx.tokenizer.decode([last], { skipSpecialTokens }) : "");
  if (!ctx.params.ignoreEos && ctx.tokenizer.eosTokenIds.includes(last)) {
    return { stopReason: null, includedText: tokenText() };
  }
  if (ctx.params.stopTokenIds.includes(last)) return { stopReason: last, includedText: tokenText() };
  if (ctx.params.stop.length === 0) return NO_ENDING;
  const full = await ctx.promptTokenizer.decode(tokenIds);
  const stop = matchedStopString(ctx.params.stop, full, text);
  return { stopReason: stop, includedText: ctx.includeStopStr && stop !== null ? stop : "" };
}

/** The ending context of a request of `ctx` with sampling `params`. */
export function endingContext(
  ctx: ServerContext,
  body: { include_stop_str_in_output?: boolean | null },
  params: SamplingParams,
): EndingContext {
  return {
    tokenizer: ctx.engine.tokenizer,
    promptTokenizer: ctx.tokenizer,
    params,
    includeStopStr: body.include_stop_str_in_output === true,
  };
}
