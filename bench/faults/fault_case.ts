/**
 * What a fault case is (name, description, extra server flags, a time bound, and the function that
 * injects its fault) and the context it runs in: the live server, its watcher, the background
 * load, and the calls that record what the case sends, checks and measures.
 * @module
 */
import type { LoadGenerator } from "./load.ts";
import type { FaultsOptions } from "./options.ts";
import type { Recovery } from "./recovery.ts";
import type { OutgoingRequest, RequestOutcome } from "./request_outcome.ts";
import type { LaunchedServer } from "./server_process.ts";
import type { ServerWatch } from "./server_watch.ts";

/** The context a case's run function gets. */
export interface CaseContext {
  readonly options: FaultsOptions;
  readonly server: LaunchedServer;
  readonly watch: ServerWatch;
  readonly load: LoadGenerator;
  /** True once the case ran past its time bound: it must stop injecting. */
  readonly expired: boolean;
  log(line: string): void;
  /** Sends a request outside the load; it counts in the case's figures. */
  send(req: OutgoingRequest): Promise<RequestOutcome>;
  check(name: string, ok: boolean, detail?: string): void;
  note(text: string): void;
  recovery(r: Recovery): void;
  /** The fault could not be set up (e.g. no transfer ever ran): the case reports "not run" with `reason`. */
  notRun(reason: string): void;
  /** The case kills the launcher itself at `at`: transport failures after it are severed, and no drain or leak check follows. */
  launcherKilledAt(at: number): void;
  /** Signals a server process by pid; refused (false) once the case expired, so a late case never signals a reused pid. */
  signal(pid: number, signal: NodeJS.Signals): boolean;
  /** Resolves after `ms`, early when the case expires. */
  sleep(ms: number): Promise<void>;
}

/** One case of the suite. */
export interface FaultCase {
  name: string;
  description: string;
  /** Server flags beyond --gpus/--backend/--port (e.g. --kv-transfers force). */
  serverArgs?(o: FaultsOptions): string[];
  /** Client loops of the background load (default: the suite's --concurrency). */
  concurrency?(o: FaultsOptions): number;
  /** The most the run function may take, in ms. */
  timeoutMs(o: FaultsOptions): number;
  run(ctx: CaseContext): Promise<void>;
}
