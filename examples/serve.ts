/**
 * The OpenAI-compatible LMPool server: `bun run examples/serve.ts --help` (or `make serve`).
 * Without --model it serves the embedded random-weight demo model.
 * @module
 */
import process from "node:process";
import { parseServeArgs, SERVE_USAGE, type ServeCliOptions } from "../lib/server/cli.ts";
import { createServeEngine } from "../lib/server/engine_factory.ts";
import { shutdownOnSignal } from "../lib/server/lifecycle.ts";
import { DEMO_DEFAULT_CHAT_MAX_TOKENS, DEMO_MODEL_NAME, resolveModelDir } from "../lib/server/model_source.ts";
import { serve } from "../lib/server/serve.ts";

const log = (line: string) => process.stdout.write(`${line}\n`);

function fail(what: string, err: unknown, code: number): never {
  process.stderr.write(`serve: ${what}: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(code);
}

let cli: ServeCliOptions;
try {
  cli = parseServeArgs(process.argv.slice(2));
} catch (err) {
  fail("bad arguments (run with --help for the options)", err, 2);
}
if (cli.help) {
  process.stdout.write(SERVE_USAGE);
  process.exit(0);
}

try {
  const sink = { write: (t: string) => void process.stdout.write(t), isTTY: process.stdout.isTTY === true };
  const { dir, isDemo } = await resolveModelDir(cli.model, sink);
  log(`Loading ${dir} ...`);
  const loadStart = performance.now();
  const engine = await createServeEngine({ ...cli, modelDir: dir });
  const info = engine.model;
  log(`Loaded in ${((performance.now() - loadStart) / 1000).toFixed(1)} s: backend ${info.backend}, ${info.numRanks} rank(s), max_model_len ${info.maxModelLen}.`);
  const server = await serve({
    engine,
    host: cli.host,
    port: cli.port,
    apiKey: cli.apiKey,
    servedModelName: cli.servedModelName ?? (isDemo ? DEMO_MODEL_NAME : undefined),
    defaultChatMaxTokens: isDemo ? DEMO_DEFAULT_CHAT_MAX_TOKENS : undefined,
  });
  shutdownOnSignal(async (signal) => {
    log(`${signal}: draining (new requests get 503; in-flight ones finish) ...`);
    try {
      await server.close();
    } catch (err) {
      fail("shutdown failed", err, 1);
    }
    log("Shut down cleanly.");
    process.exit(0);
  });
  const demo = isDemo ? " [random-weight demo model: its text is random]" : "";
  log(`LMPool serving "${server.app.context.modelName}" at ${server.url} (OpenAI API under /v1; also /health, /metrics)${demo}`);
} catch (err) {
  fail("start-up failed", err, 1);
}
