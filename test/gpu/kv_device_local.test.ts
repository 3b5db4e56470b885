// The device-local copy at the FFI level: two worker-like processes on CUDA device 0, each with its
// own KV cache (test/gpu/kv_device_local_rank.ts). Rank 1 exports its cache; rank 0 maps it with
// CUDA IPC on the same device (no peer access to enable), pushes blocks into it with the copy
// engine (the data path's mode) and with the copy kernel, and pulls blocks back; after each copy
// both sides gather their blocks and the test compares the SHA-256 of the bytes (and the pattern
// written at the source). The test relays the ranks' messages and kills them at a deadline, so a
// hang fails the test instead of stalling the run. Skips (and says why) without a CUDA device.
import { expect, test } from "bun:test";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();
const skip = "skip" in backends ? backends.skip : null;
if (skip) console.log(`test/gpu/kv_device_local: skipping, ${skip}`);

type Line = { to?: string; msg?: unknown; result?: string; ok?: boolean; detail?: string; done?: boolean };

const EXPECTED = [
  "rank 0: maps the other rank's cache on the same device",
  "rank 0: push (copyEngineDirect): the destination's gathered blocks equal the source's",
  "rank 0: push (kernel): the destination's gathered blocks equal the source's",
  "rank 0: pull (copyEngineDirect): the gathered blocks equal the other rank's",
];

test.skipIf(skip !== null)(
  `two processes on one GPU: CUDA IPC of the other's cache, byte-exact copies both ways${
    skip ? ` (skipped: ${skip})` : ""
  }`,
  async () => {
    const script = new URL("./kv_device_local_rank.ts", import.meta.url).pathname;
    const ranks = [0, 1].map((r) =>
      Bun.spawn([process.execPath, script, String(r)], {
        env: { ...process.env, LMPOOL_BACKEND: "cuda" },
        stdin: "pipe",
        stdout: "pipe",
        stderr: "inherit",
      })
    );
    const results: Line[] = [];
    let done = 0;
    const pump = async (r: number) => {
      const decoder = new TextDecoder();
      let pending = "";
      for await (const chunk of ranks[r]!.stdout) {
        pending += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, nl);
          pending = pending.slice(nl + 1);
          if (!line.startsWith("{")) continue;
          const m = JSON.parse(line) as Line;
          if (m.to === "peer") {
            ranks[1 - r]!.stdin.write(JSON.stringify(m.msg) + "\n");
            ranks[1 - r]!.stdin.flush();
          } else if (m.result) {
            results.push(m);
          } else if (m.done) {
            done++;
          }
        }
      }
    };
    const deadline = new Promise<"deadline">((resolve) => setTimeout(() => resolve("deadline"), 120_000));
    const outcome = await Promise.race([Promise.all([pump(0), pump(1), ranks[0]!.exited, ranks[1]!.exited]), deadline]);
    if (outcome === "deadline") { for (const p of ranks) p.kill(); }
    const summary = results.map((x) => `${x.ok ? "ok  " : "FAIL"} ${x.result}${x.detail ? ` (${x.detail})` : ""}`).join(
      "\n",
    );
    console.log(summary);
    expect(outcome === "deadline" ? `ranks still running after 120 s:\n${summary}` : "finished").toBe("finished");
    expect(done).toBe(2);
    expect(results.filter((x) => !x.ok).map((x) => `${x.result}: ${x.detail}`)).toEqual([]);
    expect(results.map((x) => x.result).sort()).toEqual([...EXPECTED].sort());
  },
  180_000,
);
