// Starts examples/serve.ts as a real subprocess and finds its URL from the start-up line.
import { fileURLToPath } from "node:url";
import { tinyModelDir } from "../helpers/tiny_model_dir.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));

/** A running server subprocess. */
export interface ServerProcess {
  url: string;
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Resolves with the exit code. */
  exited: Promise<number>;
}

/** Spawns `bun run examples/serve.ts ...args` and waits for "serving ... at http://...". */
export async function startServerProcess(args: string[], timeoutMs = 60_000): Promise<ServerProcess> {
  const proc = Bun.spawn([process.execPath, "run", "examples/serve.ts", ...args], {
    cwd: REPO,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_COLOR: "1" },
  });
  let out = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const dec = new TextDecoder();
    for await (const chunk of s) out += dec.decode(chunk, { stream: true });
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const m = /serving .* at (http:\/\/[^\s]+)/.exec(out);
    if (m) return { url: m[1]!, proc, output: () => out, exited: proc.exited };
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode} before listening:\n${out}`);
    await Bun.sleep(25);
  }
  proc.kill("SIGKILL");
  throw new Error(`server did not start within ${timeoutMs} ms:\n${out}`);
}

/** The tiny test model served on the CPU backend on a free port, with `args` after those. */
export async function startTinyServer(args: string[] = [], timeoutMs?: number): Promise<ServerProcess> {
  return startServerProcess(["--model", await tinyModelDir(), "--port", "0", "--backend", "cpu", ...args], timeoutMs);
}

/** Kills the server (when started and still running) and waits for it to exit: a suite's afterAll. */
export async function stopServerProcess(server: ServerProcess | undefined): Promise<void> {
  if (server && server.proc.exitCode === null) {
    server.proc.kill("SIGKILL");
    await server.exited;
  }
}

/** POSTs `body` as JSON to the server's `path`. */
export function postJson(server: ServerProcess, path: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** The value of the first sample of `name` whose labels include all of `labels`. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}
