/**
 * A benchmark entry: each bench/<name>.ts default-exports one, and bench/main.ts lists and runs
 * them (`bun bench`, `bun bench <name> [--quick] [args]`).
 * @module
 */

/** One runnable benchmark. */
export interface BenchEntry {
  /** Short name used on the command line, e.g. "throughput". */
  readonly name: string;
  /** One line: what it measures and against which ceiling. */
  readonly description: string;
  /** Runs with the remaining command-line arguments; `--quick` selects the CPU/tiny-model form. */
  run(argv: string[]): Promise<void>;
}
