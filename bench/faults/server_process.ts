/**
 * The real server under test: `bun run examples/serve.ts ...` as a subprocess, its start-up line
 * (`LMPool serving "<name>" at http://HOST:PORT ...`) parsed for the URL and model name, its
 * output kept for the report, and a stop that always leaves nothing behind: SIGKILL to the
 * launcher and to every descendant it had (workers and control plane included).
 * @module
 */
import { existsSync, rmSync } from "node:fs";
import { basename, dirname } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import {
  descendantsOf,
  listProcesses,
  parseWorkerCmdline,
  type ProcessInfo,
  signalPid,
  survivors,
} from "./process_tree.ts";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const READY_LINE = /LMPool serving "([^"]*)" at (http:\/\/\S+)/;
/** How long stop() lets the launcher drain on SIGTERM before it kills everything. */
const STOP_GRACE_MS = 3000;

/** Thrown when the server exits or stays silent before its ready line. */
export class ServerStartError extends Error {
  override readonly name = "ServerStartError";
}

/** A running examples/serve.ts process. */
export class LaunchedServer {
  #output = "";
  #known = new Map<number, ProcessInfo>();
  #socketDirs = new Set<string>();
  #exitCode: number | null = null;
  readonly exited: Promise<number>;

  private constructor(
    readonly proc: Bun.Subprocess<"ignore", "pipe", "pipe">,
    readonly args: readonly string[],
  ) {
    this.exited = proc.exited.then((code) => (this.#exitCode = code));
    const pump = async (s: ReadableStream<Uint8Array>) => {
      const dec = new TextDecoder();
      for await (const chunk of s) this.#output += dec.decode(chunk, { stream: true });
    };
    void pump(proc.stdout).catch(() => {});
    void pump(proc.stderr).catch(() => {});
  }

  /** Base URL, e.g. http://127.0.0.1:40333 (set once ready). */
  url = "";
  /** The model name clients send. */
  modelName = "";

  /** The launcher's pid. */
  get pid(): number {
    return this.proc.pid;
  }

  /** The exit code, or null while it runs. */
  get exitCode(): number | null {
    return this.#exitCode;
  }

  /** Everything it printed so far (stdout and stderr interleaved as they came). */
  output(): string {
    return this.#output;
  }

  /** The last `n` characters of its output. */
  outputTail(n = 2000): string {
    return this.#output.slice(-n);
  }

  /**
   * Spawns the server with `args` and resolves once it prints its ready line; a ServerStartError
   * (with the output) when it exits first or stays silent past `timeoutMs` (it is killed then).
   */
  static async start(args: readonly string[], timeoutMs: number): Promise<LaunchedServer> {
    const proc = Bun.spawn([process.execPath, "run", "examples/serve.ts", ...args], {
      cwd: REPO,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, NO_COLOR: "1" },
    });
    const server = new LaunchedServer(proc, args);
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      const m = READY_LINE.exec(server.#output);
      if (m) {
        server.modelName = m[1]!;
        server.url = m[2]!.replace(/\/$/, "");
        server.rememberTree();
        return server;
      }
      if (server.#exitCode !== null) {
        throw new ServerStartError(
          `server exited with ${server.#exitCode} before it was ready (args: ${
            args.join(" ")
          }):\n${server.outputTail()}`,
        );
      }
      await Bun.sleep(25);
    }
    await server.kill();
    throw new ServerStartError(
      `server printed no ready line within ${timeoutMs} ms (args: ${args.join(" ")}):\n${server.outputTail()}`,
    );
  }

  /** Records the launcher's current descendants, so that kill() reaches them even once orphaned. */
  rememberTree(): ProcessInfo[] {
    const tree = descendantsOf(this.pid, listProcesses());
    for (const p of tree) {
      this.#known.set(p.pid, p);
      const dir = parseWorkerCmdline(p.cmdline)?.socketDir;
      if (dir) this.#socketDirs.add(dir);
    }
    return tree;
  }

  /** Every descendant seen so far that is still alive (reparented ones included). */
  liveKnownDescendants(): ProcessInfo[] {
    return survivors([...this.#known.values()]);
  }

  /** Resolves with the exit code, or null when it still runs after `timeoutMs`. */
  async waitExit(timeoutMs: number): Promise<number | null> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)));
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILLs the launcher and every descendant it had; resolves once the launcher is reaped. Idempotent. */
  async kill(): Promise<void> {
    if (this.#exitCode === null) this.rememberTree();
    if (this.#exitCode === null) signalPid(this.pid, "SIGKILL");
    for (const p of this.liveKnownDescendants()) signalPid(p.pid, "SIGKILL");
    await this.waitExit(10_000);
  }

  /**
   * Ends the server, leaving nothing behind: SIGTERM and a short grace to drain, then kill(), then
   * the launcher's socket directories if it left them (only LMPool's own, under the temp dir).
   */
  async stop(): Promise<void> {
    if (this.#exitCode === null) {
      this.rememberTree();
      signalPid(this.pid, "SIGTERM");
      await this.waitExit(STOP_GRACE_MS);
    }
    await this.kill();
    for (const dir of this.#socketDirs) {
      if (dirname(dir) === tmpdir().replace(/\/$/, "") && basename(dir).startsWith("lmpool-") && existsSync(dir)) {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
}
