/**
 * Child processes (Bun.spawn under Bun, Deno.Command under Deno) and process exit/signals: the
 * only place in lib/ that knows how each runtime starts and stops processes.
 * @module
 */
import { runtimeName } from "./env.ts";

/** How the child's stdout/stderr are wired. */
export type ChildOutput = "inherit" | "ignore" | "pipe";

/** Options of {@link spawnChild}. */
export interface SpawnOptions {
  /** Program and arguments, e.g. from {@link scriptCommand}. */
  cmd: readonly string[];
  env?: Record<string, string>;
  cwd?: string;
  stdout?: ChildOutput;
  stderr?: ChildOutput;
}

/** How a child ended. */
export interface ChildExit {
  /** Exit code, or null when killed by a signal. */
  code: number | null;
  signal: string | null;
}

/** A running child process. */
export interface ChildProcessHandle {
  readonly pid: number;
  /** Resolves once the child has exited. */
  readonly exited: Promise<ChildExit>;
  /** Piped stdout/stderr (only when "pipe" was asked). */
  readonly stdout: ReadableStream<Uint8Array> | undefined;
  readonly stderr: ReadableStream<Uint8Array> | undefined;
  /** Sends a signal (default SIGTERM); a no-op once exited. */
  kill(signal?: "SIGTERM" | "SIGKILL" | "SIGINT"): void;
}

interface BunSubprocess {
  pid: number;
  exited: Promise<number>;
  signalCode: string | null;
  exitCode: number | null;
  stdout: ReadableStream<Uint8Array> | number | undefined;
  stderr: ReadableStream<Uint8Array> | number | undefined;
  kill(signal?: string): void;
}
interface BunLike {
  spawn(
    o: { cmd: string[]; env?: Record<string, string>; cwd?: string; stdin: string; stdout: string; stderr: string },
  ): BunSubprocess;
}
interface DenoChild {
  pid: number;
  status: Promise<{ code: number; signal: string | null }>;
  stdout: ReadableStream<Uint8Array>;
  stderr: ReadableStream<Uint8Array>;
  kill(signal?: string): void;
}
interface DenoLike {
  args: string[];
  Command: new (
    cmd: string,
    o: {
      args: string[];
      env?: Record<string, string>;
      clearEnv?: boolean;
      cwd?: string;
      stdin: string;
      stdout: string;
      stderr: string;
    },
  ) => { spawn(): DenoChild };
  execPath(): string;
  readonly ppid: number;
  exit(code?: number): never;
  addSignalListener(signal: string, handler: () => void): void;
}
interface NodeProcessLike {
  argv: string[];
  readonly ppid: number;
  execPath: string;
  exit(code?: number): never;
  on(event: string, handler: () => void): void;
}

const g = globalThis as { Bun?: BunLike; Deno?: DenoLike; process?: NodeProcessLike };

/** Starts a child process. Throws TypeError for an empty command. */
export function spawnChild(options: SpawnOptions): ChildProcessHandle {
  const [program, ...args] = options.cmd;
  if (!program) throw new TypeError("spawnChild: cmd must name a program, got an empty array");
  const out = options.stdout ?? "inherit";
  const err = options.stderr ?? "inherit";
  if (runtimeName() === "deno" && g.Deno) {
    const denoIo = (o: ChildOutput) => (o === "pipe" ? "piped" : o === "ignore" ? "null" : "inherit");
    const child = new g.Deno.Command(program, {
      args,
      env: options.env,
      clearEnv: options.env !== undefined,
      cwd: options.cwd,
      stdin: "null",
      stdout: denoIo(out),
      stderr: denoIo(err),
    }).spawn();
    let done = false;
    const exited = child.status.then((s) => {
      done = true;
      return { code: s.signal ? null : s.code, signal: s.signal };
    });
    return {
      pid: child.pid,
      exited,
      stdout: out === "pipe" ? child.stdout : undefined,
      stderr: err === "pipe" ? child.stderr : undefined,
      kill: (signal = "SIGTERM") => {
        if (done) return;
        try {
          child.kill(signal);
        } catch {
          // exited between the check and the kill
        }
      },
    };
  }
  if (!g.Bun) throw new Error(`spawnChild: unsupported runtime "${runtimeName()}" (Bun or Deno required)`);
  const proc = g.Bun.spawn({
    cmd: [program, ...args],
    env: options.env,
    cwd: options.cwd,
    stdin: "ignore",
    stdout: out,
    stderr: err,
  });
  let done = false;
  const exited = proc.exited.then(() => {
    done = true;
    return { code: proc.signalCode ? null : proc.exitCode, signal: proc.signalCode };
  });
  return {
    pid: proc.pid,
    exited,
    stdout: out === "pipe" ? (proc.stdout as ReadableStream<Uint8Array>) : undefined,
    stderr: err === "pipe" ? (proc.stderr as ReadableStream<Uint8Array>) : undefined,
    kill: (signal = "SIGTERM") => {
      if (!done) proc.kill(signal);
    },
  };
}

/** The command that runs a TypeScript file with the current runtime (bun run / deno run -A). */
export function scriptCommand(scriptPath: string, args: readonly string[] = []): string[] {
  if (runtimeName() === "deno" && g.Deno) return [g.Deno.execPath(), "run", "-A", scriptPath, ...args];
  const exec = g.process?.execPath;
  if (!exec) throw new Error("scriptCommand: cannot find the runtime executable (process.execPath is unset)");
  return [exec, "run", scriptPath, ...args];
}

/** This process's command-line arguments after the script path. */
export function processArgs(): string[] {
  if (g.Deno) return [...g.Deno.args];
  return g.process?.argv.slice(2) ?? [];
}

/** Ends this process with `code`. */
export function exitProcess(code: number): never {
  if (g.Deno) return g.Deno.exit(code);
  if (g.process) return g.process.exit(code);
  throw new Error(`exitProcess: unsupported runtime "${runtimeName()}"`);
}

/** Runs `handler` on SIGTERM and SIGINT (e.g. to shut a worker down cleanly). */
export function onTerminationSignal(handler: (signal: "SIGTERM" | "SIGINT") => void): void {
  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    if (g.Deno) g.Deno.addSignalListener(sig, () => handler(sig));
    else g.process?.on(sig, () => handler(sig));
  }
}

/** This process's parent pid now (it changes when the parent dies and the process is re-parented). */
function parentPid(): number | undefined {
  return g.Deno?.ppid ?? g.process?.ppid;
}

/**
 * Runs `handler` once when this process's parent has gone (polled every `intervalMs`): a child
 * whose launcher was SIGKILLed must not live on as an orphan, even while its sockets look open.
 */
export function onParentExit(handler: () => void, intervalMs = 1000): void {
  const parent = parentPid();
  if (parent === undefined) return;
  const timer = setInterval(() => {
    if (parentPid() === parent) return;
    clearInterval(timer);
    handler();
  }, intervalMs);
  (timer as { unref?: () => void }).unref?.();
}
