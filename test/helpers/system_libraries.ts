// Optional system libraries of the test suites (libzmq, Debian's python3-zmq and python3-msgpack):
// where one is missing the suite that needs it skips and says why, except under CI=true, where
// .ci/run installs them and a skip would hide a suite that never ran: there the suite fails instead.
import { test } from "bun:test";
import { libzmqUnavailable } from "../../ffi/zmq/libzmq.ts";

/** True when the suite runs under CI=true, where skips fail. */
export const IN_CI = process.env.CI === "true";

/**
 * Registers the stand-in for a suite that cannot run: a skipped test naming the reason, or under
 * CI=true a failing one.
 */
export function unavailableSuite(suite: string, reason: string): void {
  if (IN_CI) {
    test(`${suite} (CI=true: it must run)`, () => {
      throw new Error(`${suite} cannot run: ${reason}. .ci/run installs libzmq5 python3-zmq python3-msgpack`);
    });
    return;
  }
  console.log(`${suite}: skipping, ${reason}`);
  test.skip(`skipped: ${suite}: ${reason}`, () => {});
}

/** Why libzmq does not load, or undefined when it does. */
export function libzmqMissing(): string | undefined {
  const why = libzmqUnavailable();
  return why === undefined ? undefined : `libzmq does not load (install libzmq5): ${why}`;
}

let python: { path: string } | { missing: string } | undefined;

/**
 * A Python 3 that imports zmq and msgpack: Debian's /usr/bin/python3 first (python3-zmq and
 * python3-msgpack install there, whatever python3 comes first on PATH), then python3 on PATH.
 */
export function pythonWithZmq(): { path: string } | { missing: string } {
  if (python) return python;
  const tried: string[] = [];
  for (const candidate of ["/usr/bin/python3", "python3"]) {
    try {
      const r = Bun.spawnSync([candidate, "-c", "import zmq, msgpack"], { stdout: "ignore", stderr: "pipe" });
      if (r.exitCode === 0) return (python = { path: candidate });
      tried.push(`${candidate}: ${r.stderr.toString().trim().split("\n").pop()}`);
    } catch (e) {
      tried.push(`${candidate}: ${(e as Error).message}`);
    }
  }
  return (python = {
    missing: `no python3 imports zmq and msgpack (install python3-zmq python3-msgpack); tried ${tried.join("; ")}`,
  });
}
