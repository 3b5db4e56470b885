// KV transfer between two worker-like processes, one per GPU: the test plays the control plane,
// relaying messages (the NCCL unique id, the CUDA IPC handle, "check these blocks") between two
// ranks of test/gpu/kv_transfer_peer_rank.ts. Covered: pair creation and warm-up, byte-exact
// send/recv both ways and both at once, back-to-back plans in order, a plan through NcclDataPath
// (the executor's data path), IPC push and pull, a send nobody receives timing out and being
// aborted, and a pair nobody joins failing with a timeout.
// The ranks are killed at a deadline, so a hang fails the test instead of stalling the run.
import { expect, test } from "bun:test";
import { KvTransferEngine } from "../../ffi/kv_transfer.ts";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();
function skipReason(): string | null {
  if ("skip" in backends) return backends.skip;
  if (backends.cuda.deviceCount() < 2) return `needs 2 CUDA devices, ${backends.cuda.deviceCount()} visible`;
  const v = new KvTransferEngine(backends.cuda).ncclVersion();
  return "unavailable" in v ? v.unavailable : null;
}
const skip = skipReason();
if (skip && !("skip" in backends)) console.log(`test/gpu/kv_transfer_peer: skipping, ${skip}`);

type Line = { to?: string; msg?: unknown; result?: string; ok?: boolean; detail?: string; done?: boolean };

const EXPECTED = [
  "rank 0: pair created and warmed",
  "rank 1: pair created and warmed",
  "rank 1: 0 -> 1 send/recv is byte-exact",
  "rank 0: 1 -> 0 send/recv is byte-exact",
  "rank 0: both directions at once are byte-exact",
  "rank 1: both directions at once are byte-exact",
  "rank 1: plans posted back to back match in order",
  "rank 1: NcclDataPath send/receive of a plan is byte-exact",
  "rank 0: CUDA IPC push (kernel) into the peer's cache",
  "rank 0: CUDA IPC push (copyEngineDirect) into the peer's cache",
  "rank 0: CUDA IPC push (copyEngine) into the peer's cache",
  "rank 0: CUDA IPC pull (kernel) from the peer's cache",
  "rank 0: a send nobody receives times out instead of hanging",
  "rank 0: its job fails after abort",
  "rank 0: the aborted pair disposes",
  "rank 1: pair aborted and disposed after the peer gave up",
  "rank 0: joining a pair nobody else joins fails with a timeout",
];

test.skipIf(skip !== null)(
  `two processes, one GPU each: NCCL pair, CUDA IPC, timeouts${skip ? ` (skipped: ${skip})` : ""}`,
  async () => {
    const script = new URL("./kv_transfer_peer_rank.ts", import.meta.url).pathname;
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
    const deadline = new Promise<"deadline">((resolve) => setTimeout(() => resolve("deadline"), 240_000));
    const outcome = await Promise.race([Promise.all([pump(0), pump(1), ranks[0]!.exited, ranks[1]!.exited]), deadline]);
    if (outcome === "deadline") { for (const p of ranks) p.kill(); }
    const summary = results.map((x) => `${x.ok ? "ok  " : "FAIL"} ${x.result}${x.detail ? ` (${x.detail})` : ""}`).join(
      "\n",
    );
    console.log(summary);
    expect(outcome === "deadline" ? `ranks still running after 240 s:\n${summary}` : "finished").toBe("finished");
    expect(done).toBe(2);
    expect(results.filter((x) => !x.ok).map((x) => `${x.result}: ${x.detail}`)).toEqual([]);
    expect(results.map((x) => x.result).sort()).toEqual([...EXPECTED].sort());
  },
  300_000,
);
