/**
 * `bun bench`: lists the benchmark entries with their descriptions; `bun bench <name> [args]`
 * runs one; `bun bench --quick` runs every available entry's quick (CPU, tiny model) form.
 * @module
 */
import { parseArgs } from "node:util";
import { BENCH_ENTRY_MODULES, loadEntries, loadEntry } from "./entries.ts";

const USAGE = `usage: bun bench                 list the entries
       bun bench <name> [args]    run one entry (most accept --quick and --help)
       bun bench --quick          run every entry's quick form`;

async function list(): Promise<void> {
  console.log(USAGE);
  console.log("\nentries:");
  for (const e of await loadEntries()) {
    console.log(`  ${e.name.padEnd(16)} ${"entry" in e ? e.entry.description : e.unavailable}`);
  }
}

async function runAllQuick(): Promise<number> {
  const outcomes: string[] = [];
  let failed = 0;
  for (const e of await loadEntries()) {
    if (!("entry" in e)) {
      outcomes.push(`  ${e.name.padEnd(16)} skipped (${e.unavailable})`);
      continue;
    }
    console.log(`\n=== ${e.name} --quick ===`);
    const t0 = performance.now();
    try {
      await e.entry.run(["--quick"]);
      outcomes.push(`  ${e.name.padEnd(16)} ok (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    } catch (err) {
      failed++;
      console.error(err);
      outcomes.push(`  ${e.name.padEnd(16)} FAILED: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  console.log(`\nquick run:\n${outcomes.join("\n")}`);
  return failed === 0 ? 0 : 1;
}

/** Runs the CLI with `argv` (the arguments after the script); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const first = argv[0];
  if (first === undefined) {
    await list();
    return 0;
  }
  if (first.startsWith("-")) {
    const { values } = parseArgs({
      args: argv,
      options: { quick: { type: "boolean" }, help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: false,
    });
    if (values.quick) return runAllQuick();
    await list();
    return 0;
  }
  const ref = BENCH_ENTRY_MODULES.find((e) => e.name === first);
  if (!ref) {
    console.error(
      `unknown benchmark entry ${JSON.stringify(first)}; entries: ${BENCH_ENTRY_MODULES.map((e) => e.name).join(", ")}`,
    );
    return 2;
  }
  const loaded = await loadEntry(ref);
  if (!("entry" in loaded)) {
    console.error(`${loaded.name}: ${loaded.unavailable}`);
    return 2;
  }
  try {
    await loaded.entry.run(argv.slice(1));
  } catch (e) {
    // Bad flags and values get one line; anything else keeps its stack.
    const code = (e as { code?: unknown }).code;
    if (e instanceof RangeError || (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS"))) {
      console.error(`bench ${first}: ${(e as Error).message} (see: bun bench ${first} --help)`);
      return 2;
    }
    throw e;
  }
  return 0;
}

if (import.meta.main) {
  const args = (globalThis as { process?: { argv: string[] } }).process?.argv.slice(2) ?? [];
  main(args).then(
    (code) => process.exit(code),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
