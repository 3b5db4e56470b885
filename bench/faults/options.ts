/**
 * Command-line options of `bun bench faults`, validated: a bad value is a RangeError that names
 * the flag and the value. --quick is the CI form: every wait, load and soak shortened.
 * @module
 */
import { parseArgs } from "node:util";
import { gpusOption, intOption } from "../cli_options.ts";

/** Settings of one suite run. */
export interface FaultsOptions {
  quick: boolean;
  backend: "cpu" | "cuda";
  /** --gpus as given to the server: a count ("2") or device ids with repeats ("0,0"). */
  gpus: string;
  /** Ranks the server runs (the count, or the list's length). */
  ranks: number;
  cases: string[];
  soakMinutes: number;
  /** Seconds between the soak's kills. */
  soakKillEverySec: number;
  out: string | undefined;
  /** --model for the server (a directory); absent: the server's embedded demo model. */
  model: string | undefined;
  /** Client loops of the background load. */
  concurrency: number;
  /** Client-side deadline of every load request. */
  deadlineMs: number;
  /** How long a server may take to print its ready line and serve a probe. */
  startTimeoutMs: number;
  /** How long a fault may take to be detected and served past. */
  recoveryTimeoutMs: number;
}

/** The --help text (`caseLines`: one line per case). */
function faultsHelp(caseLines: string[]): string {
  return `usage: bun bench faults [options]
  --quick                 CI form: short load, waits and soak (all cases unless --cases)
  --backend cpu|cuda      native backend of the server (default cpu)
  --gpus N|a,b            ranks: a count, or device ids with repeats (0,0: two ranks on device 0) (default 2)
  --cases a,b             run only these cases (default: all)
  --soak-minutes N        length of the soak case (default 10 on cpu, 3 on cuda, 1 with --quick)
  --concurrency N         client loops of the background load (default 4, --quick 3)
  --model DIR             model directory for the server (default: its embedded demo model)
  --out DIR               results directory (default bench/results/<UTC timestamp>)
cases:
${caseLines.map((l) => `  ${l}`).join("\n")}`;
}

/** Parses `argv`; `caseNames` are the known cases. Returns null for --help (after printing it with `log`). */
export function parseFaultsArgs(
  argv: string[],
  caseNames: readonly string[],
  caseLines: string[],
  log: (line: string) => void,
): FaultsOptions | null {
  const { values: a } = parseArgs({
    args: argv,
    options: {
      quick: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      backend: { type: "string" },
      gpus: { type: "string" },
      cases: { type: "string" },
      "soak-minutes": { type: "string" },
      concurrency: { type: "string" },
      model: { type: "string" },
      out: { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (a.help) {
    log(faultsHelp(caseLines));
    return null;
  }
  const quick = a.quick ?? false;
  const backend = a.backend ?? "cpu";
  if (backend !== "cpu" && backend !== "cuda") {
    throw new RangeError(`--backend must be cpu or cuda, got ${JSON.stringify(backend)}`);
  }
  const gpus = (a.gpus ?? "2").replace(/\s+/g, "");
  const ranks = gpusOption("gpus", gpus, 2).length;
  if (ranks < 2) {
    throw new RangeError(
      `--gpus must give at least 2 ranks (the cases kill one and watch the others serve), got ${
        JSON.stringify(a.gpus)
      }`,
    );
  }
  const cases = a.cases === undefined ? [...caseNames] : a.cases.split(",").map((s) => s.trim()).filter(Boolean);
  const unknown = cases.find((c) => !caseNames.includes(c));
  if (unknown !== undefined || cases.length === 0) {
    throw new RangeError(`--cases must name cases among ${caseNames.join(", ")}, got ${JSON.stringify(a.cases)}`);
  }
  if (a.model !== undefined && a.model.trim() === "") throw new RangeError("--model must not be empty");
  return {
    quick,
    backend,
    gpus,
    ranks,
    cases,
    soakMinutes: intOption("soak-minutes", a["soak-minutes"], quick ? 1 : backend === "cuda" ? 3 : 10),
    soakKillEverySec: quick ? 20 : 60,
    out: a.out,
    model: a.model,
    concurrency: intOption("concurrency", a.concurrency, quick ? 3 : 4),
    deadlineMs: quick ? 45_000 : 90_000,
    startTimeoutMs: 180_000,
    recoveryTimeoutMs: quick ? 45_000 : 90_000,
  };
}
