/**
 * One rank of the device-local scenario of kv_device_local.test.ts (not a test file):
 * `bun test/gpu/kv_device_local_rank.ts <rank>`; both ranks run on CUDA device 0, each with its own
 * KV cache. Rank 1 exports its cache and answers requests (fill blocks with a pattern, or gather
 * blocks and report their SHA-256 and pattern mismatches); rank 0 maps rank 1's cache with CUDA IPC
 * on the same device and copies into it (push) and out of it (pull) with the modes the data path
 * uses, then compares the gathered bytes of both sides. Messages to the other rank go out on stdout
 * as {"to": "peer", "msg": ...} and come in on stdin, relayed by the test; results go out as
 * {"result", "ok", "detail"}.
 * @module
 */
import { createHash } from "node:crypto";
import { createInterface } from "node:readline";
import { KvTransferEngine, type PeerCopyModeName } from "../../ffi/kv_transfer.ts";
import { native } from "../../ffi/native.ts";
import { tinyConfig } from "../helpers/random_model.ts";

type Msg = Record<string, unknown>;
const rank = Number(process.argv[2]) as 0 | 1;

const inbox: Msg[] = [];
let wake: (() => void) | null = null;
createInterface({ input: process.stdin }).on("line", (line) => {
  inbox.push(JSON.parse(line) as Msg);
  wake?.();
});
async function recv(): Promise<Msg> {
  while (inbox.length === 0) await new Promise<void>((r) => (wake = r));
  return inbox.shift()!;
}
const out = (x: Msg) => process.stdout.write(JSON.stringify(x) + "\n");
const send = (msg: Msg) => out({ to: "peer", msg });
const report = (result: string, ok: boolean, detail = "") => out({ result: `rank ${rank}: ${result}`, ok, detail });
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const unhex = (s: unknown) => new Uint8Array(Buffer.from(String(s), "hex"));

const lib = native();
lib.setDevice(0); // both ranks: one device
const xfer = new KvTransferEngine(lib);
// 4 layers x 8 heads x 128 x 256 tokens: 512 KiB chunks, 4 MiB blocks.
const model = lib.createModel(
  tinyConfig({ arch: "qwen3", tie: true, seed: 1, numLayers: 4, numHeads: 8, numKvHeads: 8, headDim: 128 }),
);
const NUM_BLOCKS = 64;
const kv = model.createKvCache(NUM_BLOCKS, 256);
const SEND = [5, 17, 3, 60, 33, 12, 0];
const RECV = [8, 40, 13, 2, 63, 31, 44];

/** SHA-256 of blocks `ids` of this rank's cache, gathered in that order (all layers, K and V). */
const digest = (ids: number[]) => createHash("sha256").update(kv.gather(Int32Array.from(ids))).digest("hex");

function waitOk(job: { waitSync(ms: number): boolean }, what: string): void {
  if (!job.waitSync(20_000)) throw new Error(`${what}: not complete after 20 s`);
}

/** Rank 1: exports its cache, then serves fill and check requests until told it is done. */
async function destination(): Promise<void> {
  send({ ipc: hex(xfer.exportKv(kv)) });
  for (;;) {
    const m = await recv();
    const ids = m.ids as number[];
    if (m.fill) {
      xfer.fillPattern(kv, ids, BigInt(String(m.seed)));
      send({ digest: digest(ids) });
    } else if (m.check) {
      send({ digest: digest(ids), mismatches: xfer.countPatternMismatches(kv, ids, BigInt(String(m.seed))) });
    } else if (m.done) return;
  }
}

/** Rank 0: maps rank 1's cache on the same device, pushes into it and pulls from it. */
async function source(): Promise<void> {
  const ask = async (msg: Msg) => (send(msg), await recv());
  const view = xfer.openRemoteKv(unhex((await recv()).ipc), kv, NUM_BLOCKS);
  report("maps the other rank's cache on the same device", true);
  let seed = 500n;
  for (const mode of ["copyEngineDirect", "kernel"] as PeerCopyModeName[]) {
    seed += 2n;
    // The destination's blocks hold another pattern first, so a copy that did nothing shows.
    const before = String((await ask({ fill: true, ids: RECV, seed: String(seed + 1n) })).digest);
    xfer.fillPattern(kv, SEND, seed);
    const mine = digest(SEND);
    using job = xfer.peerCopy(kv, SEND, view, RECV, mode);
    waitOk(job, `push ${mode}`);
    const theirs = await ask({ check: true, ids: RECV, seed: String(seed) });
    report(
      `push (${mode}): the destination's gathered blocks equal the source's`,
      theirs.digest === mine && theirs.mismatches === 0 && before !== mine,
      `source ${mine.slice(0, 12)}, destination ${String(theirs.digest).slice(0, 12)} (before ${
        before.slice(0, 12)
      }), ${theirs.mismatches} words off the pattern`,
    );
  }
  // Pull: the mapped cache is the source, this rank's the destination.
  xfer.fillPattern(kv, RECV, 601n);
  const theirs = String((await ask({ fill: true, ids: SEND, seed: "600" })).digest);
  const pull = xfer.peerCopy(view, SEND, kv, RECV, "copyEngineDirect");
  waitOk(pull, "pull");
  pull.dispose();
  const mine = digest(RECV);
  const bad = xfer.countPatternMismatches(kv, RECV, 600n);
  report(
    "pull (copyEngineDirect): the gathered blocks equal the other rank's",
    mine === theirs && bad === 0,
    `source ${theirs.slice(0, 12)}, destination ${mine.slice(0, 12)}, ${bad} words off the pattern`,
  );
  // The exporter keeps its cache until this mapping is closed.
  view.dispose();
  send({ done: true });
}

async function main(): Promise<void> {
  if (rank === 1) await destination();
  else await source();
  kv.dispose();
  model.dispose();
  out({ done: true });
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    report("scenario", false, e instanceof Error ? `${e.message}\n${e.stack}` : String(e));
    out({ done: true });
    process.exit(1);
  },
);
