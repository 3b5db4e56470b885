/**
 * Which model the server loads: the --model directory, or the embedded demo model (random weights,
 * real Qwen3 tokenizer and chat template) generated once and cached, announced plainly as random.
 * @module
 */
import { ensureModel } from "../model/demo_model.ts";
import { byteProgress, type ProgressSink } from "./progress.ts";

/**
 * Chat max_tokens of the demo model when a request sets none: random weights almost never sample
 * EOS, so "the rest of the context" would mean thousands of tokens of noise.
 */
export const DEMO_DEFAULT_CHAT_MAX_TOKENS = 128;

/** What the server says when it serves the demo model. */
const DEMO_MODEL_NOTICE =
  "No --model given: serving LMPool's embedded demo model (Qwen3 architecture, real Qwen3 tokenizer and chat template, RANDOM WEIGHTS).\n" +
  "Its text is random: it shows the server works, not what a trained model says. Pass --model <hf-dir> for a real model.\n" +
  `Chat requests without max_tokens stop after ${DEMO_DEFAULT_CHAT_MAX_TOKENS} tokens on this model.`;

/** The served name of the demo model. */
export const DEMO_MODEL_NAME = "lmpool-demo";

/** The model directory to load, generating the demo model (with progress) when none was given. */
export async function resolveModelDir(
  model: string | undefined,
  sink: ProgressSink,
): Promise<{ dir: string; isDemo: boolean }> {
  if (model !== undefined) return { dir: model, isDemo: false };
  sink.write(`${DEMO_MODEL_NOTICE}\n`);
  const progress = byteProgress("Generating the demo model (once; cached)", sink);
  const dir = await ensureModel("demo", { onProgress: (written, total) => progress.update(written, total) });
  progress.done();
  return { dir, isDemo: true };
}
