/**
 * The OpenAI-compatible LMPool server: `bun run examples/serve.ts --help` (or `make serve`).
 * Without --model it serves the embedded random-weight demo model.
 *
 * Start-up binds the port first (a taken port fails before any model loads; /health answers 503
 * "loading" meanwhile), then loads the model and swaps the app in. Every start-up failure prints one
 * line naming the flag to change and exits non-zero.
 * @module
 */
import process from "node:process";
import { parseServeArgs, SERVE_USAGE, type ServeCliOptions } from "../lib/server/cli.ts";
import { createServeEngine } from "../lib/server/engine_factory.ts";
import { shutdownOnSignal } from "../lib/server/lifecycle.ts";
import { DEMO_DEFAULT_CHAT_MAX_TOKENS, DEMO_MODEL_NAME, resolveModelDir } from "../lib/server/model_source.ts";
import { listen, type ServerListener } from "../lib/server/serve.ts";
import { startupErrorLine } from "../lib/server/startup_errors.ts";
import { PortInUseError } from "../lib/runtime/http_server.ts";

const log = (line: string) => process.stdout.write(`${line}\n`);

function fail(what: string, line: string, code: number): never {
  process.stderr.write(`serve: ${what}: ${line}\n`);
  process.exit(code);
}

let cli: ServeCliOptions;
try {
  cli = parseServeArgs(process.argv.slice(2));
} catch (err) {
  fail("bad arguments (run with --help for the options)", startupErrorLine(err), 2);
}
if (cli.help) {
  process.stdout.write(SERVE_USAGE);
  process.exit(0);
}

let listener: ServerListener;
try {
  listener = await listen({ host: cli.host, port: cli.port, maxRequestBytes: cli.maxRequestBytes });
} catch (err) {
  if (err instanceof PortInUseError) {
    fail(
      "start-up failed",
      `--port ${cli.port} on ${cli.host} is in use; stop what holds it or pick another with --port (0 picks a free one)`,
      1,
    );
  }
  fail("start-up failed", `--host ${cli.host} --port ${cli.port}: cannot listen: ${startupErrorLine(err)}`, 1);
}
log(`Listening at ${listener.url} (loading: /health answers 503 until the model is ready)`);

try {
  const sink = { write: (t: string) => void process.stdout.write(t), isTTY: process.stdout.isTTY === true };
  const { dir, isDemo } = await resolveModelDir(cli.model, sink);
  log(`Loading ${dir} ...`);
  const loadStart = performance.now();
  const engine = await createServeEngine({ ...cli, modelDir: dir });
  const info = engine.model;
  log(
    `Loaded in ${
      ((performance.now() - loadStart) / 1000).toFixed(1)
    } s: backend ${info.backend}, ${info.numRanks} rank(s), max_model_len ${info.maxModelLen}.`,
  );
  let server;
  try {
    server = await listener.serve({
      engine,
      apiKey: cli.apiKey,
      servedModelName: cli.servedModelName ?? (isDemo ? DEMO_MODEL_NAME : undefined),
      defaultChatMaxTokens: isDemo ? DEMO_DEFAULT_CHAT_MAX_TOKENS : undefined,
      requestTimeoutSeconds: cli.requestTimeout,
      drainTimeoutSeconds: cli.drainTimeout,
      tokenizerDir: dir,
      tokenizerThreads: cli.tokenizerThreads,
      replyParsers: cli.replyParsers,
    });
  } catch (err) {
    await engine.shutdown();
    throw err;
  }
  const running = server;
  shutdownOnSignal(async (signal) => {
    log(`${signal}: draining for at most ${cli.drainTimeout} s (new requests get 503; in-flight ones finish) ...`);
    try {
      await running.close();
    } catch (err) {
      fail("shutdown failed", startupErrorLine(err), 1);
    }
    log("Shut down cleanly.");
    process.exit(0);
  });
  const demo = isDemo ? " [random-weight demo model: its text is random]" : "";
  log(
    `LMPool serving "${running.app.context.modelName}" at ${running.url} (OpenAI API under /v1; also /health, /metrics)${demo}`,
  );
} catch (err) {
  await listener.close().catch(() => {});
  fail("start-up failed", startupErrorLine(err), 1);
}
